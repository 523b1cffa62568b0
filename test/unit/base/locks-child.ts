/**
 * Child of locks.test.ts: takes the lock on argv[2] (created), prints "locked" or "busy", and when
 * argv[3] is "hold" keeps it until killed.
 */
import { holdExclusiveLock } from '../../../src/base/locks.js'
import { usageError } from '../../../src/base/errors.js'

try {
  const lock = holdExclusiveLock(process.argv[2]!, true, () => usageError('busy'))
  console.log(lock === null ? 'missing' : 'locked')
  if (process.argv[3] === 'hold') setInterval(() => {}, 60_000)
} catch (error) {
  console.log((error as Error).message)
}
