/** Where a command writes: results to out, messages to err. Tests pass their own to read both. */
export interface Io {
  readonly out: (text: string) => void
  readonly err: (text: string) => void
  readonly statusTty: boolean
  /** out, but written before it returns (the process may be SIGKILLed right after); defaults to out. */
  readonly outNow?: (text: string) => void
}
