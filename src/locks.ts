/**
 * Exclusive advisory locks (flock) that plugcheck holds for as long as it uses a file: a writer on
 * its data file, a listener on its directory's lock file. Whoever finds the lock held is refused with
 * the caller's message; the descriptor returned holds the lock until it is closed.
 */
import { closeQuietly, tryLockExclusive } from './native/libc.js'
import { describeSystemError, runtimeError, type PlugcheckError } from './errors.js'

/** Locks the open file fd (which must be a regular file); on any failure fd is closed. */
export function holdExclusiveLock(fd: number, path: string, heldByOther: () => PlugcheckError, isRegularFile: () => boolean = () => true): number {
  let locked: boolean
  try {
    if (!isRegularFile()) throw new Error('not a regular file')
    locked = tryLockExclusive(fd, path)
  } catch (error) {
    closeQuietly(fd)
    throw runtimeError(`could not lock ${path}: ${describeSystemError(error)}`)
  }
  if (!locked) {
    closeQuietly(fd)
    throw heldByOther()
  }
  return fd
}
