/**
 * A prune of a run "wholly in runs/" no longer waits for a fold. But a run whose last commits (its
 * end) are in the segment being folded counts as wholly in runs/ as soon as that fold wrote the run
 * files (foldedToRuns), while the segment itself is still in journal/ until the fold's catalog write
 * and unlink are done. A prune in that window renames runs/<id> to runs/.pruned-<id> with the segment
 * still holding the run's commits. A kill -9 there (a snapshot of the directory at that moment) leaves
 * a directory no listener starts on and no `verify --acks` reads: "round N holds a commit of run X,
 * which is not on record (its directory in runs/ is gone)", exit 3 for every run. Before the change a
 * prune waited for the fold (segment deleted) first. A kill -9 at any moment must leave a directory
 * that starts, with the pruned run gone or whole, every other run whole.
 */
import t from 'tap'
import { cpSync, existsSync } from 'node:fs'
import { join } from 'node:path'
import { AckStore } from '../../src/store/ack-store.js'
import { tempDir } from '../fixtures/cli.js'
import { recorded } from '../fixtures/store-fixture.js'
import { runMeta, runIdOf } from '../fixtures/peer.js'

t.test('a prune during a fold, then a kill -9: the directory still starts, no run lost', async (t) => {
  const dir = tempDir(t, 'plugcheck-prune-window-')
  const store = await AckStore.open(dir, { foldAgeMs: 600_000 })
  t.teardown(() => store.close())
  // Other ended runs (a catalog of some size: the fold's catalog write takes a moment).
  const others = Array.from({ length: 300 }, (_, i) => runIdOf(0x1000 + i))
  await Promise.all(others.map((id) => store.createRun(runMeta(id), Date.now())))
  for (const id of others) store.endRun(id, 'duration', undefined, Date.now())
  await store.endsRecorded(others)
  const x = runIdOf(0x42)
  await store.createRun(runMeta(x), Date.now())
  const acked = recorded(store, x, 5)
  store.appendAck(x, 1, 5, Date.now())
  await acked
  await store.foldNow() // x announced and acked: in runs/
  store.endRun(x, 'duration', undefined, Date.now())
  await store.endsRecorded([x]) // its end: in the journal's current segment only

  const internals = store as unknown as { unfolded: Array<{ path: string; foldedToRuns?: boolean }> }
  const folding = store.foldNow()
  let snapshot: string | undefined
  let pruning: Promise<void> | undefined
  for (let i = 0; i < 1_000_000 && snapshot === undefined; i++) {
    await new Promise((resolve) => setImmediate(resolve))
    const segment = internals.unfolded[0]
    // As `listen --retain` or `runs --prune` would: a prune of x once it is wholly in runs/.
    if (pruning === undefined && segment?.foldedToRuns === true) pruning = store.prune([x])
    // The kill -9: the directory as it is at this moment.
    if (pruning !== undefined && segment !== undefined && existsSync(join(dir, 'runs', `.pruned-${x}`)) && existsSync(segment.path)) {
      snapshot = tempDir(t, 'plugcheck-prune-window-kill-')
      cpSync(dir, snapshot, { recursive: true })
    }
  }
  await folding
  await pruning
  t.ok(pruning !== undefined && !store.hasRun(x), 'the run was pruned')
  // A prune that waits for the segment to be deleted leaves no such moment: nothing to start on.
  if (snapshot === undefined) {
    t.pass('no moment with the run renamed out and its segment still in journal/')
    return
  }

  const loaded = await AckStore.load(snapshot).catch((error: Error) => error)
  t.notOk(loaded instanceof Error, `verify --acks reads the directory (${loaded instanceof Error ? loaded.message : 'ok'})`)
  if (!(loaded instanceof Error)) {
    t.same(
      others.filter((id) => !loaded.hasRun(id)),
      [],
      'every other run is on record',
    )
    t.ok(!loaded.hasRun(x) || loaded.lastAckedSeq(x) === 5, 'the pruned run: gone, or whole')
  }
  const reopened = await AckStore.open(snapshot).catch((error: Error) => error)
  t.notOk(reopened instanceof Error, `a listener starts on it (${reopened instanceof Error ? reopened.message : 'ok'})`)
  if (!(reopened instanceof Error)) await reopened.close()
})
