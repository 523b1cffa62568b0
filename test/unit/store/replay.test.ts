/**
 * Ack log replay: a log of any size replays its valid prefix (streamed, never read whole), and a
 * log with entries that check out but cannot be true, or that cannot be read, is a refusal (the
 * listener does not start, verify --acks exits 3 naming the file), never fewer acks.
 */
import t from 'tap'
import { appendFileSync, mkdirSync, readFileSync, rmSync, statSync, truncateSync } from 'node:fs'
import { join } from 'node:path'
import { Listener } from '../../../src/server/listen/listener.js'
import { listenerRefuses } from '../../fixtures/damage-refusal.js'
import { AckStore, frameCommit } from '../../../src/store/ack-store.js'
import { maxCommitBytes, maxEndDetailBytes } from '../../../src/store/ack-log.js'
import { runInProcess, tempDir } from '../../fixtures/cli.js'
import { Peer, runMeta } from '../../fixtures/peer.js'

const commit = frameCommit

/** A store with one run whose acks 1..seqs are recorded (each ack its own commit, so many entries). */
async function storeWithRun(dir: string, runId: string, seqs: number): Promise<void> {
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir })
  const peer = await Peer.writer(listener.address().port, runMeta(runId))
  let recorded = 0
  for (let seq = 1; seq <= seqs; seq++) {
    peer.send({ type: 'ack', runId, fromSeq: seq, toSeq: seq })
    if (seq % 50 === 0 || seq === seqs)
      while (recorded < seq) recorded = ((await peer.next('recorded')) as { throughSeq: number }).throughSeq
  }
  peer.close()
  await listener.close()
}

t.test('an ack log sparse-extended past 2 GiB is refused at once, naming where its entries end', async (t) => {
  const dir = tempDir(t)
  const runId = '0000000000000a01'
  await storeWithRun(dir, runId, 500)
  const log = join(dir, 'runs', runId, 'acks.log')
  const validBytes = statSync(log).size
  // A crash leaves at most the last commit's bytes as zeros (the size reached the disk before the
  // data); 2 GiB of them is damage (a lost size, a stray truncate), judged from the size, unread.
  const size = 2 * 1024 ** 3 + 12_345
  truncateSync(log, size)
  const message = new RegExp(
    `could not read ${log}: damaged at byte ${validBytes}: .*${size - validBytes} bytes run from there to the end of the file, more than the largest commit`,
  )
  const started = performance.now()
  await t.rejects(AckStore.load(dir), { exitCode: 3, message }, 'the store refuses to load')
  t.ok(performance.now() - started < 2000, 'at once: the hole is not read')
  // The listener refuses the run too (at once: the check reads the file's size first).
  await listenerRefuses(t, dir, message)
})

t.test('checksummed entries that cannot be true are damage: a refusal, never the acks after them dropped', async (t) => {
  const runId = '0000000000000a02'
  const cases: Array<[string, (announcedMs: number) => object, RegExp]> = [
    [
      'a gap in the seqs',
      (ms) => ({ k: 'ack', fromSeq: 12, toSeq: 20, firstMs: ms, lastMs: ms }),
      /acknowledges seqs 12-20 after seq 10 \(not contiguous/,
    ],
    [
      'a seq no writer can have reached',
      (ms) => ({ k: 'ack', fromSeq: 11, toSeq: 2 ** 50, firstMs: ms, lastMs: ms + 1 }),
      /more than a writer can have written by then/,
    ],
    [
      'a time before the run',
      (ms) => ({ k: 'ack', fromSeq: 11, toSeq: 12, firstMs: ms - 3_600_000, lastMs: ms }),
      /not after the run's announcement/,
    ],
    [
      'a time that is not a real date',
      () => ({ k: 'ack', fromSeq: 11, toSeq: 12, firstMs: 5, lastMs: 6 }),
      /matches its checksum but is not an ack log entry \(field e\.0\.firstMs/,
    ],
    [
      'a seq that is not a number',
      (ms) => ({ k: 'ack', fromSeq: 11, toSeq: 'many', firstMs: ms, lastMs: ms }),
      /matches its checksum but is not an ack log entry \(field e\.0\.toSeq/,
    ],
    [
      'an ack after the end',
      (ms) => ({ k: 'ack', fromSeq: 11, toSeq: 12, firstMs: ms, lastMs: ms }),
      /acknowledges seqs 11-12 after the run's end/,
    ],
  ]
  for (const [name, bad, why] of cases) {
    const dir = tempDir(t)
    await storeWithRun(dir, runId, 10)
    const log = join(dir, 'runs', runId, 'acks.log')
    const store = await AckStore.load(dir)
    const announcedMs = store.runInfo(runId)!.announcedMs
    // The writer closed without an end: the listener logged 'vanished', its last commit. Taken off
    // (a log whose listener died before that commit) unless the case is about it.
    t.equal(store.runInfo(runId)!.ended, true)
    let commits = commitsIn(readFileSync(log))
    if (name !== 'an ack after the end') {
      truncateSync(log, entryOffsets(readFileSync(log)).at(-1)!)
      commits--
    }
    const atByte = statSync(log).size
    appendFileSync(log, commit(commits + 1, [bad(announcedMs)]))
    appendFileSync(log, commit(commits + 2, [{ k: 'ack', fromSeq: 11, toSeq: 30, firstMs: announcedMs + 10, lastMs: announcedMs + 10 }]))
    await t.rejects(
      AckStore.load(dir),
      {
        exitCode: 3,
        message: new RegExp(
          `could not read ${log}: damaged at byte ${atByte}: the entry there (\\(commit ${commits + 1}\\) )?.*${why.source}`,
        ),
      },
      name,
    )
  }
})

function entryOffsets(log: Buffer): number[] {
  const offsets: number[] = []
  for (let at = 0; at + 12 <= log.length; at += 12 + log.readUInt32LE(at)) offsets.push(at)
  return offsets
}

/** Commits in a log of this version: its entries after the header. */
const commitsIn = (log: Buffer): number => entryOffsets(log).length - 1

t.test('an ack log that cannot be read is a refusal, never fewer acks', async (t) => {
  const dir = tempDir(t)
  const runId = '0000000000000a03'
  await storeWithRun(dir, runId, 5)
  const log = join(dir, 'runs', runId, 'acks.log')
  rmSync(log)
  mkdirSync(log) // not a regular file: refused like a log whose read fails (EIO)
  await listenerRefuses(t, dir, new RegExp(`could not read ${log}: not a regular file`))
  const verify = await runInProcess(['verify', '--acks', dir, '--file', `/data/${runId}`, '--host', 'testhost'])
  t.equal(verify.code, 3, verify.stderr)
  t.match(verify.stderr, `plugcheck: could not read ${log}: not a regular file`)
  t.notMatch(verify.stderr, /\n\s+at /, 'no stack trace')

  // Without its catalog every log is replayed at start: listen refuses to start.
  rmSync(join(dir, 'catalog.msgpack'))
  const listen = await runInProcess(['listen', '--host', '127.0.0.1', '--port', '0', '--dir', dir])
  t.equal(listen.code, 3, 'listen refuses to start')
  t.match(listen.stderr, `could not read ${log}: not a regular file`)
})

t.test("a clock stepped back during a run does not make the run's own log implausible", async (t) => {
  const dir = tempDir(t)
  const runId = '0000000000000a04'
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir })
  const peer = await Peer.writer(listener.address().port, runMeta(runId))
  peer.send({ type: 'ack', runId, fromSeq: 1, toSeq: 5 })
  await peer.next('recorded')
  const realNow = Date.now
  Date.now = () => realNow() - 2 * 3600_000 // an NTP step of two hours back
  t.teardown(() => void (Date.now = realNow))
  try {
    peer.send({ type: 'ack', runId, fromSeq: 6, toSeq: 10 })
    t.match(await peer.next('recorded'), { throughSeq: 10 })
  } finally {
    Date.now = realNow
  }
  peer.close()
  await listener.close()
  const store = await AckStore.load(dir)
  t.equal(store.lastAckedSeq(runId), 10, 'all 10 acks replay')
  t.same(store.warnings, [])
})

t.test('a stray file named like a run is skipped with a warning, not a refusal', async (t) => {
  const dir = tempDir(t)
  mkdirSync(join(dir, 'runs'))
  const { writeFileSync } = await import('node:fs')
  writeFileSync(join(dir, 'runs', '00000000000000ff'), 'not a run')
  const store = await AckStore.load(dir)
  t.match(store.warnings, [/run 00000000000000ff: .*runs\/00000000000000ff is not a directory, skipped/])
})

t.test("every commit fits the torn-tail bound: an end's long detail is cut to fit, the queue split over commits", async (t) => {
  const dir = tempDir(t)
  const runId = '0000000000000a0e'
  const meta = runMeta(runId)
  const store = await AckStore.open(dir)
  await store.createRun(meta, Date.now())
  // Queued at once: acks, steady, more acks, an end of 4,096 three-byte characters (12 KiB of UTF-8).
  for (let seq = 1; seq <= 40; seq += 2) store.appendAck(runId, seq, seq + 1, Date.now())
  store.recordSteady(runId, Date.now())
  store.appendAck(runId, 41, 50, Date.now())
  store.endRun(runId, 'error', '€'.repeat(4096), Date.now())
  await store.close()
  const log = readFileSync(join(dir, 'runs', runId, 'acks.log'))
  for (let at = 0; at < log.length; at += 12 + log.readUInt32LE(at))
    t.ok(12 + log.readUInt32LE(at) <= maxCommitBytes, `the entry at byte ${at} is within ${maxCommitBytes} bytes`)
  const reloaded = await AckStore.load(dir)
  t.same(reloaded.warnings, [])
  t.equal(reloaded.lastAckedSeq(runId), 50)
  const end = reloaded.summaries()[0]!.end!
  t.equal(end.reason, 'error')
  t.match(end.detail, /^€+…$/, 'the detail, cut and marked')
  t.ok(Buffer.byteLength(end.detail!) <= maxEndDetailBytes)
})
