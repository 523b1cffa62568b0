/**
 * Spans in memory in all: 4,096 per run that has not passed that, plus the read-back cache (README,
 * "Memory per run is bounded"). Read-backs under way are not counted against the cache: verifiers
 * asking at once for different long runs (one per host after a cut of a rack) each make a whole copy
 * of their run, all held together, so memory grows with the number of queries at once (16 week-long
 * runs: ~2.3 GB where the cache allows ~290 MB). Here 16 ended runs of 40,000 spans each, read back
 * by 16 span-page queries at once with a cache of 1,000 spans: the spans held at any moment (the
 * store's own count, plus the copies being read back) must stay within the cache plus a run or two.
 */
import t from 'tap'
import { AckStore } from '../../src/store/ack-store.js'
import { SpanTable } from '../../src/store/span-table.js'
import { tempDir } from '../fixtures/cli.js'
import { runIdOf, runMeta } from '../fixtures/peer.js'
import { storeOfEndedRuns } from '../fixtures/store-fixture.js'

const runCount = 16
const spansPerRun = 40_000

t.test('span-page queries of many long runs at once hold no more spans than the cache and a run or two', async (t) => {
  const dir = tempDir(t, 'plugcheck-readbacks-')
  const announcedMs = Date.now() - 30 * 86_400_000
  const ids = Array.from({ length: runCount }, (_, i) => runIdOf(0xa1700 + i))
  await storeOfEndedRuns(
    dir,
    ids.map((runId, i) => runMeta(runId, { host: `box${i}` })),
    spansPerRun,
    announcedMs,
  )
  const maxCachedSpans = 1000
  const reopened = await AckStore.open(dir, { maxCachedSpans })
  t.equal(reopened.residentSpanCount(), 0, 'after the start every run keeps its summary only')

  // Tables being filled by a read-back (not yet handed back), and their sizes.
  const filling = new Map<SpanTable, number>()
  const add = SpanTable.prototype.add
  SpanTable.prototype.add = function (this: SpanTable, ...args: Parameters<SpanTable['add']>): void {
    add.apply(this, args)
    if (filling.has(this) || this.length === 1) filling.set(this, this.length)
  }
  const proto = AckStore.prototype as unknown as {
    readBackRun: (this: AckStore, ...args: unknown[]) => Promise<{ copy?: { spans: SpanTable } }>
  }
  const readBackRun = proto.readBackRun
  let heldMax = 0
  proto.readBackRun = async function (this: AckStore, ...args: unknown[]) {
    const entry = await readBackRun.apply(this, args)
    let inFlight = 0
    for (const [table, length] of filling) if (table !== entry.copy?.spans) inFlight += length
    heldMax = Math.max(heldMax, this.residentSpanCount() + inFlight + (entry.copy?.spans.length ?? 0))
    if (entry.copy !== undefined) filling.delete(entry.copy.spans)
    return entry
  }
  t.teardown(() => {
    SpanTable.prototype.add = add
    proto.readBackRun = readBackRun
  })
  const pages = await Promise.all(ids.map((runId) => reopened.spanPageAsync(runId, 0, spansPerRun, 1)))
  t.ok(
    pages.every((p) => p !== undefined && p.length > 0),
    'every query answered',
  )
  const bound = maxCachedSpans + 2 * spansPerRun
  t.ok(
    heldMax <= bound,
    `spans held while ${runCount} read-backs ran at once: ${heldMax} (bound: cache ${maxCachedSpans} plus a run or two, ${bound}; ${runCount} whole runs are ${runCount * spansPerRun})`,
  )
  await reopened.close()
})
