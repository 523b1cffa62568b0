/**
 * What a failed stdout does to the exit code. A command whose output is its product (report, runs,
 * verify, methods, bench, demo, --help, --version) exits 3 when that output could not be written
 * (`> report.json` on a full file system: ENOSPC), saying so on stderr, rather than 0 for a document
 * that does not exist. A reader that went away (`| head -1`: EPIPE) chose to stop reading: said
 * nothing, the code stays. The long runs (write, agent, listen) print a trail of the run, which is
 * the job: losing the trail never changes their code. A code already not 0 is kept (verify's 1 is
 * still its verdict); the message is said all the same.
 */
import { describeSystemError, exitCodes } from '../base/errors.js'

/** The commands whose stdout is a trail of the run they do, not what they produce. */
const trailCommands: ReadonlySet<string> = new Set(['write', 'agent', 'listen'])

/** Whether the command line asks for help or the version: that text is the product whatever the command. */
const asksForText = (args: readonly string[]): boolean => {
  const end = args.indexOf('--')
  return (end === -1 ? args : args.slice(0, end)).some((arg) => arg === '-h' || arg === '--help' || arg === '--version')
}

/** The exit code after stdout failed with error (undefined: it did not), and the message to say, if any. */
export function stdoutFailure(args: readonly string[], error: unknown, code: number): { code: number; message?: string } {
  if (error === undefined || error === null) return { code }
  if ((error as NodeJS.ErrnoException).code === 'EPIPE') return { code }
  const command = args.find((arg) => !arg.startsWith('-'))
  if (command !== undefined && trailCommands.has(command) && !asksForText(args)) return { code }
  return {
    code: code === exitCodes.ok ? exitCodes.runtime : code,
    message: `plugcheck: could not write to stdout: ${describeSystemError(error)}; the output is incomplete\n`,
  }
}
