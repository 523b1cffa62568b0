/**
 * A run id is 16 lower-case hex digits and nothing else: it names a directory in the listener's store
 * (runs/<id>/), so a path, a separator, a line end or another case must never pass. maxGroupRuns is the
 * one bound on a group's runs.
 */
import t from 'tap'
import { maxGroupRuns, runIdSchema } from '../../../src/record/run-id.js'
import { maxGroupRuns as maxGroupRunsOfNames } from '../../../src/protocol/names.js'

t.test('16 lower-case hex digits pass, unchanged', async (t) => {
  for (const id of ['0123456789abcdef', 'ffffffffffffffff', '0000000000000000', 'deadbeefcafe0042']) {
    const parsed = runIdSchema.safeParse(id)
    t.ok(parsed.success, id)
    t.equal(parsed.data, id)
  }
})

t.test('anything else is refused, with the rule in its message', async (t) => {
  const refused: unknown[] = [
    '',
    '0123456789abcde', // 15
    '0123456789abcdef0', // 17
    '0123456789ABCDEF',
    '0123456789abcdeF',
    '0123456789abcdeg',
    ' 0123456789abcdef',
    '0123456789abcdef ',
    '0123456789abcdef\n',
    '\n0123456789abcdef',
    '../../etc/passwd',
    '0123456789abc/ef',
    '0123456789abc\u0000ef',
    '０123456789abcdef', // a full-width zero
    0x0123456789abcdefn,
    1234567890123456,
    null,
    undefined,
    ['0123456789abcdef'],
  ]
  for (const id of refused) {
    const parsed = runIdSchema.safeParse(id)
    t.notOk(parsed.success, typeof id === 'string' ? JSON.stringify(id) : String(id))
  }
  t.equal(runIdSchema.safeParse('0123456789ABCDEF').error?.issues[0]?.message, 'a run id is 16 lower-case hex digits')
})

t.test('maxGroupRuns: one positive bound, the same wherever it is imported from', async (t) => {
  t.ok(Number.isSafeInteger(maxGroupRuns) && maxGroupRuns > 0)
  t.equal(maxGroupRunsOfNames, maxGroupRuns, 'protocol/names.ts passes on the same bound')
})
