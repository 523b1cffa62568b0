/**
 * assert: a broken invariant throws an AssertionError with the message (a bug in plugcheck, exit 3
 * through the command's error report); a message given as a function is built only when it fails, so
 * the write loop's assertions cost nothing while they hold.
 */
import t from 'tap'
import { AssertionError, assert } from '../../../src/base/assert.js'

t.test('a condition that holds returns, and builds no message', async (t) => {
  let built = 0
  const message = () => {
    built++
    return 'never'
  }
  t.equal(assert(true, 'never'), undefined)
  for (let i = 0; i < 3; i++) assert(i < 3, message)
  t.equal(built, 0, 'the message function was not called')
})

t.test('a broken condition throws an AssertionError with the message', async (t) => {
  const thrown = catchOf(() => assert(false, 'seq 7 went backwards'))
  t.ok(thrown instanceof AssertionError, 'an AssertionError')
  t.ok(thrown instanceof Error, 'and an Error')
  t.equal((thrown as Error).message, 'seq 7 went backwards')
  t.equal((thrown as Error).name, 'AssertionError')
  t.match(String((thrown as Error).stack), /^AssertionError: seq 7 went backwards/, 'its stack says what it is')
})

t.test('a message function is called once, when the condition fails', async (t) => {
  let built = 0
  const thrown = catchOf(() =>
    assert(1 + 1 === 3, () => {
      built++
      return `built ${built}`
    }),
  )
  t.equal(built, 1)
  t.equal((thrown as Error).message, 'built 1')
})

t.test('it narrows: after assert, the compiler and the code agree the value is there', async (t) => {
  const found: string | undefined = ['a', 'b'].find((x) => x === 'b')
  assert(found !== undefined, 'b is in the list')
  t.equal(found.toUpperCase(), 'B')
})

/** What fn threw; a test failure when it threw nothing. */
function catchOf(fn: () => void): unknown {
  try {
    fn()
  } catch (error) {
    return error
  }
  throw new Error('expected a throw')
}
