/**
 * An operating error from a native call, shaped like Node's fs errors: `code` is the POSIX name Node
 * would use (ENOENT, EACCES, EINVAL, ...) on every platform, so callers test one set of codes; the
 * message carries the platform's own description (and, on Windows, the Win32 error number).
 */
export class NativeError extends Error {
  readonly code: string
  readonly errno: number
  readonly syscall: string
  readonly path?: string
  /**
   * @param errno negative, as in Node's fs errors (the POSIX number where there is one)
   * @param description lower case, e.g. "permission denied"
   */
  constructor(syscall: string, code: string, errno: number, description: string, path?: string) {
    super(`${code}: ${description}, ${syscall}${path === undefined ? '' : ` '${path}'`}`)
    this.name = 'NativeError'
    this.code = code
    this.errno = errno
    this.syscall = syscall
    if (path !== undefined) this.path = path
  }
}
