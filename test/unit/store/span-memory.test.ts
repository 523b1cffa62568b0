/**
 * A run's spans in the listener's memory: made from its logged items once their round is durable (so
 * a live run answers exactly what a restart's replay answers), and out of memory past
 * maxResidentSpans (read back from its log and the journal for a query, brought up to date while the
 * run goes on acking and segments are folded). Real files and fdatasyncs, a real full tmpfs. Ack
 * stamps come from the listener's monotonic clock: acks queued while the event loop is busy (spin)
 * share one logged item, as under load; gaps past spanWindowMs make spans of their own.
 */
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { AckStore } from '../../../src/store/ack-store.js'
import { replayLog } from '../../../src/store/ack-log-reader.js'
import { SpanTable, spanWindowMs } from '../../../src/store/span-table.js'
import { readSpanPage } from '../../../src/protocol/span-page.js'
import type { AckSpan, StoredRun } from '../../../src/protocol/messages.js'
import { tempDir } from '../../fixtures/cli.js'
import { seededRandom } from '../../fixtures/lab/seeded.js'
import { runIdOf, runMeta } from '../../fixtures/peer.js'
import { liveRunOutOfMemory, recorded } from '../../fixtures/store-fixture.js'

/** Holds the event loop for ms, as a listener busy with many writers does: acks meanwhile queue into one item. */
function spin(ms: number): void {
  const until = performance.now() + ms
  while (performance.now() < until);
}

type Answered = StoredRun & { ackedThroughSeq: number }

async function queryOne(store: AckStore, runId: string): Promise<Answered> {
  const meta = runMeta(runId)
  const [run] = await store.queryAsync(meta.host, meta.requestedPath, runId)
  if (run?.ackedThroughSeq === undefined) throw new Error(`run ${runId} not answered with how far its acks go`)
  return run as Answered
}

/** The spans a restart gives: the directory read again (verify --acks's way), nothing of the live store. */
async function replayedSpans(dir: string, runId: string, maxSpans?: number): Promise<AckSpan[]> {
  const meta = runMeta(runId)
  const loaded = await AckStore.load(dir, maxSpans === undefined ? {} : { maxSpans })
  return loaded.query(meta.host, meta.requestedPath, runId)[0]!.spans
}

/** Every span of a run, contiguous from seq 1 through throughSeq (no seq missing, none twice). */
/**
 * The page asked after the answer holds its spans; only the last one's window may have grown since
 * (a page cuts a span at the seq asked and keeps its window, and acks recorded between the answer and
 * the page may have extended that span).
 */
function samePage(page: readonly AckSpan[], spans: readonly AckSpan[]): boolean {
  if (page.length !== spans.length) return false
  return page.every((p, i) => {
    const s = spans[i]!
    const last = i === spans.length - 1
    return p[0] === s[0] && p[1] === s[1] && p[2] === s[2] && (last ? p[3] >= s[3] : p[3] === s[3])
  })
}

function contiguousThrough(spans: readonly AckSpan[], throughSeq: number): boolean {
  return spans.every((s, i) => s[0] === (i === 0 ? 1 : spans[i - 1]![1] + 1) && s[1] >= s[0]) && (spans.at(-1)?.[1] ?? 0) === throughSeq
}

t.test('a live run answers the spans a restart replays, for acks that straddle rounds and windows', async (t) => {
  const dir = tempDir(t, 'plugcheck-spans-')
  const store = await AckStore.open(dir)
  const runId = runIdOf(0x5a1)
  await store.createRun(runMeta(runId), Date.now())
  let seq = 0
  for (let burst = 0; burst < 12; burst++) {
    // Four acks in one turn of the loop, 35-85 ms apart: one logged item over two or three windows.
    const done = recorded(store, runId, seq + 4)
    for (let i = 0; i < 4; i++) {
      store.appendAck(runId, seq + 1, seq + 1, Date.now())
      seq++
      spin(35 + ((burst * 7 + i * 13) % 50))
    }
    await done
    await sleep(20 + (burst % 3) * 60)
  }
  const live = await queryOne(store, runId)
  await store.close()
  const replayed = await replayedSpans(dir, runId)
  t.equal(live.ackedThroughSeq, seq, `the live run answers every recorded ack (${seq})`)
  t.ok(replayed.length < seq, `acks shared spans (${replayed.length} spans for ${seq} acks)`)
  t.same(live.spans, replayed, 'the live spans are exactly those a restart replays from the log')
})

t.test("a live run's resident spans stay under the bound while it acks far past it, and its query stays exact", async (t) => {
  const dir = tempDir(t, 'plugcheck-spans-')
  const maxResidentSpans = 4
  const maxCachedSpans = 8
  const maxSpans = 15
  const store = await AckStore.open(dir, { maxResidentSpans, maxCachedSpans, maxSpans, foldAgeMs: 200 })
  const runId = runIdOf(0x5b1)
  await store.createRun(runMeta(runId), Date.now())
  let seq = 0
  let residentBeforeQueries = 0
  let residentMax = 0
  let answersWrong = 0
  const acks = 40
  for (let ack = 0; ack < acks; ack++) {
    const done = recorded(store, runId, seq + 1)
    store.appendAck(runId, seq + 1, seq + 1, Date.now())
    seq++
    await done
    // The first half unqueried: the run's own table only; then a query every few acks, its read-back copy cached.
    if (ack < acks / 2) residentBeforeQueries = Math.max(residentBeforeQueries, store.residentSpanCount())
    residentMax = Math.max(residentMax, store.residentSpanCount())
    if (ack >= acks / 2 && ack % 3 === 0) {
      const answer = await queryOne(store, runId)
      if (answer.ackedThroughSeq !== seq || !contiguousThrough(answer.spans, seq) || answer.spans.length !== store.spanCount(runId))
        answersWrong++
    }
    // Past the window: a span of its own.
    await sleep(spanWindowMs + 10)
  }
  t.ok(
    store.spanCount(runId) > maxResidentSpans,
    `the run holds ${store.spanCount(runId)} spans (${acks} made, coarsened past ${maxSpans}), more than ${maxResidentSpans}`,
  )
  t.ok(
    residentBeforeQueries <= maxResidentSpans,
    `before any query at most ${residentBeforeQueries} of its spans were in memory (bound: ${maxResidentSpans})`,
  )
  t.ok(
    residentMax <= maxResidentSpans + maxSpans,
    `with queries, at most ${residentMax} (bound: ${maxResidentSpans} resident + one read-back copy of at most ${maxSpans})`,
  )
  t.equal(answersWrong, 0, 'every query on the way answered every recorded ack, contiguous, as many spans as the run holds')
  const live = await queryOne(store, runId)
  await store.close()
  t.same(live.spans, await replayedSpans(dir, runId, maxSpans), 'the spans read back are exactly those a restart replays')
})

t.test('a live evicted run queried while segments are folded and rounds commit: no stale, missing or repeated spans', async (t) => {
  const dir = tempDir(t, 'plugcheck-spans-')
  const store = await AckStore.open(dir, { maxResidentSpans: 3, foldAgeMs: 25, segmentBytes: 4096 })
  const runId = runIdOf(0x5c1)
  const meta = runMeta(runId)
  await store.createRun(meta, Date.now())
  let recordedSeq = 0
  store.on('recorded', (id, throughSeq) => {
    if (id === runId) recordedSeq = Math.max(recordedSeq, throughSeq)
  })
  const random = seededRandom(51)
  const answers: Array<{ askedAtSeq: number; run: Answered; page: AckSpan[] | undefined }> = []
  const queries: Array<Promise<void>> = []
  const ask = (): void => {
    const askedAtSeq = recordedSeq
    queries.push(
      (async () => {
        const run = await queryOne(store, runId)
        const bytes = run.ackedThroughSeq === 0 ? undefined : await store.spanPageAsync(runId, 0, run.ackedThroughSeq, 1_000_000)
        const page: AckSpan[] | undefined = bytes === undefined ? undefined : []
        if (bytes !== undefined) {
          const read = readSpanPage(bytes, 0, run.ackedThroughSeq, run.announcedMs, (from, to, first, last) =>
            page!.push([from, to, first, last]),
          )
          if ('problem' in read) throw new Error(read.problem)
        }
        answers.push({ askedAtSeq, run, page })
      })(),
    )
  }
  let seq = 0
  const startedMs = Date.now()
  // At least 3 s (segments folded all along) and at least 21 turns (two queries each: over 40 answers
  // however slow the machine; a loaded one makes fewer turns in 3 s, and fewer answers prove less).
  for (let turn = 0; turn < 21 || Date.now() - startedMs < 3000; turn++) {
    const count = 1 + Math.floor(random() * 3)
    for (let i = 0; i < count; i++) {
      store.appendAck(runId, seq + 1, seq + 1, Date.now())
      seq++
      if (random() < 0.3) spin(20 + random() * 60)
    }
    ask()
    await sleep(random() * 2 * spanWindowMs)
    ask()
  }
  if (recordedSeq < seq) await recorded(store, runId, seq)
  ask()
  await Promise.all(queries)
  const rotated = Number(
    readdirSync(join(dir, 'journal'))
      .filter((n) => n.endsWith('.wal'))
      .sort()
      .at(-1)!
      .slice(0, -'.wal'.length),
  )
  await store.close()

  // What the log held at each commit: the spans a replay of it gives up to there.
  const atSeq = new Map<number, AckSpan[]>()
  const table = new SpanTable()
  await replayLog(join(dir, 'runs', runId, 'acks.log'), runId, (item) => {
    if (item.k !== 'ack') return undefined
    table.add(item.fromSeq, item.toSeq, item.firstMs, item.lastMs, store.maxSpans)
    atSeq.set(item.toSeq, table.toArray())
    return undefined
  })
  let stale = 0
  let broken = 0
  let firstBroken: string | undefined
  let differ = 0
  for (const { askedAtSeq, run, page } of answers) {
    if (run.ackedThroughSeq < askedAtSeq) stale++
    if (!contiguousThrough(run.spans, run.ackedThroughSeq) || (page !== undefined && !samePage(page, run.spans))) {
      broken++
      firstBroken ??= `asked at seq ${askedAtSeq}: spans ${JSON.stringify(run.spans.slice(-3))}, page ${JSON.stringify(page?.slice(-3))}`
    }
    if (JSON.stringify(run.spans) !== JSON.stringify(atSeq.get(run.ackedThroughSeq) ?? [])) differ++
  }
  t.ok(rotated >= 10, `segments were folded all along (${rotated} segments)`)
  t.ok(answers.length > 40, `${answers.length} queries, each read back while acks were committed`)
  t.equal(stale, 0, 'no answer held fewer acks than were recorded when it was asked')
  t.equal(
    broken,
    0,
    `every answer contiguous from seq 1 through its last ack, its span page the same spans${firstBroken === undefined ? '' : ` (first not: ${firstBroken})`}`,
  )
  t.equal(differ, 0, "every answer exactly the spans of the run's log up to its last ack")
  t.same(answers.at(-1)!.run.spans, await replayedSpans(dir, runId), 'the last answer is what a restart replays')
})

t.test('a round that fails on a full disk: a live evicted run answers its recorded acks only', async (t) => {
  // A real full file system needs a mount: run the suite as root, as CI does (never skipped).
  if (process.getuid?.() !== 0) {
    t.fail('needs root to mount a 1 MiB tmpfs: run npm test as root')
    return
  }
  const mountPoint = tempDir(t, 'plugcheck-full-')
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'plugcheck-full', mountPoint])
  t.teardown(() => execFileSync('umount', ['-l', mountPoint]))
  const dir = join(mountPoint, 'listener')
  mkdirSync(dir)
  const store = await AckStore.open(dir, { maxResidentSpans: 2, foldAgeMs: 50 })
  const runId = runIdOf(0x5d1)
  await store.createRun(runMeta(runId), Date.now())
  let recordedSeq = 0
  let failed: Error | undefined
  store.on('recorded', (id, throughSeq) => {
    if (id === runId) recordedSeq = Math.max(recordedSeq, throughSeq)
  })
  store.on('failed', (id, error) => {
    if (id === runId) failed = error
  })
  let seq = 0
  // Spans of their own first (so that the run's spans leave memory), then the disk filled.
  for (let i = 0; i < 5; i++) {
    const done = recorded(store, runId, seq + 1)
    store.appendAck(runId, seq + 1, seq + 1, Date.now())
    seq++
    await done
    await sleep(spanWindowMs + 10)
  }
  try {
    writeFileSync(join(mountPoint, 'filler'), Buffer.alloc(1024 * 1024, 1))
  } catch (error) {
    // Filled to its last page: what the write stopped at.
    if ((error as { code?: string }).code !== 'ENOSPC') throw error
  }
  for (let batch = 0; batch < 20_000 && failed === undefined; batch++) {
    const done = recorded(store, runId, seq + 20)
    for (let i = 0; i < 20; i++, seq++) store.appendAck(runId, seq + 1, seq + 1, Date.now())
    await done
  }
  t.match(failed?.message, /ENOSPC|short write/, 'the run failed on the full disk')
  const answer = await queryOne(store, runId)
  t.equal(
    answer.ackedThroughSeq,
    recordedSeq,
    `it answers acks 1-${recordedSeq}, those recorded, not the ${seq - recordedSeq} accepted after`,
  )
  t.equal(store.lastAckedSeq(runId), recordedSeq, 'and counts those only')
  t.ok(contiguousThrough(answer.spans, recordedSeq), 'contiguous from seq 1')
  t.ok(store.spanCount(runId) > 2, `its ${store.spanCount(runId)} spans had left memory (more than 2) and were read back`)
  await store.close()
  execFileSync('rm', ['-f', join(mountPoint, 'filler')])
  t.same(answer.spans, await replayedSpans(dir, runId), 'exactly what a restart replays from the journal and the log')
})

t.test(
  "a live run's log damaged after its spans were read back: the next query is refused naming the log, never answered with fewer acks",
  async (t) => {
    const { store, meta, log, ackAlone } = await liveRunOutOfMemory(t, 0x5e1, 'plugcheck-spans-')
    const runId = meta.runId
    t.equal((await queryOne(store, runId)).ackedThroughSeq, 3, 'read back once (and cached) through seq 3')
    for (let i = 0; i < 2; i++) await ackAlone()
    await store.foldNow()
    // A bit flipped in the last commit, folded after the cached copy ended: read when the copy catches up.
    const bytes = readFileSync(log)
    bytes[bytes.length - 2]! ^= 0x40
    writeFileSync(log, bytes)
    // Its stamp changed: the log is read whole again, and the bad entry, inside the recorded bytes, named.
    await t.rejects(
      queryOne(store, runId),
      {
        message: new RegExp(
          `could not read ${log}: damaged at byte \\d+: an entry that does not match its checksum, in bytes the listener recorded`,
        ),
      },
      'the query is refused naming the log and the byte',
    )
  },
)
