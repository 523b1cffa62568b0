/**
 * What a command of the command line is: its name and line in `plugcheck --help`, its flags (yargs,
 * which `<command> --help` lists), and its run, which validates the flags (zod, cli-args.ts), loads
 * the command's module and returns an exit code. The pieces two or more commands share live here too.
 */
import type { Argv } from 'yargs'
import type { Io } from '../../base/io.js'

export interface CliCommand {
  readonly name: string
  /** Its line in `plugcheck --help`. */
  readonly describe: string
  /** Its flags, in the order `<command> --help` lists them. */
  readonly options: (y: Argv) => Argv<object>
  /** Validates the flags yargs parsed, loads the command's module, runs it: the exit code. */
  readonly run: (args: unknown, io: Io) => Promise<number>
}

/**
 * The flag schemas, and each command's module, load when that command runs: `--help` and `--version`
 * load yargs and the few constants their text shows, never zod, koffi or msgpackr (bench/startup.ts).
 */
export const flagSchemas = () => import('../cli-args.js')

/** --listener-timeout SECONDS, for write, verify, agent and runs (validated in cli-args.ts). */
export const listenerTimeoutOption = {
  type: 'string',
  default: 10,
  describe: 'seconds (or 30s, 2m) to wait for the listener (connect, answers, recorded reports) before giving up',
} as const
