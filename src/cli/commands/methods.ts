/** `plugcheck methods`: its flags and its run. */
import { type CliCommand, flagSchemas } from './command.js'

export const methodsCliCommand: CliCommand = {
  name: 'methods',
  describe: "this platform's sync methods: available or not and why, the calls each makes, what --direct does",
  options: (y) => y.option('json', { type: 'boolean', default: false, describe: 'print one JSON document' }),
  async run(args, io) {
    const a = (await flagSchemas()).validate('methods', args)
    const { runMethods } = await import('../methods.js')
    return runMethods({ json: a.json }, io)
  },
}
