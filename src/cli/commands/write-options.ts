/** The flags of a write, shared by `write` and `agent` (which writes the next cycle with them). */
import type { Argv } from 'yargs'
import { methodNames } from '../../native/methods.js'
import { patterns, publishWays } from '../../record/patterns.js'
import { listenerTimeoutOption } from './command.js'

export function writeOptions<T>(y: Argv<T>) {
  return y
    .option('server', { type: 'string', demandOption: true, describe: 'listener HOST[:PORT]' })
    .option('file', {
      type: 'string',
      demandOption: true,
      describe: 'data file on the storage under test (--pattern files: a directory plugcheck makes there)',
    })
    .option('method', { type: 'string', default: 'fdatasync', describe: `sync method, or a comma list: ${methodNames.join(', ')}` })
    .option('direct', {
      type: 'boolean',
      default: false,
      describe: 'bypass the OS cache (O_DIRECT, F_NOCACHE, FILE_FLAG_NO_BUFFERING; record size a multiple of 4096)',
    })
    .option('record-size', { type: 'string', default: '8192', describe: 'bytes per record, a multiple of 512' })
    .option('size', { type: 'string', default: '256MiB', describe: 'data file size; append wraps to the start when full' })
    .option('pattern', {
      choices: patterns,
      default: 'append' as const,
      describe: 'append (file grows), overwrite (random slots in place) or files (each record its own file in the --file directory)',
    })
    .option('dir-sync', {
      type: 'boolean',
      describe: '--pattern files: sync the directory after each record file is published (the default); --no-dir-sync leaves it out',
    })
    .option('publish', {
      choices: publishWays,
      describe: '--pattern files: how a record file gets its final name: rename (the default), or link then unlink of the temporary name',
    })
    .option('keep-files', {
      type: 'number',
      describe: '--pattern files: record files kept; each new one past them deletes the oldest (default: --size / --record-size - 1)',
    })
    .option('token', { type: 'string', describe: "the listener's --token" })
    .option('token-file', { type: 'string', describe: "a file holding the listener's token on one line (instead of --token)" })
    .option('force', { type: 'boolean', default: false, describe: 'replace a file that is not a plugcheck data file' })
    .option('listener-timeout', listenerTimeoutOption)
    .option('jobs', {
      type: 'number',
      default: 1,
      describe: 'writer threads, each with its own data file (PATH.jobK), run and connection; verify judges them together',
    })
}
