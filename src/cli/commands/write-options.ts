/** The flags of a write, shared by `write` and `agent` (which writes the next cycle with them). */
import type { Argv } from 'yargs'
import { methodNames } from '../../native/methods.js'
import { patterns } from '../../record/patterns.js'
import { listenerTimeoutOption } from './command.js'

export function writeOptions<T>(y: Argv<T>) {
  return y
    .option('server', { type: 'string', demandOption: true, describe: 'listener HOST[:PORT]' })
    .option('file', { type: 'string', demandOption: true, describe: 'data file on the storage under test' })
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
      describe: 'append (file grows) or overwrite (random slots in place)',
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
