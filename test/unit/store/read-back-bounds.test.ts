/**
 * Spans in memory in all are the read-back cache plus at most two runs being read back (README,
 * "Memory per run is bounded"): read-backs go two at a time, in the order the queries asked; a group
 * query reads back only the members whose spans go in its reply (the others' counts and last ack are
 * in their summaries, their writer in meta.msgpack); a start without a catalog keeps the newest runs
 * that fit in the cache, whatever the order of their directories.
 */
import t, { type Test } from 'tap'
import { AckStore } from '../../../src/store/ack-store.js'
import { tempDir } from '../../fixtures/cli.js'
import { bulkyFingerprint, runIdOf, runMeta } from '../../fixtures/peer.js'
import { storeOfEndedRuns } from '../../fixtures/store-fixture.js'
import type { RunMeta } from '../../../src/record/format.js'

const announcedMs = Date.now() - 30 * 86_400_000

/** A store of ended runs of spanCount spans each (200 ms apart: a span per ack), with no catalog: every run is replayed at start. */
async function storeOfRuns(t: Test, metas: RunMeta[], spanCount: number): Promise<string> {
  const dir = tempDir(t, 'plugcheck-read-back-bounds-')
  await storeOfEndedRuns(dir, metas, spanCount, announcedMs, { writer: { bootId: 'boot-1', fingerprint: bulkyFingerprint } })
  return dir
}

type ReadBackRun = (this: AckStore, ...args: unknown[]) => Promise<unknown>

/** Every readBackRun while the test runs: the run it reads, in the order they start, and how many ran at once at most. */
function watchReadBacks(t: Test): { started: string[]; atOnceMax: () => number } {
  const proto = AckStore.prototype as unknown as { readBackRun: ReadBackRun }
  const readBackRun = proto.readBackRun
  const started: string[] = []
  let running = 0
  let atOnceMax = 0
  proto.readBackRun = async function (this: AckStore, ...args: unknown[]) {
    started.push((args[0] as { meta: RunMeta }).meta.runId)
    atOnceMax = Math.max(atOnceMax, ++running)
    try {
      return await readBackRun.apply(this, args)
    } finally {
      running--
    }
  }
  t.teardown(() => {
    proto.readBackRun = readBackRun
  })
  return { started, atOnceMax: () => atOnceMax }
}

t.test('read-backs of different runs go two at a time, in the order the queries asked', async (t) => {
  const ids = Array.from({ length: 6 }, (_, i) => runIdOf(0xb100 + i))
  const dir = await storeOfRuns(
    t,
    ids.map((runId) => runMeta(runId)),
    3000,
  )
  const store = await AckStore.open(dir, { maxCachedSpans: 100 })
  t.teardown(() => store.close())
  const watch = watchReadBacks(t)
  const asked = [ids[3]!, ids[0]!, ids[5]!, ids[1]!, ids[4]!, ids[2]!]
  const pages = await Promise.all(asked.map((runId) => store.spanPageAsync(runId, 0, 3000, 10)))
  t.equal(pages.filter((page) => page !== undefined && page.length > 0).length, asked.length, 'every query answered')
  t.same(watch.started, asked, 'read back in the order asked')
  t.equal(watch.atOnceMax(), 2, 'at most two read-backs at once')
  t.ok(store.residentSpanCount() <= 3000, `after them the cache holds one run at most (${store.residentSpanCount()} spans)`)
})

t.test('a group query reads back no member whose spans its reply does not carry, and answers as a read-back would', async (t) => {
  const groupId = runIdOf(0xb200)
  const metas = (['fsync', 'fdatasync', 'open_sync'] as const).map((method, i) =>
    runMeta(runIdOf(0xb200 + i), { groupId, method, host: 'box', requestedPath: '/data/db', path: `/data/db.${i}` }),
  )
  const dir = await storeOfRuns(t, metas, 2500)
  const expected = (await AckStore.load(dir)).query('box', '/data/db', undefined, { maxInlineSpans: 1000 })
  t.equal(expected.length, 3, 'the group has three members')
  const store = await AckStore.open(dir, { maxCachedSpans: 100 })
  t.teardown(() => store.close())
  const watch = watchReadBacks(t)
  const replies = await store.queryAsync('box', '/data/db', undefined, { maxInlineSpans: 1000 })
  t.same(watch.started, [], 'no member read back')
  t.same(replies, expected, 'the reply is what the runs replayed from their logs give (counts, last ack, writer with its fingerprint)')
  t.ok(
    replies.every((r) => r.spans.length === 0 && r.ackedThroughSeq === 2500 && r.writer?.fingerprint !== null),
    'no spans inline, acks through 2500, the writer whole',
  )
  // Inlined members are still read back (their spans go in the reply).
  const inlined = await store.queryAsync('box', '/data/db', undefined, { maxInlineSpans: 5000 })
  t.same(
    watch.started,
    expected.map((r) => r.meta.runId),
    "members inlined are read back, in turn (the reply's order)",
  )
  t.same(inlined, (await AckStore.load(dir)).query('box', '/data/db', undefined, { maxInlineSpans: 5000 }))
})

t.test('a start without a catalog keeps the newest runs that fit in the cache, whatever their directory order', async (t) => {
  // Announced in this order; directories sort the other way (the newest first).
  const ids = Array.from({ length: 5 }, (_, i) => runIdOf(0xb3ff - i))
  const dir = await storeOfRuns(
    t,
    ids.map((runId) => runMeta(runId)),
    300,
  )
  const store = await AckStore.open(dir, { maxCachedSpans: 700 })
  t.teardown(() => store.close())
  t.equal(store.residentSpanCount(), 600, 'two runs of 300 spans cached')
  const watch = watchReadBacks(t)
  for (const runId of [ids[4]!, ids[3]!]) await store.spanPageAsync(runId, 0, 300, 10)
  t.same(watch.started, [], 'the two newest runs need no read-back')
  await store.spanPageAsync(ids[0]!, 0, 300, 10)
  t.same(watch.started, [ids[0]], 'an older one is read back')
})

t.test('the cache keeps maxCachedRuns runs at most, however few spans each holds: at start and after queries', async (t) => {
  const ids = Array.from({ length: 12 }, (_, i) => runIdOf(0xb500 + i))
  const dir = await storeOfRuns(
    t,
    ids.map((runId) => runMeta(runId)),
    2,
  )
  const store = await AckStore.open(dir, { maxCachedRuns: 4 })
  t.teardown(() => store.close())
  t.equal(store.cachedRunCount(), 4, 'the start cached 4 of the 12 short runs')
  const watch = watchReadBacks(t)
  const spansOf = async (runId: string): Promise<number | undefined> =>
    (await store.queryAsync('testhost', `/data/${runId}`, runId))[0]?.spans.length
  for (const runId of ids.slice(-4)) await spansOf(runId)
  t.same(watch.started, [], 'the 4 newest, those a verify after a cut asks for')
  for (const runId of ids) {
    t.equal(await spansOf(runId), 2, `run ${runId}: both spans answered`)
    t.ok(store.cachedRunCount() <= 4, `after run ${runId}: ${store.cachedRunCount()} runs cached`)
  }
  // The 8 older runs, read back in turn, pushed the 4 newest out (least recently used first): 12 read-backs.
  t.same(watch.started, ids, 'each run was read back once, in the order asked')
})
