/**
 * The command line: yargs parses, zod validates (cli-args.ts), one command runs and returns an exit
 * code. Each command, its flags and its run, is a module of commands/; `commands` lists them in the
 * order `plugcheck --help` shows them. Nothing here calls process.exit (src/bin.ts does, once).
 */
import { writeSync } from 'node:fs'
import yargs from 'yargs'
import type { Io } from '../base/io.js'
import { PlugcheckError, exitCodes, usageError } from '../base/errors.js'
import { agentCliCommand } from './commands/agent.js'
import { benchCliCommand } from './commands/bench.js'
import type { CliCommand } from './commands/command.js'
import { demoCliCommand } from './commands/demo.js'
import { listenCliCommand } from './commands/listen.js'
import { methodsCliCommand } from './commands/methods.js'
import { reportCliCommand } from './commands/report.js'
import { runsCliCommand } from './commands/runs.js'
import { verifyCliCommand } from './commands/verify.js'
import { writeCliCommand } from './commands/write.js'
import { plugcheckVersion } from './version.js'
import {
  closestFlag,
  flagSpecOf,
  missingRequiredFlags,
  missingRequiredMessage,
  unknownArguments,
  unknownArgumentsMessage,
} from './strict-flags.js'

/** Every command, in the order of `plugcheck --help`. */
export const commands: readonly CliCommand[] = [
  listenCliCommand,
  writeCliCommand,
  agentCliCommand,
  verifyCliCommand,
  demoCliCommand,
  benchCliCommand,
  runsCliCommand,
  reportCliCommand,
  methodsCliCommand,
]

const commandNames = commands.map((command) => command.name)

export const processIo: Io = {
  out: (text) => void process.stdout.write(text),
  outNow: (text) => writeNow(1, text),
  err: (text) => void process.stderr.write(text),
  statusTty: process.stderr.isTTY === true,
}

/**
 * Writes text to fd before returning. stdout to a pipe is asynchronous in Node, so a line written
 * with process.stdout.write can still be queued when the process is SIGKILLed; a writer's run line
 * must be out first. A full non-blocking pipe (EAGAIN) falls back to the asynchronous write. A reader
 * that went away (EPIPE: `plugcheck write ... | head -1`) loses the trail, never the run.
 */
function writeNow(fd: number, text: string): void {
  const bytes = Buffer.from(text)
  let done = 0
  try {
    while (done < bytes.length) done += writeSync(fd, bytes, done)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EAGAIN' && done < bytes.length) process.stdout.write(bytes.subarray(done))
  }
}

/**
 * `--reserve -1%` as `--reserve=-1%`: yargs reads a value that starts with a dash and is not a number
 * as more flags ("Unknown arguments: 1, %"); joined, the flag's own check names what is wrong.
 */
function joinDashValues(argv: readonly string[]): string[] {
  const out: string[] = []
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    const next = argv[i + 1]
    if (/^--[a-z][a-z-]*$/.test(arg) && next !== undefined && /^-\d/.test(next) && !Number.isFinite(Number(next))) {
      out.push(`${arg}=${next}`)
      i++
    } else out.push(arg)
  }
  return out
}

/**
 * Refuses what the command does not take (strict-flags.ts) before yargs parses: yargs would first
 * complain of a missing required flag, the one a misspelt flag was meant to give. Then a required
 * flag left out is named with what it takes, rather than in yargs' words. A call for help
 * (`-h`, `--help`) is answered whatever else is on the line.
 */
function refuseUnknownArguments(args: readonly string[]): void {
  const end = args.indexOf('--')
  if ((end === -1 ? args : args.slice(0, end)).some((arg) => arg === '-h' || arg === '--help')) return
  const at = args.findIndex((arg) => !arg.startsWith('-'))
  if (at === -1 || (end !== -1 && at > end)) return
  const command = commands.find((c) => c.name === args[at])
  if (command === undefined) {
    const meant = closestFlag(args[at]!, commandNames)
    throw usageError(
      `unknown command ${args[at]}${meant === undefined ? '' : ` (did you mean ${meant}?)`}`,
      'plugcheck --help lists the commands',
    )
  }
  const rest = args.slice(at + 1)
  const spec = flagSpecOf(command.options)
  const unknown = unknownArguments(rest, spec)
  if (unknown.length > 0) {
    const { message, hint } = unknownArgumentsMessage(command.name, unknown)
    throw usageError(message, hint)
  }
  // `--version` is answered as yargs answers it, whatever flags are missing.
  if (rest.includes('--version')) return
  const missing = missingRequiredFlags(rest, spec)
  if (missing.length === 0) return
  const { message, hint } = missingRequiredMessage(command.name, missing)
  throw usageError(message, hint)
}

export async function main(argv: readonly string[], io: Io = processIo): Promise<number> {
  let run: (() => Promise<number>) | undefined
  const args = joinDashValues(argv)
  refuseUnknownArguments(args)
  let parser = yargs(args)
    .scriptName('plugcheck')
    .usage('$0 <command> [options]\n\nProves whether a storage stack keeps what fsync acknowledged, across a real power cut.')
    .strict()
    // An array flag given again adds its values (`report --campaign a --campaign b`); any other flag given
    // twice was refused above (refuseUnknownArguments), so none reaches yargs to become a list.
    .parserConfiguration({ 'duplicate-arguments-array': true })
    .exitProcess(false)
    .fail((message, error) => {
      throw error instanceof PlugcheckError ? error : usageError(message ?? error?.message ?? 'bad command line')
    })
  // yargs calls the handler of the command it matched; the command runs after parsing, outside yargs.
  for (const command of commands)
    parser = parser.command(command.name, command.describe, command.options, (args) => {
      run = () => command.run(args, io)
    })
  parser = parser
    .demandCommand(1, 'give a command: listen, write, verify, agent, runs, report, bench, demo or methods')
    .help()
    .alias('h', 'help')
    .version(plugcheckVersion())
    .wrap(Math.min(110, process.stdout.columns ?? 110))

  await parser.parseAsync()
  return run === undefined ? exitCodes.ok : run()
}

/** One line naming the problem, a hint where one helps; no stack trace for operating errors. */
export function reportError(error: unknown, io: Io): number {
  if (error instanceof PlugcheckError) {
    io.err(`plugcheck: ${error.message}\n`)
    if (error.hint !== undefined) io.err(`hint: ${error.hint}\n`)
    return error.exitCode
  }
  io.err(`plugcheck: internal error: ${(error as Error)?.stack ?? String(error)}\n`)
  return exitCodes.runtime
}
