/** `plugcheck demo`: its flags and its run (a one-machine rehearsal). */
import { type CliCommand, flagSchemas } from './command.js'

export const demoCliCommand: CliCommand = {
  name: 'demo',
  describe: 'one-machine rehearsal: listener, writer, SIGKILL, verify, verdict',
  options: (y) =>
    y
      .option('method', { type: 'string', default: 'fdatasync', describe: 'sync method to rehearse with' })
      .option('kill-after', { type: 'string', default: 3, describe: 'seconds (or 5s, 1m) before the writer is killed' })
      .option('json', { type: 'boolean', default: false, describe: "print verify's JSON" }),
  async run(args, io) {
    const a = (await flagSchemas()).validate('demo', args)
    const { runDemo } = await import('../demo.js')
    return runDemo({ method: a.method[0]!, killAfterS: a.killAfter, json: a.json }, io)
  },
}
