/** `plugcheck report`: its flags and its run (a campaign's report from a listener's directory). */
import { type CliCommand, flagSchemas } from './command.js'

export const reportCliCommand: CliCommand = {
  name: 'report',
  describe: "a campaign's report from a listener's directory: per cycle, per method, per device; --html for a timeline",
  options: (y) =>
    y
      .option('dir', { type: 'string', demandOption: true, describe: "the listener's --dir (read only)" })
      .option('campaign', {
        type: 'string',
        array: true,
        describe: 'campaign name; several side by side (default: every campaign in the directory)',
      })
      .option('json', { type: 'boolean', default: false, describe: 'print one JSON document' })
      .option('html', { type: 'string', describe: 'also write a self-contained HTML report to this file' }),
  async run(args, io) {
    const a = (await flagSchemas()).validate('report', args)
    const { runReport } = await import('../../report/report.js')
    return runReport(
      {
        dir: a.dir,
        json: a.json,
        ...(a.campaign === undefined ? {} : { campaigns: a.campaign }),
        ...(a.html === undefined ? {} : { htmlFile: a.html }),
      },
      io,
    )
  },
}
