/**
 * verify's verdict and headline for the jobs of one method (write --jobs N): a job that acknowledged
 * nothing (its write failed before its first record) tested nothing, and the group is judged on the
 * jobs that did; the headline names each method once, and the jobs when only some of them are meant.
 * Several methods, and the control, keep their rules: a method none of whose runs acked is inconclusive.
 * Crafted data files (the real format) and a stand-in listener on 127.0.0.1.
 */
import t from 'tap'
import { join } from 'node:path'
import type { MethodName } from '../../src/native/registry.js'
import { craftMeta, craftRun, listenerWith, range, writeDataFile } from '../fixtures/crafted-run.js'
import { runInProcess, tempDir } from '../fixtures/cli.js'

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
  return { code: text.code, headline: text.stdout.split('\n')[0], verdict: (JSON.parse(json.stdout) as { verdict: string }).verdict, jsonCode: json.code }
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

t.test('the control keeps its rule: with a job that acked nothing, a control that lost nothing is inconclusive, one that lost records passes', async (t) => {
  const quiet = await verifyGroup(t, [passed(1), idle(2), passed(1, 'none'), passed(2, 'none')], 2)
  t.same([quiet.code, quiet.verdict], [4, 'inconclusive'])
  t.equal(quiet.headline, 'INCONCLUSIVE: the control (none) lost nothing, so the cut tested nothing.')
  const real = await verifyGroup(t, [passed(1), idle(2), { method: 'none', job: 1, acked: 20, kept: range(1, 15) }, { method: 'none', job: 2, acked: 20, kept: range(1, 12) }], 2)
  t.same([real.code, real.verdict], [0, 'pass'])
  t.equal(real.headline, 'PASS: every acknowledged record of the tested method survived, and the control lost records: the cut was real; fdatasync (job 2 of 2) acknowledged nothing.')
})
