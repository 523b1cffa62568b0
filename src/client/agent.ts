/**
 * `plugcheck agent`: what the machine under test starts at boot during a campaign. It verifies the
 * last run of this host and path (as `verify` does) and reports the verdicts to the listener, then, if
 * the listener's campaign has cycles left, writes the next cycle until the power goes.
 */
import { runtimeError } from '../errors.js'
import type { Io, WriteOptions } from './writer.js'

export interface AgentOptions extends Omit<WriteOptions, 'durationS' | 'traceFile'> {
  /** Print a service definition that starts this agent at boot, and exit. */
  readonly printService?: 'systemd' | 'windows'
}

/** argv is the agent's own command line, for --print-service to repeat. */
export async function runAgent(_options: AgentOptions, _argv: readonly string[], _io: Io): Promise<number> {
  throw runtimeError('plugcheck agent is not built yet')
}
