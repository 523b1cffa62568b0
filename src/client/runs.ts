/** `plugcheck runs`: the runs a listener holds, one line each (or JSON). */
import { runtimeError } from '../errors.js'
import type { Endpoint } from './endpoint.js'
import type { Io } from './writer.js'

export interface RunsOptions {
  readonly server: Endpoint
  readonly json: boolean
  readonly token?: string
  readonly campaign?: string
  readonly listenerTimeoutMs: number
}

export async function runRuns(_options: RunsOptions, _io: Io): Promise<number> {
  throw runtimeError('plugcheck runs is not built yet')
}
