/**
 * Group membership against a stand-in listener and crafted files (the real format): runs written by
 * older writers carry no plan, and a member's file at PATH.jobK is still found; a listener of an
 * earlier version drops each run's place in its group, and the files' superblocks still give the
 * plan; runs that disagree on the plan, or two runs in one place, are refused; an earlier group
 * judged because the latest stopped before its first record is completed from the files when the
 * listener's claims list only some of it; `--run` judges the one run asked for.
 */
import t from 'tap'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import type { StoredRun } from '../../../../src/protocol/messages.js'
import type { GroupMember, RunMeta } from '../../../../src/record/format.js'
import { craftClaim, craftMeta, craftRun, fakeListener, listenerWith, range, writeDataFile } from '../../../fixtures/crafted-run.js'
import { runInProcess, tempDir } from '../../../fixtures/cli.js'

const groupId = 'c100000000000000'

/** Job k of a `write --jobs N` of fdatasync, its file holding `kept` of its 20 acknowledged records. */
function job(
  file: string,
  k: number,
  member: GroupMember | undefined,
  kept = range(1, 20),
  acked = 20,
  id = `c1000000000000${String(k).padStart(2, '0')}`,
  group = groupId,
): StoredRun {
  const meta = craftMeta(id, `${file}.job${k}`, { groupId: group, requestedPath: file, ...(member === undefined ? {} : { member }) })
  writeDataFile(meta, kept, { sizeSlots: 20 })
  return craftRun(meta, acked)
}

/** The run as a listener of an earlier version stores and sends it: without its place in the group. */
function withoutMember(run: StoredRun): StoredRun {
  const { member: _member, ...meta } = run.meta
  return { ...run, meta: meta as RunMeta }
}

const verify = (server: string, file: string, ...extra: string[]) => runInProcess(['verify', '--server', server, '--file', file, ...extra])

t.test(
  'runs of an older writer (no plan): a file of the group at PATH.jobK that the listener does not know is named, exit 3',
  async (t) => {
    const file = join(tempDir(t), 'data')
    const runs = [job(file, 1, undefined), job(file, 2, undefined, range(1, 10))]
    t.equal((await verify(await listenerWith(t, runs), file)).code, 1, 'both known: job 2 lost records')
    const result = await verify(await listenerWith(t, [runs[0]!]), file)
    t.equal(result.code, 3, result.stdout)
    t.match(result.stderr, `plugcheck: ${file}.job2 holds run c100000000000002 (fdatasync) of this group, but the listener`)
  },
)

t.test("a listener of an earlier version drops each run's place: the files' superblocks give the plan", async (t) => {
  const file = join(tempDir(t), 'data')
  const plan = (k: number): GroupMember => ({ job: k, jobs: 2, methods: ['fdatasync'] })
  const runs = [job(file, 1, plan(1)), job(file, 2, plan(2))].map(withoutMember)
  t.equal((await verify(await listenerWith(t, runs), file)).code, 0, 'the whole group, as sent: pass')
  rmSync(`${file}.job2`)
  const result = await verify(await listenerWith(t, [runs[0]!]), file)
  t.equal(result.code, 3, result.stdout)
  t.match(
    result.stderr,
    `has 1 of the 2 runs of this group (2 jobs x fdatasync): job 2's fdatasync run (${file}.job2) is missing; nothing was judged`,
  )
})

t.test('runs that disagree on the plan, or two runs in one place: refused, exit 3', async (t) => {
  const file = join(tempDir(t), 'data')
  const disagree = await verify(
    await listenerWith(t, [
      job(file, 1, { job: 1, jobs: 2, methods: ['fdatasync'] }),
      job(file, 2, { job: 2, jobs: 3, methods: ['fdatasync'] }),
    ]),
    file,
  )
  t.equal(disagree.code, 3)
  t.match(
    disagree.stderr,
    /the runs of group c100000000000000 at the listener \S+ disagree on what the group was: run c100000000000001 says 2 jobs x fdatasync, run c100000000000002 says 3 jobs x fdatasync; nothing was judged/,
  )
  const other = join(tempDir(t), 'data')
  const twice = await verify(
    await listenerWith(t, [
      job(other, 1, { job: 1, jobs: 2, methods: ['fdatasync'] }),
      job(other, 1, { job: 1, jobs: 2, methods: ['fdatasync'] }, range(1, 20), 20, 'c100000000000009'),
    ]),
    other,
  )
  t.equal(twice.code, 3)
  t.match(twice.stderr, `holds two runs of group c100000000000000 for ${other}.job1`)
})

t.test('--run judges the run asked for alone, whatever the rest of its group', async (t) => {
  const file = join(tempDir(t), 'data')
  const runs = [job(file, 1, { job: 1, jobs: 2, methods: ['fdatasync'] }), job(file, 2, { job: 2, jobs: 2, methods: ['fdatasync'] })]
  const result = await verify(await listenerWith(t, [runs[0]!]), file, '--run', 'c100000000000001')
  t.equal(result.code, 0, result.stderr)
  t.match(result.stdout, /^PASS: all 20 acknowledged records of run c100000000000001 /)
})

t.test(
  'an earlier group judged for a latest one that never started is completed from its files when the claims list only part of it',
  async (t) => {
    const file = join(tempDir(t), 'data')
    const plan = (k: number): GroupMember => ({ job: k, jobs: 3, methods: ['fdatasync'] })
    // The earlier write: 3 jobs; job 3 lost records.
    const earlier = [job(file, 1, plan(1)), job(file, 2, plan(2)), job(file, 3, plan(3), range(1, 14))]
    // The latest: 2 jobs that stopped while setting up, before creating their files (the files hold the earlier runs).
    const latest = [1, 2].map((k) => {
      const meta = craftMeta(`c2000000000000${String(k).padStart(2, '0')}`, `${file}.job${k}`, {
        groupId: 'c200000000000000',
        requestedPath: file,
        member: { job: k, jobs: 2, methods: ['fdatasync'] },
        createdMs: earlier[0]!.meta.createdMs + 10_000,
      })
      return {
        ...craftRun(meta, 0),
        announcedMs: meta.createdMs,
        end: { reason: 'error' as const, detail: 'could not start: EROFS', atMs: meta.createdMs + 10 },
      }
    })
    // Newest first, and job 3 of the earlier group pushed out of the list.
    const claims = [...latest, earlier[0]!, earlier[1]!].map((r) => craftClaim(r))
    const all = [...latest, ...earlier]
    const server = await fakeListener(t, (query) => ({
      type: 'runs',
      runs: query.runId === undefined ? latest : all.filter((r) => r.meta.runId === query.runId),
      claims,
    }))
    const result = await verify(server, file)
    t.equal(result.code, 1, result.stdout + result.stderr)
    t.match(result.stdout, /^FAIL: fdatasync \(job 3 of 3\) lost acknowledged data \(1 of 3 tested runs\)\.$/m)
    t.match(result.stdout, /^note: the latest run \(c200000000000001, c200000000000002\) stopped before its first record/m)
  },
)
