/**
 * plugcheck under real simulated power cuts (see harness.ts): for each disk mode and pattern, the
 * sync methods (buffered and --direct) run together in one plug pull, and `none` (buffered and
 * --direct) each in their own, since other files' syncs could flush a none file's blocks along
 * with theirs. The writer runs a random 1-3 s (seeded, printed, replayable with PLUGCHECK_LAB_SEED).
 *
 * Verdicts: a sync method that kept everything passes (exit 0), one that lost something fails (exit 1);
 * `none` is the control: losses of its own records pass (the cut was real), losing nothing is
 * inconclusive (exit 4), losing its fsynced file (a lying disk) fails like any method.
 *
 *   honest:    every sync method 0 lost; none and none --direct: losses found
 *   lying:     losses found for every method
 *   writethru: every sync method 0 lost; none: losses found; none --direct: direct writes reach a
 *              write-through disk at once, so in overwrite (preallocated blocks) they survive, while in
 *              append the unsynced file-size metadata is lost with them
 */
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Listener } from '../../src/server/listen/listener.js'
import { diskModes, labFor, labUnavailableReason, type DiskMode } from '../fixtures/lab/harness.js'
import { failedRecords, plugPull } from '../fixtures/lab/plug.js'
import { labSeed, seededRandom } from '../fixtures/lab/seeded.js'

const reason = labUnavailableReason()
if (reason !== null) {
  t.fail(
    `the power-cut lab cannot run here: ${reason}\nhint: run the suite as root on Linux with /dev/fuse and nbdkit, libnbd-bin, e2fsprogs (.ci/run installs them)`,
  )
} else {
  const syncMethods = ['fsync', 'fdatasync', 'open_sync', 'open_datasync', 'pwritev2_dsync']
  const seed = labSeed()
  const random = seededRandom(seed)
  t.comment(`lab seed ${seed} (replay with PLUGCHECK_LAB_SEED=${seed})`)

  const outsideDir = mkdtempSync(join(tmpdir(), 'plugcheck-lab-outside-'))
  t.teardown(() => rmSync(outsideDir, { recursive: true, force: true }))
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: join(outsideDir, 'listener') })
  t.teardown(() => listener.close())
  const server = `127.0.0.1:${listener.address().port}`

  type Expectation = 'intact' | 'losses'
  const plan: Array<{ mode: DiskMode; methods: string[]; direct: boolean; expect: (pattern: 'append' | 'overwrite') => Expectation }> = []
  // The subtle disk has its own test (subtle.test.ts): its losses are partial, not all or none.
  for (const mode of diskModes.filter((m) => m !== 'subtle')) {
    plan.push({ mode, methods: syncMethods, direct: false, expect: () => (mode === 'lying' ? 'losses' : 'intact') })
    plan.push({ mode, methods: syncMethods, direct: true, expect: () => (mode === 'lying' ? 'losses' : 'intact') })
    plan.push({ mode, methods: ['none'], direct: false, expect: () => 'losses' })
    plan.push({
      mode,
      methods: ['none'],
      direct: true,
      expect: (pattern) => (mode === 'writethru' && pattern === 'overwrite' ? 'intact' : 'losses'),
    })
  }

  for (const pattern of ['append', 'overwrite'] as const) {
    for (const { mode, methods, direct, expect: expectFor } of plan) {
      const expect = expectFor(pattern)
      const runMs = Math.round(1000 + random() * 2000)
      const name = `${mode} disk, ${pattern}, ${methods.join(',')}${direct ? ' --direct' : ''}, cut after ${runMs} ms`
      t.test(name, async (t) => {
        const lab = await labFor(t, { mode, imageSizeMiB: 128 })
        const result = await plugPull(lab, { methods, direct, pattern, runMs, size: '8MiB', outsideDir, server })
        t.ok(result.report !== undefined, `verify reported (exit ${result.verifyCode}): ${result.verifyStderr}`)
        if (result.report === undefined) return
        t.equal(result.report.runs.length, methods.length, 'verify judged one run per method')
        for (const run of result.report.runs) {
          const label = `${run.method}${run.direct ? ' --direct' : ''}`
          const completed = result.completed.get(run.runId) ?? 0
          t.comment(
            `${label}: acked ${run.acked} (writer completed ${completed}), intact ${run.intact}, lost ${run.lost}, torn ${run.torn}, corrupt ${run.corrupt}, interrupted ${run.interrupted}, superseded ${run.superseded}`,
          )
          t.ok(run.acked > 0, `${label}: something was acknowledged before the cut`)
          t.ok(run.acked <= completed, `${label}: never more acks than completed syncs`)
          const control = run.method === 'none'
          t.equal(run.role, control ? 'control' : 'tested', `${label}: role`)
          if (expect === 'intact') {
            t.equal(failedRecords(run), 0, `${label}: every acknowledged record survived`)
            // A control that lost nothing shows the cut tested nothing.
            t.equal(run.verdict, control ? 'inconclusive' : 'pass')
          } else {
            t.ok(failedRecords(run) > 0, `${label}: losses found`)
            // A control's losses of its own records are expected: they prove the cut was real. A control
            // whose file is gone (a lying disk drops its fsynced creation too) is a lost synced creation: fail.
            t.equal(run.verdict, control && run.superblock.kind === 'valid' ? 'pass' : 'fail')
          }
        }
        const runs = result.report.runs
        const expectedCode = runs.some((r) => r.verdict === 'fail') ? 1 : runs.some((r) => r.verdict === 'inconclusive') ? 4 : 0
        t.equal(result.verifyCode, expectedCode, 'exit code follows the verdicts: 1 a run failed, 4 inconclusive, 0 pass')
        t.equal(result.report.verdict, { 0: 'pass', 1: 'fail', 4: 'inconclusive' }[expectedCode], 'group verdict')
      })
    }
  }
}
