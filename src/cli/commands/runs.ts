/** `plugcheck runs`: its flags and its run (list a listener's runs, or prune its --dir). */
import { type CliCommand, flagSchemas, listenerTimeoutOption } from './command.js'

export const runsCliCommand: CliCommand = {
  name: 'runs',
  describe:
    'list the runs a listener holds: host, path, method, acked, started, ended or vanished, verdict; or prune old ended runs from its --dir',
  options: (y) =>
    y
      .option('server', { type: 'string', describe: 'listener HOST[:PORT]' })
      .option('prune', {
        type: 'boolean',
        default: false,
        describe: "remove runs that ended over --older-than ago from the listener's --dir (listener stopped)",
      })
      .option('older-than', { type: 'string', describe: 'prune: runs that ended longer ago than this (30d, 12h, 90m, 45s)' })
      .option('dir', { type: 'string', describe: "prune: the listener's --dir" })
      .option('dry-run', { type: 'boolean', default: false, describe: 'prune: say what would be pruned, remove nothing' })
      .option('campaign', { type: 'string', describe: 'only the runs of this campaign' })
      .option('json', { type: 'boolean', default: false, describe: 'print one JSON document' })
      .option('token', { type: 'string', describe: "the listener's --token" })
      .option('token-file', { type: 'string', describe: "a file holding the listener's token on one line (instead of --token)" })
      .option('listener-timeout', listenerTimeoutOption),
  async run(args, io) {
    const { validate, tokenOfFlags } = await flagSchemas()
    const a = validate('runs', args)
    if (a.prune) {
      const { runPrune } = await import('../../server/listen/prune.js')
      return runPrune({ dir: a.dir!, olderThanMs: a.olderThan!, dryRun: a.dryRun, json: a.json }, io)
    }
    const token = tokenOfFlags(a)
    const { runRuns } = await import('../runs.js')
    return runRuns(
      {
        server: a.server!,
        json: a.json,
        listenerTimeoutMs: a.listenerTimeout,
        ...(token === undefined ? {} : { token }),
        ...(a.campaign === undefined ? {} : { campaign: a.campaign }),
      },
      io,
    )
  },
}
