/**
 * Exclusive locks that plugcheck holds for as long as it uses a file: a writer on its data file, a
 * listener on its directory's lock file. Whoever finds the lock held is refused with the caller's
 * message; the lock lasts until release() or the process's exit, however it exits.
 */
import { nativePort, type FileLock } from '../native/index.js'
import { describeSystemError, runtimeError, type PlugcheckError } from './errors.js'

/** Locks the regular file at path (created when create is set); null when there is none. */
export function holdExclusiveLock(path: string, create: boolean, heldByOther: () => PlugcheckError): FileLock | null {
  let lock: FileLock | 'busy' | 'missing'
  try {
    lock = nativePort().lockExclusive(path, create)
  } catch (error) {
    throw runtimeError(`could not lock ${path}: ${describeSystemError(error)}`)
  }
  if (lock === 'busy') throw heldByOther()
  if (lock === 'missing') return null
  return lock
}
