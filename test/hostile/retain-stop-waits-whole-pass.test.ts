/**
 * A SIGTERM to `listen --retain` started after a kill -9 (a backlog of new runs in the journal, and old
 * ended runs to prune): the stop finishes the segment being folded and what is under way, and exits;
 * it must not wait for the whole backlog to be folded and every selected group to be pruned one by one.
 */
import t from 'tap'
import { cpSync } from 'node:fs'
import { AckStore } from '../../src/store/ack-store.js'
import { startListener, tempDir, waitFor } from '../fixtures/cli.js'
import { runIdOf, runMeta } from '../fixtures/peer.js'

const recordedAll = (store: AckStore, runIds: readonly string[], throughSeq: number): Promise<void> => {
  const left = new Set(runIds)
  return new Promise((resolve) => {
    const on = (id: string, seq: number): void => {
      if (seq >= throughSeq && left.delete(id) && left.size === 0) {
        store.off('recorded', on)
        resolve()
      }
    }
    store.on('recorded', on)
  })
}

t.test('SIGTERM during the backlog fold with --retain stops within seconds', async (t) => {
  const live = tempDir(t, 'plugcheck-attack16-retain-stop-live-')
  const store = await AckStore.open(live, { foldAgeMs: 600_000 })
  // 1,200 runs that ended 30 days ago (announced then: their end is stamped from it), folded and catalogued.
  const old = Array.from({ length: 1200 }, (_, i) => runIdOf(0x5a0000 + i))
  const monthAgo = Date.now() - 30 * 86_400_000
  await Promise.all(old.map((id) => store.createRun(runMeta(id), monthAgo)))
  let recorded = recordedAll(store, old, 3)
  for (const id of old) store.appendAck(id, 1, 3, monthAgo)
  await recorded
  for (const id of old) store.endRun(id, 'duration', undefined, monthAgo)
  await store.foldNow()
  // 1,500 new runs in the journal only: the state a kill -9 leaves (everything reported recorded is fdatasynced).
  const fresh = Array.from({ length: 1500 }, (_, i) => runIdOf(0x5b0000 + i))
  await Promise.all(fresh.map((id) => store.createRun(runMeta(id), Date.now())))
  recorded = recordedAll(store, fresh, 5)
  for (const id of fresh) store.appendAck(id, 1, 5, Date.now())
  await recorded
  const dir = tempDir(t, 'plugcheck-attack16-retain-stop-')
  cpSync(live, dir, { recursive: true })
  // The same directory for a listener left running beside it: how long the whole pass takes under the
  // same load (a bound in seconds alone fails on a loaded machine, where everything is slower).
  const beside = tempDir(t, 'plugcheck-attack16-retain-beside-')
  cpSync(live, beside, { recursive: true })
  await store.close()

  // Each retention pass says when it has selected its groups (PLUGCHECK_TEST_RETAIN_TICK_MS, here the
  // period --retain 1d has anyway: one hour).
  process.env.PLUGCHECK_TEST_RETAIN_TICK_MS = '3600000'
  t.teardown(() => void delete process.env.PLUGCHECK_TEST_RETAIN_TICK_MS)
  const [listener, reference] = await Promise.all([startListener(dir, ['--retain', '1d']), startListener(beside, ['--retain', '1d'])])
  t.teardown(() => listener.kill('SIGKILL'))
  t.teardown(() => reference.kill('SIGKILL'))
  // Retention has started pruning (its first pass runs at start, after the background check): the
  // pass has selected its groups and prunes them one by one.
  await waitFor('the first pass to select its groups', () => /retention pass 1: [\d,]+ groups selected/.test(listener.stderr()), 60_000, 20)
  t.notMatch(reference.stderr(), /pruned/, 'the pass is still under way when the stop is asked for')
  const asked = Date.now()
  let cap: NodeJS.Timeout | undefined
  await Promise.race([listener.kill('SIGTERM'), new Promise((resolve) => (cap = setTimeout(resolve, 60_000)))])
  clearTimeout(cap) // a cap on the stop, not a wait: it must not hold the test process for a minute after
  const tookMs = Date.now() - asked
  await waitFor('the listener left running to finish its pass', () => /pruned 1,200 runs/.test(reference.stderr()), 120_000, 50)
  const passMs = Date.now() - asked
  t.ok(
    tookMs < passMs / 2,
    `the listener stopped ${tookMs} ms after SIGTERM, under half the ${passMs} ms the rest of the pass took beside it (the segment being folded, not the whole retention pass)`,
  )
  t.equal(listener.process.exitCode, 0, 'and exited 0')
  await listener.kill('SIGKILL')
  const loaded = await AckStore.load(dir)
  t.same(
    fresh.filter((id) => loaded.lastAckedSeq(id) !== 5),
    [],
    'every new run keeps its 5 acks',
  )
})
