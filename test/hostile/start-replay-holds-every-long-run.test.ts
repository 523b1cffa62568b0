/**
 * Memory per run is bounded, whatever its length (README): at start, runs replayed from their logs
 * (no catalog: an older listener's directory, or a damaged catalog.msgpack) must not all be held in
 * memory at once. Here 24 ended runs of 60,000 spans each (~1.4 M spans, ~35 MB of span columns)
 * are replayed with a read-back cache of 1,000 spans: the spans the store holds during the start (its
 * own residentSpanCount, after each run replayed) must stay within the cache plus a run or two being
 * replayed, not grow with the number of runs. Today every replayed run keeps its whole table until
 * the evict pass after the last one: a start on 20 week-long runs holds ~3 GB, and one on more runs
 * than memory fits never listens (a damaged catalog makes every start such a start).
 */
import t from 'tap'
import { AckStore } from '../../src/store/ack-store.js'
import { tempDir } from '../fixtures/cli.js'
import { runIdOf, runMeta } from '../fixtures/peer.js'
import { storeOfEndedRuns } from '../fixtures/store-fixture.js'

const runCount = 24
const spansPerRun = 60_000
const spanBytes = 24

t.test('a start without a catalog replays long runs one after another, not all of them held at once', async (t) => {
  const dir = tempDir(t, 'plugcheck-start-mem-')
  const announcedMs = Date.now() - 30 * 86_400_000
  // Each run's log: spansPerRun acks, 200 ms apart (a span each), then its end; no catalog.
  const ids = Array.from({ length: runCount }, (_, i) => runIdOf(0xa1600 + i))
  await storeOfEndedRuns(
    dir,
    ids.map((runId) => runMeta(runId)),
    spansPerRun,
    announcedMs,
  )

  // What the store holds after each run it replays at start (its own count of spans in memory).
  const proto = AckStore.prototype as unknown as { replay: (this: AckStore, ...args: unknown[]) => Promise<void> }
  const replay = proto.replay
  let heldMax = 0
  proto.replay = async function (this: AckStore, ...args: unknown[]): Promise<void> {
    await replay.apply(this, args)
    heldMax = Math.max(heldMax, this.residentSpanCount())
  }
  t.teardown(() => {
    proto.replay = replay
  })
  const maxCachedSpans = 1000
  const reopened = await AckStore.open(dir, { maxCachedSpans })
  t.equal(reopened.summaries().length, runCount, `${runCount} runs replayed`)
  t.equal(reopened.summaries()[0]!.ackedThroughSeq, spansPerRun)
  t.ok(
    reopened.warnings.some((w) => w.includes('catalog.msgpack')),
    'the missing catalog is warned about',
  )
  const bound = maxCachedSpans + 2 * spansPerRun
  t.ok(
    heldMax <= bound,
    `spans held in memory during the start: at most ${heldMax} (bound: the read-back cache, ${maxCachedSpans}, plus a run or two being replayed, ${bound}; all ${runCount} runs are ${runCount * spansPerRun} spans, ${((runCount * spansPerRun * spanBytes) / 1024 / 1024).toFixed(0)} MB)`,
  )
  t.ok(reopened.residentSpanCount() <= maxCachedSpans + spansPerRun, `after the start: ${reopened.residentSpanCount()} spans held`)
  await reopened.close()
})
