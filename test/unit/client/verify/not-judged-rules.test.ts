/**
 * The not-judged table (src/client/verify/not-judged-rules.ts) over every input: each lookup (the latest
 * group, or --run) with every subset of the checks finding something, against the rule as verify
 * wrote it before it became a table (a `??` chain, copied below); then that each check is asked only
 * while none before it found anything, that the table names every check once, and the exit code.
 */
import t from 'tap'
import {
  checksFor,
  firstNotJudged,
  lookups,
  notJudgedChecks,
  notJudgedExitCode,
  notJudgedRules,
  type Lookup,
  type NotJudgedCheck,
} from '../../../../src/client/verify/not-judged-rules.js'

/** Every subset of values. */
function* subsets<T>(values: readonly T[]): Generator<T[]> {
  for (let mask = 0; mask < 2 ** values.length; mask++) yield values.filter((_, i) => (mask & (2 ** i)) !== 0)
}

/** verify.ts before the table: fileChanged ?? (latest ? conflicting ?? stillRunning ?? replacedLater : stillRunning ?? supersededBy). */
function expected(lookup: Lookup, found: ReadonlySet<NotJudgedCheck>): NotJudgedCheck | null {
  const f = (check: NotJudgedCheck): NotJudgedCheck | null => (found.has(check) ? check : null)
  return (
    f('file-changed') ??
    (lookup === 'latest'
      ? (f('conflicting-claims') ?? f('still-running') ?? f('replaced-later'))
      : (f('still-running') ?? f('superseded-by')))
  )
}

t.test('every lookup and every subset of checks finding something: the reason verify gave before the table', async (t) => {
  let checked = 0
  for (const lookup of lookups) {
    for (const subset of subsets(notJudgedChecks)) {
      const found = new Set(subset)
      const asked: NotJudgedCheck[] = []
      const got = firstNotJudged(lookup, (check) => {
        asked.push(check)
        return found.has(check) ? check : null
      })
      const want = expected(lookup, found)
      t.equal(got, want, `${lookup}, found by ${subset.join(', ') || 'none'}`)
      // Asked in order, up to and including the one that decided (the checks read files and claims: no more than needed).
      const order = checksFor(lookup)
      t.same(
        asked,
        want === null ? order : order.slice(0, order.indexOf(want) + 1),
        `${lookup}, found by ${subset.join(', ') || 'none'}: checks asked`,
      )
      checked++
    }
  }
  t.equal(checked, lookups.length * 2 ** notJudgedChecks.length)
})

t.test('the table names every check exactly once, each for at least one lookup, and nothing found means judged', async (t) => {
  t.same([...notJudgedRules.map((r) => r.check)].sort(), [...notJudgedChecks].sort())
  t.equal(new Set(notJudgedRules.map((r) => r.check)).size, notJudgedRules.length, 'no check twice')
  for (const rule of notJudgedRules) {
    t.ok(rule.lookups.length > 0, `${rule.check} is asked for some lookup`)
    t.equal(new Set(rule.lookups).size, rule.lookups.length, `${rule.check}: no lookup twice`)
    for (const lookup of rule.lookups) t.ok(lookups.includes(lookup), `${rule.check}: ${lookup} is a lookup`)
  }
  t.same(checksFor('latest'), ['file-changed', 'conflicting-claims', 'still-running', 'replaced-later'])
  t.same(checksFor('chosen'), ['file-changed', 'still-running', 'superseded-by'])
})

t.test('a not-judged report exits 2, as a configuration to fix (no verdict on the storage)', async (t) => {
  t.equal(notJudgedExitCode, 2)
})
