/** `plugcheck write`: its flags (a write's, plus how long and what to record aside) and its run. */
import { resolve } from 'node:path'
import { type CliCommand, flagSchemas } from './command.js'
import { writeOptions } from './write-options.js'

export const writeCliCommand: CliCommand = {
  name: 'write',
  describe: 'on the machine under test: write synced records and stream their acks to the listener',
  options: (y) =>
    writeOptions(y)
      .option('duration', { type: 'string', describe: 'how long to run: seconds, or 30s, 5m, 1h, 1d (default: until killed)' })
      .option('discard-unverified', {
        type: 'boolean',
        default: false,
        describe: "write even though the path's last run vanished (its machine may have lost power) and was never verified",
      })
      .option('json', {
        type: 'boolean',
        default: false,
        describe: 'events as JSON lines on stdout, one object a line: announced, steady, progress, summary',
      })
      .option('trace-file', {
        type: 'string',
        hidden: true,
        describe: 'lab/bench: log each completed sync to this side file (PATH.jobK per job of --jobs N)',
      }),
  async run(args, io) {
    const { validate, writeOptionsOf } = await flagSchemas()
    const a = validate('write', args)
    const { writeCommand } = await import('../../client/write/jobs.js')
    return writeCommand(
      {
        ...writeOptionsOf(a),
        ...(a.tokenFile === undefined ? {} : { tokenFile: a.tokenFile }),
        discardUnverified: a.discardUnverified,
        json: a.json,
        ...(a.duration === undefined ? {} : { durationS: a.duration }),
        ...(a.traceFile === undefined ? {} : { traceFile: resolve(a.traceFile) }),
      },
      io,
    )
  },
}
