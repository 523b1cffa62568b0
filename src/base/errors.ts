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

/**
 * Linux errnos libuv has no name for, which Node reports as "Unknown system error -74": file systems
 * return them for data they cannot give back (ext4's EFSBADCRC is EBADMSG, EFSCORRUPTED is EUCLEAN).
 */
const unnamedLinuxErrnos: Readonly<Record<number, { readonly code: string; readonly text: string }>> = {
  74: { code: 'EBADMSG', text: 'bad message: a checksum failed' },
  117: { code: 'EUCLEAN', text: 'structure needs cleaning: the file system is corrupted' },
}

/** The errno's name when Node gave none ("Unknown system error -74" becomes EBADMSG), else Node's code. */
export function systemErrorCode(error: unknown): string | undefined {
  const e = error as { code?: unknown; errno?: unknown }
  if (typeof e.code !== 'string') return undefined
  if (!e.code.startsWith('Unknown system error')) return e.code
  const errno = typeof e.errno === 'number' ? e.errno : Number(/-?\d+$/.exec(e.code)?.[0])
  return (process.platform === 'linux' ? unnamedLinuxErrnos[Math.abs(errno)]?.code : undefined) ?? `errno ${Math.abs(errno)}`
}

/** "EACCES (permission denied)" from a Node or native error, for one-line messages. */
export function describeSystemError(error: unknown): string {
  const e = error as { code?: string; errno?: number; message?: string }
  if (typeof e.code === 'string' && e.code.startsWith('Unknown system error')) {
    const named = process.platform === 'linux' ? unnamedLinuxErrnos[Math.abs(Number(e.errno ?? /-?\d+$/.exec(e.code)?.[0]))] : undefined
    return named === undefined ? `${systemErrorCode(error)} (${e.code.toLowerCase()})` : `${named.code} (${named.text})`
  }
  if (typeof e.code === 'string' && typeof e.message === 'string') {
    const text = /^[A-Z0-9_]+: ([^,]+)/.exec(e.message)?.[1]
    return text === undefined ? e.code : `${e.code} (${text})`
  }
  return e.message ?? String(error)
}
