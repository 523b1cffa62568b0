/**
 * A run pruned while its spans sit in the read-back cache, then a run announced again with the same
 * id (a writer re-using its id, or a crafted one): a query of the new run must answer the new run's
 * spans, never the pruned run's cached copy.
 */
import t from 'tap'
import { AckStore } from '../../src/store/ack-store.js'
import { tempDir } from '../fixtures/cli.js'
import { recorded as recordedOnce } from '../fixtures/store-fixture.js'
import { runIdOf, runMeta } from '../fixtures/peer.js'

/** Acks 1..count, each recorded and 150 ms after the one before: a span each (spanWindowMs is 100). */
async function ackApart(store: AckStore, id: string, count: number): Promise<void> {
  for (let seq = 1; seq <= count; seq++) {
    const recorded = recordedOnce(store, id, seq)
    store.appendAck(id, seq, seq, Date.now())
    await recorded
    await new Promise((resolve) => setTimeout(resolve, 150))
  }
}

t.test("a pruned run's cached copy is not served for a new run of the same id", async (t) => {
  const dir = tempDir(t, 'plugcheck-attack16-reuse-')
  const store = await AckStore.open(dir, { maxCachedSpans: 10 })
  t.teardown(() => store.close())
  const id = runIdOf(0xe701)
  const base = Date.now()
  // The first run: 8 acks, each its own span (seconds apart), ended, folded: its copy cached.
  await store.createRun(runMeta(id), base)
  await ackApart(store, id, 8)
  store.endRun(id, 'duration', undefined, Date.now())
  await store.foldNow()
  const [first] = await store.queryAsync('testhost', `/data/${id}`, id)
  t.equal(first?.ackedThroughSeq, 8)
  t.equal(first?.spans.length, 8, 'the first run has 8 spans')
  await store.prune([id])
  t.notOk(store.hasRun(id), 'pruned')

  // The same id announced again: 3 acks, ended and folded.
  const again = Date.now()
  await store.createRun(runMeta(id), again)
  await ackApart(store, id, 3)
  store.endRun(id, 'duration', undefined, Date.now())
  await store.foldNow()
  const [second] = await store.queryAsync('testhost', `/data/${id}`, id)
  t.equal(second?.ackedThroughSeq, 3, 'the new run acked through seq 3')
  t.same(
    second?.spans.map((span) => span[1]),
    [1, 2, 3],
    "its spans are its own 3, not the pruned run's 8",
  )
  const loaded = await AckStore.load(dir)
  t.same(second?.spans, loaded.query('testhost', `/data/${id}`, id)[0]?.spans, 'as its files replay')
})
