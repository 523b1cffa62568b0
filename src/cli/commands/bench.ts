/** `plugcheck bench`: its flags and its run. */
import { type CliCommand, flagSchemas } from './command.js'

export const benchCliCommand: CliCommand = {
  name: 'bench',
  describe: "pg_test_fsync's tables for this storage, with the environment and a check of which figures are too good to be true",
  options: (y) =>
    y
      .option('file', {
        type: 'string',
        describe: 'scratch file, or a directory to create it in (default: plugcheck-bench.<random> here)',
      })
      .option('secs', { type: 'string', default: 5, describe: 'seconds per test (fractions allowed), or 2s, 1m' })
      .option('record-size', { type: 'string', default: '8192', describe: 'bytes per write, a multiple of 512' })
      .option('json', { type: 'boolean', default: false, describe: 'print one JSON document' }),
  async run(args, io) {
    const a = (await flagSchemas()).validate('bench', args)
    const { runBench } = await import('../../bench/bench.js')
    return runBench(
      { secsPerTest: a.secs, recordSizeBytes: a.recordSize, json: a.json, ...(a.file === undefined ? {} : { file: a.file }) },
      io,
    )
  },
}
