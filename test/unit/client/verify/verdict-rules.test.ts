/**
 * verify's verdict tables (src/client/verify/verdict-rules.ts) over every input: a run's finding from its
 * counts, a run's verdict per role and finding, a method's over every mix of findings of 1 to 4 jobs,
 * the group's over every mix of 1 to 3 method verdicts, and each verdict's exit code. Each is checked
 * against the rule as the README states it, written out here independently of the tables.
 */
import t from 'tap'
import {
  findingOf,
  findingOfFacts,
  findingRows,
  findings,
  groupVerdict,
  groupVerdictOf,
  judgeMethods,
  runVerdict,
  verdictExitCodes,
  verdictTable,
  groupVerdictOrder,
  type Finding,
  type RunFacts,
  type JudgedRun,
  type Role,
} from '../../../../src/client/verify/verdict-rules.js'
import type { RunVerdict } from '../../../../src/client/verify/verdict-rules.js'

const roles: readonly Role[] = ['tested', 'control']
const verdicts: readonly RunVerdict[] = ['pass', 'fail', 'inconclusive']

/** Every sequence of length n over values. */
function* sequences<T>(values: readonly T[], n: number): Generator<T[]> {
  if (n === 0) return yield []
  for (const head of values) for (const tail of sequences(values, n - 1)) yield [head, ...tail]
}

t.test(
  "a run's finding: nothing acked is idle whatever the file; then a bad superblock; then lost records (seen while running or not)",
  async (t) => {
    for (const acked of [0, 1, 20])
      for (const bad of [0, 1, 20])
        for (const superblockValid of [true, false])
          for (const lostWhileRunning of [false, true]) {
            const expected: Finding =
              acked === 0
                ? 'idle'
                : !superblockValid
                  ? 'file-lost'
                  : bad > 0
                    ? lostWhileRunning
                      ? 'lost-running'
                      : 'records-lost'
                    : 'kept'
            t.equal(
              findingOf(acked, bad, superblockValid, lostWhileRunning),
              expected,
              `acked ${acked}, bad ${bad}, superblock ${superblockValid ? 'valid' : 'not valid'}${lostWhileRunning ? ', ended storage-lost' : ''}`,
            )
          }
  },
)

/** The README's rule for one run (or one method whose jobs all showed the same). */
function expectedRun(role: Role, finding: Finding): RunVerdict {
  if (finding === 'idle') return 'inconclusive' // nothing acknowledged: the cut tested nothing
  if (finding === 'file-lost') return 'fail' // a synced file creation lost, control or not
  if (role === 'tested') return finding === 'records-lost' || finding === 'lost-running' ? 'fail' : 'pass'
  return finding === 'records-lost' ? 'pass' : 'inconclusive' // the control: its losses prove the cut was real, unless the storage lost them while the run went on (no cut)
}

t.test("a run's verdict for every role and finding", async (t) => {
  for (const role of roles)
    for (const finding of findings) t.equal(runVerdict(role, finding), expectedRun(role, finding), `${role} ${finding}`)
})

/** The README's rule for a method whose jobs showed these findings: the jobs test it together, an idle job is excused. */
function expectedMethod(role: Role, jobs: readonly Finding[]): RunVerdict {
  if (jobs.includes('file-lost')) return 'fail'
  if (role === 'tested') {
    if (jobs.includes('records-lost') || jobs.includes('lost-running')) return 'fail'
    return jobs.includes('kept') ? 'pass' : 'inconclusive'
  }
  // A run that ended storage-lost stopped the write before any cut: no control job's losses show one.
  return jobs.includes('records-lost') && !jobs.includes('lost-running') ? 'pass' : 'inconclusive'
}

function run(method: string, finding: Finding): JudgedRun {
  const acked = finding === 'idle' ? 0 : 20
  const lost = finding === 'records-lost' || finding === 'lost-running' ? 3 : finding === 'file-lost' ? 20 : 0
  return {
    method,
    direct: false,
    role: method === 'none' ? 'control' : 'tested',
    acked,
    lost,
    torn: 0,
    corrupt: 0,
    superblock: { kind: finding === 'file-lost' ? 'missing' : 'valid' },
    ended: finding === 'lost-running' ? 'storage-lost' : null,
  }
}

t.test("a method's verdict over every mix of its jobs' findings, 1 to 4 jobs, tested and control", async (t) => {
  let checked = 0
  for (const [role, method] of [
    ['tested', 'fdatasync'],
    ['control', 'none'],
  ] as const) {
    for (let jobs = 1; jobs <= 4; jobs++) {
      for (const mix of sequences(findings, jobs)) {
        const [judged] = judgeMethods(mix.map((f) => run(method, f)))
        if (judged!.verdict !== expectedMethod(role, mix))
          t.fail(`${role} jobs ${mix.join(', ')}: ${judged!.verdict}, expected ${expectedMethod(role, mix)}`)
        else checked++
      }
    }
  }
  t.equal(checked, 2 * (5 + 25 + 125 + 625))
})

/** The README's rule for a group: fail if any method failed; else inconclusive if any tested nothing; else pass. */
function expectedGroup(of: readonly RunVerdict[]): RunVerdict {
  if (of.includes('fail')) return 'fail'
  return of.includes('inconclusive') ? 'inconclusive' : 'pass'
}

t.test("the group's verdict over every mix of 1 to 3 method verdicts", async (t) => {
  for (let n = 1; n <= 3; n++) for (const mix of sequences(verdicts, n)) t.equal(groupVerdictOf(mix), expectedGroup(mix), mix.join(', '))
})

t.test('a whole group: two methods and a control over 2 jobs, every mix of findings', async (t) => {
  let checked = 0
  const methods = ['fdatasync', 'fsync', 'none']
  for (const mix of sequences(findings, methods.length * 2)) {
    const runs = mix.map((f, i) => run(methods[i % methods.length]!, f))
    const expected = expectedGroup(
      methods.map((m, i) => expectedMethod(m === 'none' ? 'control' : 'tested', [mix[i]!, mix[i + methods.length]!])),
    )
    if (groupVerdict(runs) !== expected) t.fail(`${mix.join(', ')}: ${groupVerdict(runs)}, expected ${expected}`)
    else checked++
  }
  t.equal(checked, 5 ** 6)
})

t.test('methods are told apart by --direct too, and come in the order of their runs', async (t) => {
  const runs = [run('fdatasync', 'kept'), { ...run('fdatasync', 'idle'), direct: true }, run('none', 'records-lost')]
  t.same(
    judgeMethods(runs).map((m) => [m.label, m.verdict]),
    [
      ['fdatasync', 'pass'],
      ['fdatasync --direct', 'inconclusive'],
      ['none', 'pass'],
    ],
  )
})

t.test('exit codes: pass 0, fail 1, inconclusive 4', async (t) => {
  t.same(verdictExitCodes, { pass: 0, fail: 1, inconclusive: 4 })
})

t.test('the finding rows: every combination of facts has a row, and every row decides some combination (none shadowed)', async (t) => {
  const firstRowOf = new Map<number, number>()
  let combinations = 0
  for (const acked of [false, true])
    for (const superblockValid of [false, true])
      for (const badRecords of [false, true])
        for (const lostWhileRunning of [false, true]) {
          const facts: RunFacts = { acked, superblockValid, badRecords, lostWhileRunning }
          const first = findingRows.findIndex((r) => Object.entries(r.when).every(([k, v]) => facts[k as keyof RunFacts] === v))
          t.ok(first >= 0, `a row for ${JSON.stringify(facts)}`)
          firstRowOf.set(first, (firstRowOf.get(first) ?? 0) + 1)
          t.equal(findingOfFacts(facts), findingRows[first]!.finding)
          combinations++
        }
  t.equal(combinations, 16)
  t.same(
    [...firstRowOf.keys()].sort(),
    findingRows.map((_, i) => i),
    'every row is the first match for some facts',
  )
  t.same([...new Set(findingRows.map((r) => r.finding))].sort(), [...findings].sort(), 'every finding has a row')
})

t.test('the verdict and exit-code tables: every role and finding once, every verdict once', async (t) => {
  t.same(Object.keys(verdictTable).sort(), [...roles].sort())
  for (const role of roles) t.same(Object.keys(verdictTable[role]).sort(), [...findings].sort(), role)
  t.equal(new Set(findings).size, findings.length, 'findings: none twice')
  t.same([...groupVerdictOrder].sort(), [...verdicts].sort(), 'the group order names every verdict once')
  t.same(Object.keys(verdictExitCodes).sort(), [...verdicts].sort())
})
