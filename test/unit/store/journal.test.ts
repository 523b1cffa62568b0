/**
 * The store's journal: one fdatasync per round however many runs, a torn last round ignored, any other
 * damage refused naming file and byte, a log shorter than the journal's `at` refused, bytes past it
 * rewritten, and a real child store SIGKILLed at random moments (mid-round, mid-fold) never loses an
 * ack it reported recorded.
 */
import t, { type Test } from 'tap'
import { spawn } from 'node:child_process'
import { appendFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, truncateSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Packr } from 'msgpackr'
import { AckStore, frameLogEntry } from '../../../src/store/ack-store.js'
import { exitedWithOutput, tempDir } from '../../fixtures/cli.js'
import { bundledChild } from '../../fixtures/bundled-child.js'
import { recorded as recordedOnce } from '../../fixtures/store-fixture.js'
import { runMeta, runIdOf } from '../../fixtures/peer.js'
import { verdictOf } from '../../fixtures/verdict-fixture.js'

const packr = new Packr({ useRecords: false, int64AsType: 'number', mapsAsObjects: true })
const childPath = fileURLToPath(new URL('../../fixtures/journal-child.ts', import.meta.url))

const segments = (dir: string): string[] =>
  readdirSync(join(dir, 'journal'))
    .filter((n) => n.endsWith('.wal'))
    .sort()
/** The journal after a clean stop or a recovery: one segment holding its header only (the end of the chain of segments). */
const headerOnly = (dir: string): boolean => {
  const names = segments(dir)
  return names.length === 1 && statSync(join(dir, 'journal', names[0]!)).size < 100
}

t.test('one round, one fdatasync, for acks of 300 runs', async (t) => {
  const dir = tempDir(t, 'plugcheck-journal-')
  const store = await AckStore.open(dir)
  t.teardown(() => store.close())
  const runIds = Array.from({ length: 300 }, (_, i) => runIdOf(i + 1))
  const before = store.roundSyncCount
  await Promise.all(runIds.map((id) => store.createRun(runMeta(id), Date.now())))
  t.equal(store.roundSyncCount - before, 1, '300 announcements cost one fdatasync')
  const recorded = Promise.all(runIds.map((id) => recordedOnce(store, id, 3)))
  for (const id of runIds) store.appendAck(id, 1, 3, Date.now())
  await recorded
  t.equal(store.roundSyncCount - before, 2, 'acks of 300 runs in one round: one more fdatasync')
  await store.close()
  const loaded = await AckStore.load(dir)
  t.same(
    runIds.map((id) => loaded.lastAckedSeq(id)),
    runIds.map(() => 3),
    'every run folded into runs/ with its acks',
  )
  t.ok(headerOnly(dir), `a clean close leaves one segment, its header only (${segments(dir).join(', ')})`)
})

/** A directory whose journal holds: run 1 folded (in runs/) with commits after it, run 2 announced and acked in the journal only. */
async function liveCopy(t: Test): Promise<{ copy: string; run1: string; run2: string }> {
  const dir = tempDir(t, 'plugcheck-journal-')
  const [run1, run2] = [runIdOf(0xa1), runIdOf(0xa2)]
  const store = await AckStore.open(dir)
  await store.createRun(runMeta(run1), Date.now())
  store.appendAck(run1, 1, 10, Date.now())
  await recordedOnce(store, run1, 10)
  await store.foldNow()
  t.ok(existsSync(join(dir, 'runs', run1, 'meta.msgpack')), 'run 1 was folded')
  // Run 1 is in runs/; its later commits and all of run 2 are in the journal only (folded after 5 s).
  await store.createRun(runMeta(run2), Date.now())
  for (let seq = 11; seq <= 14; seq++) {
    store.appendAck(run1, seq, seq, Date.now())
    store.appendAck(run2, seq - 10, seq - 10, Date.now())
    await recordedOnce(store, run2, seq - 10)
  }
  const copy = tempDir(t, 'plugcheck-journal-copy-')
  cpSync(dir, copy, { recursive: true })
  await store.close()
  return { copy, run1, run2 }
}

t.test('a copy of a live directory: journal applied in memory, read-only', async (t) => {
  const { copy, run1, run2 } = await liveCopy(t)
  const before = segments(copy)
  t.equal(before.length, 1, 'one segment in the copy')
  const loaded = await AckStore.load(copy)
  t.equal(loaded.lastAckedSeq(run1), 14, 'run 1: acks from its log and the journal')
  t.equal(loaded.lastAckedSeq(run2), 4, 'run 2: announced and acked in the journal only')
  t.notOk(existsSync(join(copy, 'runs', run2)), 'load wrote nothing')
  const reopened = await AckStore.open(copy)
  t.equal(reopened.lastAckedSeq(run1), 14)
  t.equal(reopened.lastAckedSeq(run2), 4)
  await reopened.close()
  const folded = await AckStore.load(copy)
  t.equal(folded.lastAckedSeq(run2), 4, 'recovery folded run 2 into runs/')
  t.ok(headerOnly(copy) && !segments(copy).includes(before[0]!), 'and deleted the old segment (a new one holds its header only)')
})

t.test('a torn last round is ignored with a warning; a flipped byte in an earlier one is refused', async (t) => {
  const { copy, run2 } = await liveCopy(t)
  const segment = join(copy, 'journal', segments(copy)[0]!)
  const bytes = readFileSync(segment)
  const torn = tempDir(t, 'plugcheck-journal-torn-')
  cpSync(copy, torn, { recursive: true })
  truncateSync(join(torn, 'journal', segments(copy)[0]!), bytes.length - 7)
  const loaded = await AckStore.load(torn)
  t.equal(loaded.lastAckedSeq(run2), 3, 'the torn last round (ack 4) is not there, every earlier one is')
  t.match(loaded.warnings.join('\n'), /ignored \d+ bytes of a torn journal round at byte \d+ of .*\.wal/)
  const zeroed = tempDir(t, 'plugcheck-journal-zero-')
  cpSync(copy, zeroed, { recursive: true })
  appendFileSync(join(zeroed, 'journal', segments(copy)[0]!), Buffer.alloc(300))
  t.equal((await AckStore.load(zeroed)).lastAckedSeq(run2), 4, 'zeros after the last round: a torn tail, nothing lost')
  // The header is 12 + ~40 bytes; byte 80 is inside the first round, which is not the last.
  const flipped = Buffer.from(bytes)
  flipped[80] = flipped[80]! ^ 0x10
  writeFileSync(segment, flipped)
  await t.rejects(AckStore.load(copy), {
    exitCode: 3,
    message: new RegExp(
      `could not read ${segment}: damaged at byte \\d+: the entry there (does not match its checksum|has a length no entry has), and (\\d+ bytes of data follow its end|a whole entry that checks out starts at byte \\d+ after it: recorded rounds follow the damage)`,
    ),
  })
})

t.test("a log shorter than the journal's first commit of it is refused; bytes past it are rewritten", async (t) => {
  const { copy, run1 } = await liveCopy(t)
  const log = join(copy, 'runs', run1, 'acks.log')
  const size = statSync(log).size
  const longer = tempDir(t, 'plugcheck-journal-longer-')
  cpSync(copy, longer, { recursive: true })
  // A fold cut short by a crash: unfsynced bytes past `at` (here garbage); read-only load ignores them.
  appendFileSync(join(longer, 'runs', run1, 'acks.log'), Buffer.from('not a commit at all, a fold cut short'))
  t.equal((await AckStore.load(longer)).lastAckedSeq(run1), 14, 'bytes past the durable part are not read')
  const reopened = await AckStore.open(longer)
  await reopened.close()
  t.equal((await AckStore.load(longer)).lastAckedSeq(run1), 14, 'recovery cut them off and wrote the commits again')
  truncateSync(log, size - 5)
  await t.rejects(AckStore.load(copy), {
    exitCode: 3,
    message: `could not read ${log}: it is ${size - 5} bytes, but the journal holds the run's next commit for byte ${size}: fsynced acks are missing from the log`,
  })
  await t.rejects(AckStore.open(copy), { exitCode: 3, message: /fsynced acks are missing from the log/ })
})

t.test('SIGKILL at random moments (mid-round, mid-fold): every ack reported recorded survives', async (t) => {
  // Compiled once: each of the 40 children starts as plain node, not through tsx.
  const childScript = await bundledChild(childPath)
  for (let trial = 0; trial < 20; trial++) {
    const dir = tempDir(t, 'plugcheck-journal-kill-')
    const base = trial * 100
    const recordedAll = new Map<string, number>()
    // Each trial restarts on the directory of the previous kill too (recovery, then more rounds).
    for (const phase of [0, 1]) {
      const child = spawn(process.execPath, [childScript, dir, String(base + phase * 50)], {
        stdio: ['ignore', 'pipe', 'pipe'],
      })
      let out = ''
      let err = ''
      child.stdout.on('data', (d: Buffer) => (out += d.toString()))
      child.stderr.on('data', (d: Buffer) => (err += d.toString()))
      const exited = exitedWithOutput(child) // once its last lines are read: every ack it said recorded is checked
      for (let i = 0; i < 500 && !out.includes('announced\n') && child.exitCode === null; i++) await new Promise((r) => setTimeout(r, 20))
      await new Promise((r) => setTimeout(r, 20 + Math.random() * 300))
      child.kill('SIGKILL')
      await exited
      t.notOk(err.includes('Error'), `trial ${trial}.${phase}: the child ran (${err.slice(0, 300)})`)
      const recorded = new Map<string, number>()
      for (const [, runId, seq] of out.matchAll(/^recorded ([0-9a-f]{16}) (\d+)$/gm))
        recorded.set(runId!, Math.max(recorded.get(runId!) ?? 0, Number(seq)))
      for (const [runId, seq] of recorded) recordedAll.set(runId, Math.max(recordedAll.get(runId) ?? 0, seq))
      const loaded = await AckStore.load(dir)
      const lost = [...recorded].filter(([runId, seq]) => loaded.lastAckedSeq(runId) < seq)
      t.same(
        lost,
        [],
        `trial ${trial}.${phase}: ${recorded.size} runs, ${[...recorded.values()].reduce((a, b) => a + b, 0)} acks reported recorded, none lost (read-only load)`,
      )
    }
    // A stop right after the start leaves the backlog's later segments to the next start: nothing lost.
    const stopped = await AckStore.open(dir)
    await stopped.close()
    const afterStop = await AckStore.load(dir)
    t.same(
      [...recordedAll].filter(([runId, seq]) => afterStop.lastAckedSeq(runId) < seq),
      [],
      `trial ${trial}: a stop during the backlog's fold loses nothing`,
    )
    const reopened = await AckStore.open(dir)
    await reopened.foldNow()
    t.equal(reopened.backlogFolds, 0, `trial ${trial}: the backlog is folded`)
    await reopened.close()
    t.ok(headerOnly(dir), `trial ${trial}: recovery folded every segment (${segments(dir).join(', ')})`)
  }
})

t.test('a start with a backlog of new runs in the journal answers and records before the backlog is folded', async (t) => {
  const dir = tempDir(t, 'plugcheck-journal-backlog-')
  const runCount = 1500
  const runIds = Array.from({ length: runCount }, (_, i) => runIdOf(0xc000 + i))
  // A listener killed with its last 1,500 runs in the journal only (no fold for 10 minutes): a live copy.
  const live = await AckStore.open(dir, { foldAgeMs: 600_000 })
  await Promise.all(runIds.map((id) => live.createRun(runMeta(id), Date.now())))
  const recorded = Promise.all(runIds.map((id) => recordedOnce(live, id, 7)))
  for (const id of runIds) live.appendAck(id, 1, 7, Date.now())
  await recorded
  // A verdict for a run still in the journal only: its directory is made for verdict.msgpack alone.
  const judged = runIds[7]!
  await live.recordVerdict(judged, verdictOf({ verdict: 'pass', acked: 7, intact: 7, lost: 0, lostRanges: [], lossWindowMs: null }))
  const copy = tempDir(t, 'plugcheck-journal-backlog-copy-')
  cpSync(dir, copy, { recursive: true })
  await live.close()
  t.same(readdirSync(join(copy, 'runs')), [judged], 'the copy holds every run in its journal only (one with a verdict file)')

  const store = await AckStore.open(copy)
  t.teardown(() => store.close())
  t.equal(store.backlogFolds, 1, 'open returned with the backlog not folded yet')
  t.match(
    store.summaries().find((run) => run.runId === judged)?.verdict,
    { verdict: 'pass', acked: 7 },
    'the verdict of a run in the journal only is read from its file',
  )
  const last = runIds.at(-1)!
  const [answered] = await store.queryAsync('testhost', `/data/${last}`, last)
  t.same(
    answered?.spans.map((span) => [span[0], span[1]]),
    [[1, 7]],
    'a run of the backlog is answered with its acks meanwhile',
  )
  const fresh = runIdOf(0xd001)
  await store.createRun(runMeta(fresh), Date.now())
  const freshRecorded = recordedOnce(store, fresh, 3)
  store.appendAck(fresh, 1, 3, Date.now())
  await freshRecorded
  t.equal(store.backlogFolds, 1, 'and a new run was announced and recorded meanwhile')
  await store.foldNow()
  t.equal(store.backlogFolds, 0)
  t.equal(readdirSync(join(copy, 'runs')).filter((n) => /^[0-9a-f]{16}$/.test(n)).length, runCount + 1, 'the fold wrote every run to runs/')
  await store.close()
  t.ok(headerOnly(copy), 'a clean stop after it leaves the journal empty')
  const loaded = await AckStore.load(copy)
  t.same(
    [...runIds, fresh].filter((id) => loaded.lastAckedSeq(id) !== (id === fresh ? 3 : 7)),
    [],
    'every ack of every run is in runs/',
  )
})

t.test('usage counts runs and bytes on disk per peer; prune removes ended runs for good', async (t) => {
  const dir = tempDir(t, 'plugcheck-journal-prune-')
  const store = await AckStore.open(dir)
  t.teardown(() => store.close())
  const runIds = [runIdOf(0xb1), runIdOf(0xb2), runIdOf(0xb3)]
  const peers = ['10.0.0.1', '10.0.0.1', '10.0.0.2']
  for (const [i, runId] of runIds.entries()) await store.createRun(runMeta(runId), Date.now(), { peer: peers[i]! })
  for (const runId of runIds) store.appendAck(runId, 1, 5, Date.now())
  await recordedOnce(store, runIds[2]!, 5)
  const usage = store.usage()
  await store.foldNow()
  const onDisk = (runId: string): number =>
    statSync(join(dir, 'runs', runId, 'acks.log')).size + statSync(join(dir, 'runs', runId, 'meta.msgpack')).size
  t.same(
    usage.total,
    { runs: 3, bytes: runIds.reduce((sum, id) => sum + onDisk(id), 0) },
    'before the fold, usage counts what the fold writes',
  )
  t.same(usage.byPeer.get('10.0.0.1'), { runs: 2, bytes: onDisk(runIds[0]!) + onDisk(runIds[1]!) })
  t.same(usage.byPeer.get('10.0.0.2'), { runs: 1, bytes: onDisk(runIds[2]!) })
  await t.rejects(store.prune([runIds[0]!]), /has not ended/, 'a live run is not pruned')
  store.endRun(runIds[0]!, 'duration', undefined, Date.now())
  store.release(runIds[1]!, Date.now())
  await store.prune([runIds[0]!, runIds[1]!])
  t.same(store.usage().total.runs, 1)
  t.notOk(existsSync(join(dir, 'runs', runIds[0]!)), 'its directory is gone')
  t.same(readdirSync(join(dir, 'runs')), [runIds[2]], 'nothing of the pruned runs is left')
  await store.close()
  // A crash between the rename and the deletion leaves runs/.pruned-<id>: skipped, then deleted at start.
  cpSync(join(dir, 'runs', runIds[2]!), join(dir, 'runs', `.pruned-${runIds[0]}`), { recursive: true })
  const loaded = await AckStore.load(dir)
  t.same(
    loaded.summaries().map((s) => s.runId),
    [runIds[2]],
    'a renamed directory is not a run',
  )
  const reopened = await AckStore.open(dir)
  await reopened.close()
  t.same(readdirSync(join(dir, 'runs')), [runIds[2]], 'and it is deleted at the next start')
})

t.test('usage is kept per peer key as runs come, grow, get a verdict and go, and read back the same at load', async (t) => {
  const dir = tempDir(t, 'plugcheck-journal-usage-')
  const store = await AckStore.open(dir)
  t.teardown(() => store.close())
  const runIds = [runIdOf(0xc1), runIdOf(0xc2), runIdOf(0xc3), runIdOf(0xc4), runIdOf(0xc5)]
  // A mapped IPv4 address is that address; every address of an IPv6 /64 is one peer.
  const peers = ['::ffff:10.0.0.1', '10.0.0.1', '2001:db8:1:2::1', '2001:db8:1:2:ffff::9', '2001:db8:1:3::1']
  for (const [i, runId] of runIds.entries()) await store.createRun(runMeta(runId), Date.now(), { peer: peers[i]! })
  for (const runId of runIds) store.appendAck(runId, 1, 5, Date.now())
  await recordedOnce(store, runIds[4]!, 5)
  await store.foldNow()
  const onDisk = (runId: string): number =>
    ['acks.log', 'meta.msgpack', 'verdict.msgpack'].reduce(
      (sum, name) => sum + (existsSync(join(dir, 'runs', runId, name)) ? statSync(join(dir, 'runs', runId, name)).size : 0),
      0,
    )
  const expected = (): Record<string, { runs: number; bytes: number }> => {
    const byKey: Record<string, { runs: number; bytes: number }> = {}
    const keyOf = ['10.0.0.1', '10.0.0.1', '2001:db8:1:2::/64', '2001:db8:1:2::/64', '2001:db8:1:3::/64']
    for (const [i, runId] of runIds.entries()) {
      if (!existsSync(join(dir, 'runs', runId))) continue
      const entry = (byKey[keyOf[i]!] ??= { runs: 0, bytes: 0 })
      entry.runs++
      entry.bytes += onDisk(runId)
    }
    return byKey
  }
  const seen = (s: AckStore): Record<string, { runs: number; bytes: number }> =>
    Object.fromEntries([...s.usage().byPeer].map(([k, u]) => [k, { runs: u.runs, bytes: u.bytes }]))
  t.same(seen(store), expected(), 'per peer key, what is on disk')
  t.same(store.usage().ofPeer('2001:db8:1:2::/64').runs, 2)
  t.same(store.usage().ofPeer('10.9.9.9'), { runs: 0, bytes: 0 })
  store.endRun(runIds[0]!, 'duration', undefined, Date.now())
  await store.recordVerdict(runIds[0]!, verdictOf({ verdict: 'pass', acked: 5, intact: 5, lost: 0, lostRanges: [], lossWindowMs: null }))
  await store.foldNow()
  t.same(seen(store), expected(), 'a verdict and an end counted')
  await store.prune([runIds[0]!])
  t.same(seen(store), expected(), 'a pruned run no longer counted')
  t.equal(store.usage().total.runs, 4)
  t.equal(
    store.usage().total.bytes,
    Object.values(expected()).reduce((sum, u) => sum + u.bytes, 0),
  )
  await store.close()
  const loaded = await AckStore.load(dir)
  t.same(seen(loaded), expected(), 'the same when read back')
})

t.test('ended runs keep no spans in memory; a query reads them back without holding the event loop', async (t) => {
  const dir = tempDir(t, 'plugcheck-journal-memory-')
  // A long run of an older listener's format (one entry per span, 200 ms apart: none merge).
  const long = runIdOf(0xc1)
  const spanCount = 60_000
  const announcedMs = Date.now() - 3 * 3_600_000
  mkdirSync(join(dir, 'runs', long), { recursive: true })
  const entries = Array.from({ length: spanCount }, (_, i) =>
    frameLogEntry({ k: 'ack', fromSeq: i + 1, toSeq: i + 1, firstMs: announcedMs + (i + 1) * 200, lastMs: announcedMs + (i + 1) * 200 }),
  )
  writeFileSync(
    join(dir, 'runs', long, 'acks.log'),
    Buffer.concat([...entries, frameLogEntry({ k: 'end', reason: 'duration', atMs: announcedMs + (spanCount + 1) * 200 })]),
  )
  writeFileSync(
    join(dir, 'runs', long, 'meta.msgpack'),
    packr.pack({ meta: runMeta(long, { slotCount: 1_000_000 }), announcedMs, announceIndex: 1, peer: '127.0.0.1' }),
  )
  const first = await AckStore.open(dir)
  const short = Array.from({ length: 200 }, (_, i) => runIdOf(0xd000 + i))
  for (const id of short) await first.createRun(runMeta(id), Date.now())
  for (const id of short) first.appendAck(id, 1, 10, Date.now())
  await Promise.all(short.map((id) => recordedOnce(first, id, 10)))
  await first.close()
  // What a restart reads from the log (read-only, every span resident): the reference.
  const spansBefore = (await AckStore.load(dir)).query('testhost', `/data/${long}`, long)[0]!
  t.equal(spansBefore.spans.length, spanCount, `the long run has ${spansBefore.spans.length} spans`)

  const store = await AckStore.open(dir, { maxCachedSpans: spanCount })
  t.teardown(() => store.close())
  // The catalogued long run holds none; runs replayed at start (the short ones, unended) fill the
  // read-back cache while it has room.
  t.ok(
    store.residentSpanCount() <= short.length,
    `after a restart the long run holds no spans in memory (${store.residentSpanCount()} cached of replayed runs)`,
  )
  t.equal(store.spanCount(long), spansBefore.spans.length, 'its span count is kept in its summary')
  const { monitorEventLoopDelay } = await import('node:perf_hooks')
  const delay = monitorEventLoopDelay({ resolution: 1 })
  delay.enable()
  const [read] = await store.queryAsync('testhost', `/data/${long}`, long)
  delay.disable()
  const maxDelayMs = delay.max / 1e6
  t.same(read!.spans, spansBefore.spans, 'the spans read back are the ones recorded')
  t.equal(read!.ackedThroughSeq, spanCount)
  t.ok(
    maxDelayMs < 100,
    `the event loop was never held long while ${spanCount} spans were read back (max delay ${maxDelayMs.toFixed(1)} ms)`,
  )
  t.equal(store.residentSpanCount(), spansBefore.spans.length, 'the read-back spans are cached')
  await store.queryAsync('testhost', `/data/${short[0]}`, short[0])
  t.ok(store.residentSpanCount() <= spanCount, 'and the cache stays within its budget')
  // A log damaged after start: the query is refused naming it, never answered with fewer acks.
  const log = join(dir, 'runs', short[1]!, 'acks.log')
  truncateSync(log, statSync(log).size - 3)
  await t.rejects(store.queryAsync('testhost', `/data/${short[1]}`, short[1]), {
    exitCode: 3,
    message: new RegExp(`could not read ${log}`),
  })
})
