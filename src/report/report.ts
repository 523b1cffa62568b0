/** `plugcheck report`: a campaign's report from a listener's directory (read only). */
import { runtimeError } from '../errors.js'
import type { Io } from '../client/writer.js'

export interface ReportOptions {
  /** The listener's --dir. */
  readonly dir: string
  /** Campaign names; all campaigns in the directory when absent. */
  readonly campaigns?: readonly string[]
  readonly json: boolean
  readonly htmlFile?: string
}

export async function runReport(_options: ReportOptions, _io: Io): Promise<number> {
  throw runtimeError('plugcheck report is not built yet')
}
