/**
 * Operating errors with their exit code (docs/exit-codes.md): 2 usage or configuration, 3 runtime failure.
 * Verify's findings are not errors; they are values in its report (exit 1 and 4 come from the report).
 */
export const exitCodes = { ok: 0, lossFound: 1, usage: 2, runtime: 3, inconclusive: 4 } as const

export class PlugcheckError extends Error {
  constructor(
    message: string,
    readonly exitCode: 2 | 3,
    readonly hint?: string,
  ) {
    super(message)
    this.name = 'PlugcheckError'
  }
}

export const usageError = (message: string, hint?: string): PlugcheckError => new PlugcheckError(message, exitCodes.usage, hint)
export const runtimeError = (message: string, hint?: string): PlugcheckError => new PlugcheckError(message, exitCodes.runtime, hint)

/** "EACCES (permission denied)" from a Node or native error, for one-line messages. */
export function describeSystemError(error: unknown): string {
  const e = error as { code?: string; message?: string }
  if (typeof e.code === 'string' && typeof e.message === 'string') {
    const text = /^[A-Z0-9_]+: ([^,]+)/.exec(e.message)?.[1]
    return text === undefined ? e.code : `${e.code} (${text})`
  }
  return e.message ?? String(error)
}
