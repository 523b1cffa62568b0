/** `plugcheck agent`: its flags (a write's, for the next cycle, plus --print-service) and its run. */
import { type CliCommand, flagSchemas } from './command.js'
import { writeOptions } from './write-options.js'

export const agentCliCommand: CliCommand = {
  name: 'agent',
  describe: 'on the machine under test, started at boot: verify the last cycle, report it, and write the next one of the campaign',
  options: (y) =>
    writeOptions(y).option('print-service', {
      choices: ['systemd', 'windows'] as const,
      describe: 'print a systemd unit or a Windows scheduled task that starts this agent at boot, and exit',
    }),
  async run(args, io) {
    const { validate, writeOptionsOf } = await flagSchemas()
    const a = validate('agent', args)
    const { runAgent } = await import('../../client/agent/agent.js')
    return runAgent(
      {
        ...writeOptionsOf(a),
        ...(a.printService === undefined ? {} : { printService: a.printService }),
        ...(a.tokenFile === undefined ? {} : { tokenFile: a.tokenFile }),
      },
      process.argv.slice(2),
      io,
    )
  },
}
