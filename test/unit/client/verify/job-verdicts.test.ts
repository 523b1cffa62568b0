/**
 * verify's verdict and headline for the jobs of one method (write --jobs N): a job that acknowledged
 * nothing (its write failed before its first record) tested nothing, and the group is judged on the
 * jobs that did; the headline names each method once, and the jobs when only some of them are meant.
 * Several methods keep their rules: a method none of whose runs acked is inconclusive. The control is
 * judged over all its jobs: one job's control losing records shows the cut was real, and a job that
 * acknowledged nothing is excused beside a control as beside a tested method. Every combination of
 * what the runs of fdatasync,none --jobs 2 can show is checked against the rules written out here.
 * Crafted data files (the real format) and a stand-in listener on 127.0.0.1.
 */
import t from 'tap'
import { join } from 'node:path'
import type { MethodName } from '../../../../src/native/registry.js'
import { rmSync } from 'node:fs'
import { craftMeta, craftRun, fakeListener, listenerWith, range, writeDataFile } from '../../../fixtures/crafted-run.js'
import { runInProcess, tempDir } from '../../../fixtures/cli.js'

const groupId = 'd000000000000000'

/** A run per job and method: `kept` are the seqs of 1..20 still in its file; acked 0 means its write stopped before any record. */
interface Job {
  readonly method: MethodName
  readonly job: number
  readonly acked: 0 | 20
  readonly kept: readonly number[]
}

async function verifyGroup(t: { teardown(fn: () => unknown): void }, jobs: readonly Job[], methods: number) {
  const file = join(tempDir(t), 'data')
  const runs = jobs.map((j, i) => {
    const path = `${methods > 1 ? `${file}.${j.method}` : file}.job${j.job}`
    const meta = craftMeta(`d00000000000000${i + 1}`, path, { groupId, requestedPath: file, method: j.method })
    writeDataFile(meta, j.kept, { sizeSlots: 20 })
    return craftRun(meta, j.acked)
  })
  const server = await listenerWith(t, runs)
  const text = await runInProcess(['verify', '--server', server, '--file', file])
  const json = await runInProcess(['verify', '--server', server, '--file', file, '--json'])
  return {
    code: text.code,
    headline: text.stdout.split('\n')[0],
    text: text.stdout,
    verdict: (JSON.parse(json.stdout) as { verdict: string }).verdict,
    jsonCode: json.code,
  }
}

const all = range(1, 20)
const passed = (job: number, method: MethodName = 'fdatasync'): Job => ({ method, job, acked: 20, kept: all })
const idle = (job: number, method: MethodName = 'fdatasync'): Job => ({ method, job, acked: 0, kept: [] })

t.test('--jobs 4, job 4 acked nothing, jobs 1-3 passed: pass, judged on the three, job 4 named', async (t) => {
  const r = await verifyGroup(t, [passed(1), passed(2), passed(3), idle(4)], 1)
  t.same([r.code, r.jsonCode, r.verdict], [0, 0, 'pass'])
  t.equal(r.headline, 'PASS: every acknowledged record of all 3 runs survived; fdatasync (job 4 of 4) acknowledged nothing.')
})

t.test('--jobs 4, job 2 lost a record, job 4 acked nothing: fail naming job 2', async (t) => {
  const r = await verifyGroup(t, [passed(1), { method: 'fdatasync', job: 2, acked: 20, kept: range(1, 19) }, passed(3), idle(4)], 1)
  t.same([r.code, r.jsonCode, r.verdict], [1, 1, 'fail'])
  t.equal(r.headline, 'FAIL: fdatasync (job 2 of 4) lost acknowledged data (1 of 4 tested runs).')
})

t.test('--jobs 3, every job acked nothing: inconclusive, the method named once', async (t) => {
  const r = await verifyGroup(t, [idle(1), idle(2), idle(3)], 1)
  t.same([r.code, r.jsonCode, r.verdict], [4, 4, 'inconclusive'])
  t.equal(r.headline, 'INCONCLUSIVE: fdatasync acknowledged nothing.')
})

t.test('several methods keep their rule: a method none of whose jobs acked makes the group inconclusive', async (t) => {
  const r = await verifyGroup(t, [passed(1), idle(2), idle(1, 'fsync'), idle(2, 'fsync')], 2)
  t.same([r.code, r.jsonCode, r.verdict], [4, 4, 'inconclusive'])
  t.equal(r.headline, 'INCONCLUSIVE: fsync acknowledged nothing.')
})

t.test(
  'the control keeps its rule: with a job that acked nothing, a control that lost nothing is inconclusive, one that lost records passes',
  async (t) => {
    const quiet = await verifyGroup(t, [passed(1), idle(2), passed(1, 'none'), passed(2, 'none')], 2)
    t.same([quiet.code, quiet.verdict], [4, 'inconclusive'])
    t.equal(quiet.headline, 'INCONCLUSIVE: the control (none) lost nothing, so the cut tested nothing.')
    const real = await verifyGroup(
      t,
      [
        passed(1),
        idle(2),
        { method: 'none', job: 1, acked: 20, kept: range(1, 15) },
        { method: 'none', job: 2, acked: 20, kept: range(1, 12) },
      ],
      2,
    )
    t.same([real.code, real.verdict], [0, 'pass'])
    t.equal(
      real.headline,
      'PASS: every acknowledged record of the tested method survived, and the control lost records: the cut was real; fdatasync (job 2 of 2) acknowledged nothing.',
    )
  },
)

t.test(
  'fdatasync,none --jobs 2, job 2 acknowledged nothing, job 1 passed and its control lost records: pass, the control judged over both jobs',
  async (t) => {
    const r = await verifyGroup(t, [passed(1), idle(2), { method: 'none', job: 1, acked: 20, kept: range(1, 15) }, idle(2, 'none')], 2)
    t.same([r.code, r.jsonCode, r.verdict], [0, 0, 'pass'])
    t.equal(
      r.headline,
      'PASS: every acknowledged record of the tested method survived, and the control lost records: the cut was real; fdatasync (job 2 of 2), none (job 2 of 2) acknowledged nothing.',
    )
    t.notMatch(r.text, /the cut tested nothing/, 'no line contradicts the verdict')
    t.match(
      r.text,
      /^ {2}control \(none\): this job acknowledged nothing; the control is judged on its other jobs \(run d000000000000004 /m,
    )
    t.match(r.text, /^ {2}control \(none\): 5 of 20 unsynced records lost: the cut was real \(run d000000000000003 /m)
  },
)

t.test("one job's control lost records, the other's lost none: the cut was real for the whole group", async (t) => {
  const r = await verifyGroup(t, [passed(1), passed(2), { method: 'none', job: 1, acked: 20, kept: range(1, 12) }, passed(2, 'none')], 2)
  t.same([r.code, r.jsonCode, r.verdict], [0, 0, 'pass'])
  t.equal(r.headline, 'PASS: every acknowledged record of all 2 tested runs survived, and the control lost records: the cut was real.')
  t.match(
    r.text,
    /^ {2}control \(none\): all 20 unsynced records of this job survived; another job's control lost records, so the cut was real \(run d000000000000004 /m,
  )
})

t.test('--method none --jobs 2, one job idle, the other lost records: pass, headline says the cut was real', async (t) => {
  const r = await verifyGroup(t, [{ method: 'none', job: 1, acked: 20, kept: range(1, 15) }, idle(2, 'none')], 1)
  t.same([r.code, r.verdict], [0, 'pass'])
  t.equal(r.headline, 'PASS: the control (none) lost records: the cut was real; none (job 2 of 2) acknowledged nothing.')
})

/** What a run showed: its file gone (after it acked), some acked records gone, every one kept, nothing acked. */
const shows = ['file-lost', 'records-lost', 'kept', 'idle'] as const
type Shows = (typeof shows)[number]

/**
 * The rules, written out from the README: a tested method fails when any of its runs lost an
 * acknowledged record or its file; the control fails when its fsynced file is gone in any job. Else
 * the group is inconclusive when a tested method acknowledged nothing in every job, or when no job's
 * control lost a record of its own (it lost nothing, or acknowledged nothing); else it passes.
 */
function expectedVerdict(runs: ReadonlyArray<{ method: MethodName; shows: Shows }>): 'pass' | 'fail' | 'inconclusive' {
  const of = (method: MethodName) => runs.filter((r) => r.method === method).map((r) => r.shows)
  const tested = of('fdatasync')
  const control = of('none')
  if (tested.some((s) => s === 'file-lost' || s === 'records-lost') || control.includes('file-lost')) return 'fail'
  if (tested.every((s) => s === 'idle') || !control.includes('records-lost')) return 'inconclusive'
  return 'pass'
}

t.test('every combination of what the four runs of fdatasync,none --jobs 2 showed: verdict and exit code follow the rules', async (t) => {
  const file = join(tempDir(t), 'data')
  const places = [
    { method: 'fdatasync', job: 1 },
    { method: 'fdatasync', job: 2 },
    { method: 'none', job: 1 },
    { method: 'none', job: 2 },
  ] as const
  const metas = places.map((p, i) =>
    craftMeta(`e00000000000000${i + 1}`, `${file}.${p.method}.job${p.job}`, {
      groupId: 'e000000000000000',
      requestedPath: file,
      method: p.method,
    }),
  )
  let runs = metas.map((m) => craftRun(m, 20))
  const server = await fakeListener(t, (query) => ({
    type: 'runs',
    runs: query.runId === undefined ? runs : runs.filter((r) => r.meta.runId === query.runId),
    claims: [],
  }))
  const exitCodes = { pass: 0, fail: 1, inconclusive: 4 }
  let checked = 0
  for (let combination = 0; combination < shows.length ** places.length; combination++) {
    const showing = places.map((p, i) => ({ method: p.method, shows: shows[Math.floor(combination / shows.length ** i) % shows.length]! }))
    runs = metas.map((meta, i) => {
      const what = showing[i]!.shows
      if (what === 'file-lost') rmSync(meta.path, { force: true })
      else writeDataFile(meta, what === 'records-lost' ? range(1, 17) : what === 'kept' ? range(1, 20) : [], { sizeSlots: 20 })
      return craftRun(meta, what === 'idle' ? 0 : 20)
    })
    const result = await runInProcess(['verify', '--server', server, '--file', file, '--json'])
    const verdict = expectedVerdict(showing)
    const name = showing.map((s, i) => `${s.method} job ${places[i]!.job} ${s.shows}`).join(', ')
    if (result.code !== exitCodes[verdict] || (JSON.parse(result.stdout) as { verdict: string }).verdict !== verdict) {
      t.fail(
        `${name}: expected ${verdict} (exit ${exitCodes[verdict]}), got exit ${result.code}: ${result.stdout.slice(0, 200)}${result.stderr}`,
      )
    } else checked++
  }
  t.equal(checked, 256, 'all 256 combinations judged by the rules')
})
