/** `plugcheck verify`: its flags (a listener or its directory, and the file) and its run. */
import { resolve } from 'node:path'
import { type CliCommand, flagSchemas, listenerTimeoutOption } from './command.js'

export const verifyCliCommand: CliCommand = {
  name: 'verify',
  describe: 'after the power cut and reboot: check that every acknowledged record survived',
  options: (y) =>
    y
      .option('server', { type: 'string', describe: 'listener HOST[:PORT]' })
      .option('acks', { type: 'string', describe: "a listener's --dir, read offline instead of --server" })
      .option('file', { type: 'string', demandOption: true, describe: 'the path given to write --file' })
      .option('run', { type: 'string', describe: 'judge this run id instead of the latest for this host and path' })
      .option('json', { type: 'boolean', default: false, describe: 'print one JSON document' })
      .option('token', { type: 'string', describe: "the listener's --token" })
      .option('token-file', { type: 'string', describe: "a file holding the listener's token on one line (instead of --token)" })
      .option('host', { type: 'string', describe: 'host name the writer ran on (default: this machine)' })
      .option('listener-timeout', listenerTimeoutOption),
  async run(args, io) {
    const { validate, tokenOfFlags } = await flagSchemas()
    const a = validate('verify', args)
    const token = tokenOfFlags(a)
    const { runVerify } = await import('../../client/verify/verify.js')
    return runVerify(
      {
        source: a.server !== undefined ? { server: a.server } : { acksDir: resolve(a.acks!) },
        file: a.file,
        json: a.json,
        listenerTimeoutMs: a.listenerTimeout,
        ...(a.run === undefined ? {} : { runId: a.run }),
        ...(token === undefined ? {} : { token }),
        ...(token === undefined || a.tokenFile === undefined ? {} : { tokenFile: a.tokenFile }),
        ...(a.host === undefined ? {} : { host: a.host }),
      },
      io,
    )
  },
}
