/**
 * The ack log's torn-tail rule on real logs written by a listener (each ack its own commit, over
 * 100 KB): only the last entry can be torn by a crash. A flipped byte, a duplicated, missing or
 * out-of-order entry anywhere else (one entry before the end, ~40 KB before it, in the middle) is
 * damage: the listener refuses to start and verify --acks exits 3, naming the file and the byte
 * offset, never judging with fewer acks (here that would turn a FAIL into a PASS). The last commit
 * cut short (mid-entry, zeros where its bytes should be, a file extended with at most a commit of zeros) still loads, with
 * a warning. Logs of the previous format (no header, several entries per commit) still load and are
 * judged by the same rule.
 */
import t, { type Test } from 'tap'
import { closeSync, cpSync, mkdirSync, openSync, readFileSync, readSync, statSync, truncateSync, writeFileSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { Packr } from 'msgpackr'
import { Listener } from '../../../src/server/listen/listener.js'
import { listenerRefuses } from '../../fixtures/damage-refusal.js'
import { AckStore, frameCommit, frameLogEntry, logHeader } from '../../../src/store/ack-store.js'
import { maxCommitBytes } from '../../../src/store/ack-log.js'
import { protocolVersion } from '../../../src/protocol/messages.js'
import { runInProcess, tempDir } from '../../fixtures/cli.js'
import { craftMeta, range, writeDataFile } from '../../fixtures/crafted-run.js'
import { Peer, runIdOf } from '../../fixtures/peer.js'

const packr = new Packr({ useRecords: false, int64AsType: 'number', mapsAsObjects: true })
const seqs = 1500
/** Records acknowledged in the log's last ~25 KB are gone from the data file: the intact log gives FAIL. */
const lostFromSeq = 1201
const runId = runIdOf(0xa10)

/** Byte offsets of the log's entries (length-prefixed). */
function entryOffsets(log: Buffer): number[] {
  const offsets: number[] = []
  for (let at = 0; at + 12 <= log.length; at += 12 + log.readUInt32LE(at)) offsets.push(at)
  return offsets
}

function flipByte(path: string, position: number): void {
  const fd = openSync(path, 'r+')
  try {
    const byte = Buffer.alloc(1)
    readSync(fd, byte, 0, 1, position)
    byte[0] = byte[0]! ^ 0x10
    writeSync(fd, byte, 0, 1, position)
  } finally {
    closeSync(fd)
  }
}

/**
 * A listener directory holding one run, acks 1..seqs each recorded by a commit of its own, then its
 * end; its data file holds records 1..lostFromSeq-1 only.
 */
async function realLog(dir: string): Promise<{ file: string; log: string }> {
  const file = join(dir, 'data')
  const meta = craftMeta(runId, file, { requestedPath: file, createdMs: Date.now(), slotCount: seqs })
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir })
  const peer = await Peer.open(listener.address().port)
  peer.send({ type: 'hello', protocol: protocolVersion, role: 'writer' })
  peer.send({ type: 'run', meta })
  await peer.next('run-ok')
  for (let seq = 1; seq <= seqs; seq++) {
    peer.send({ type: 'ack', runId, fromSeq: seq, toSeq: seq })
    let recorded = 0
    while (recorded < seq) recorded = ((await peer.next('recorded')) as { throughSeq: number }).throughSeq
  }
  peer.send({ type: 'end', runId, reason: 'duration' })
  await peer.next('recorded')
  peer.close()
  await listener.close()
  writeDataFile(meta, range(1, lostFromSeq - 1), { sizeSlots: seqs })
  return { file, log: join(dir, 'runs', runId, 'acks.log') }
}

/**
 * One real log for the three tests below, built once (1,500 acks, each recorded by a round of its
 * own): each reads it and damages copies of its runs/ in directories of their own beside it.
 */
let sharedLog: Promise<{ base: string; file: string; log: string }> | undefined
function sharedRealLog(): Promise<{ base: string; file: string; log: string }> {
  sharedLog ??= (async () => {
    const base = tempDir(t)
    return { base, ...(await realLog(base)) }
  })()
  return sharedLog
}

const verifyAcks = (dir: string, file: string) => runInProcess(['verify', '--acks', dir, '--file', file, '--json'])

/** The listener refuses to start, AckStore.load rejects and verify --acks exits 3 with no verdict: all naming the log and the byte. */
async function refusedAt(t: Test, dir: string, file: string, log: string, atByte: number, what: RegExp): Promise<void> {
  const message = new RegExp(`could not read ${log}: damaged at byte ${atByte}: the entry there ${what.source}`)
  await listenerRefuses(t, dir, message)
  await t.rejects(AckStore.load(dir), { exitCode: 3, message }, 'the store refuses to load: no fewer acks')
  const verify = await verifyAcks(dir, file)
  t.equal(verify.code, 3, `verify --acks exits 3 (${verify.stderr.split('\n')[0]}; stdout: ${verify.stdout.slice(0, 80)})`)
  t.match(verify.stderr, message)
  t.equal(verify.stdout, '', 'no verdict')
}

t.test('damage anywhere but the last entry is refused with its byte offset, never fewer acks', async (t) => {
  const { base, file, log } = await sharedRealLog()
  const bytes = readFileSync(log)
  const offsets = entryOffsets(bytes)
  t.equal(offsets.length, 1 + seqs + 1, 'a header, one commit per ack, and the end')
  t.ok(bytes.length > 100 * 1024, `the log is ${bytes.length} bytes`)

  const intact = await verifyAcks(base, file)
  t.equal(intact.code, 1, 'the intact log: FAIL')
  t.match(JSON.parse(intact.stdout), { verdict: 'fail', runs: [{ acked: seqs, lost: seqs - lostFromSeq + 1 }] })

  const entryBefore = (distanceBytes: number): number => offsets.filter((o) => o <= bytes.length - distanceBytes).at(-1)!
  const lostEntry = offsets[lostFromSeq]! // offsets[0] is the header, offsets[k] commit k (seq k)
  const cases: Array<[string, number, number, RegExp]> = [
    [
      'a byte flipped one entry before the last',
      offsets.at(-2)!,
      offsets.at(-2)! + 30,
      /does not match its checksum, and \d+ bytes of data follow its end/,
    ],
    [
      'a byte flipped ~40 KB before the end',
      entryBefore(40 * 1024),
      entryBefore(40 * 1024) + 40,
      /does not match its checksum, and \d+ bytes of data follow its end/,
    ],
    [
      'a byte flipped in the middle',
      entryBefore(bytes.length / 2),
      entryBefore(bytes.length / 2) + 50,
      /does not match its checksum, and \d+ bytes of data run from there/,
    ],
    [
      'a flipped bit in a length field ~40 KB before the end',
      entryBefore(40 * 1024),
      entryBefore(40 * 1024) + 2,
      /has a length no entry has/,
    ],
    ['a byte flipped in the header', 0, 20, /does not match its checksum/],
  ]
  t.ok(cases[1]![1] < lostEntry, 'the ~40 KB case is before every lost record: dropping the log from there would hide every loss')
  for (const [name, atByte, flipAt, what] of cases) {
    await t.test(name, async (t) => {
      const dir = join(base, `case-${atByte}-${flipAt}`)
      cpSync(join(base, 'runs'), join(dir, 'runs'), { recursive: true })
      const copy = join(dir, 'runs', runId, 'acks.log')
      flipByte(copy, flipAt)
      await refusedAt(t, dir, file, copy, atByte, what)
    })
  }
})

t.test('a duplicated, missing or out-of-order entry is damage, named', async (t) => {
  const { base, file, log } = await sharedRealLog()
  const bytes = readFileSync(log)
  const offsets = entryOffsets(bytes)
  const entry = (i: number) => bytes.subarray(offsets[i]!, offsets[i + 1] ?? bytes.length)
  const k = 700
  const cases: Array<[string, Buffer, number, RegExp]> = [
    [
      'commit 700 written twice',
      Buffer.concat([bytes.subarray(0, offsets[k + 1]!), entry(k), bytes.subarray(offsets[k + 1]!)]),
      offsets[k + 1]!,
      /repeats commit 700 \(a duplicated entry; commit 701 was expected\)/,
    ],
    ['the last entry written twice', Buffer.concat([bytes, entry(offsets.length - 1)]), bytes.length, /repeats commit 1501/],
    [
      'commits 700 and 701 swapped',
      Buffer.concat([bytes.subarray(0, offsets[k]!), entry(k + 1), entry(k), bytes.subarray(offsets[k + 2]!)]),
      offsets[k]!,
      /is commit 701, where commit 700 was expected \(an entry out of order or missing\)/,
    ],
    [
      'commit 700 missing',
      Buffer.concat([bytes.subarray(0, offsets[k]!), bytes.subarray(offsets[k + 1]!)]),
      offsets[k]!,
      /is commit 701, where commit 700 was expected/,
    ],
    ['the header written twice', Buffer.concat([entry(0), bytes]), entry(0).length, /is a second header/],
  ]
  for (const [name, content, atByte, what] of cases) {
    await t.test(name, async (t) => {
      const dir = join(base, name.replaceAll(' ', '-'))
      cpSync(join(base, 'runs'), join(dir, 'runs'), { recursive: true })
      const copy = join(dir, 'runs', runId, 'acks.log')
      writeFileSync(copy, content)
      await refusedAt(t, dir, file, copy, atByte, what)
    })
  }

  await t.test("another run's log in this run's directory", async (t) => {
    const dir = join(base, 'copied')
    cpSync(join(base, 'runs'), join(dir, 'runs'), { recursive: true })
    const copy = join(dir, 'runs', runId, 'acks.log')
    writeFileSync(copy, Buffer.concat([logHeader(runIdOf(0xbad)), bytes.subarray(offsets[1]!)]))
    await refusedAt(t, dir, file, copy, 0, new RegExp(`is the header of run ${runIdOf(0xbad)}'s log, not of run ${runId}`))
  })
})

t.test('the last commit cut short by a crash is ignored with a warning; everything before it is kept', async (t) => {
  const { base, file, log } = await sharedRealLog()
  const bytes = readFileSync(log)
  const offsets = entryOffsets(bytes)
  const lastAck = offsets.at(-2)! // commit 1500, seq 1500: the end after it never made it
  const lastAckBytes = offsets.at(-1)! - lastAck
  const cases: Array<[string, Buffer, number, number, RegExp]> = [
    ['cut mid-entry', bytes.subarray(0, lastAck + 30), seqs - 1, 30, /an entry that is cut short by the end of the file/],
    ['cut inside its length field', bytes.subarray(0, lastAck + 3), seqs - 1, 3, /an entry that is cut short by the end of the file/],
    [
      'its second half zeros (the file size reached the disk, that page did not)',
      Buffer.concat([bytes.subarray(0, lastAck + 40), Buffer.alloc(lastAckBytes - 40)]),
      seqs - 1,
      lastAckBytes,
      /an entry that does not match its checksum/,
    ],
    [
      'its first bytes zeros, the rest there (its sectors landed out of order)',
      Buffer.concat([bytes.subarray(0, lastAck), Buffer.alloc(16), bytes.subarray(lastAck + 16, offsets.at(-1)!)]),
      seqs - 1,
      lastAckBytes,
      /an entry that does not match its checksum/,
    ],
    [
      'zeros after the last whole entry (the size reached the disk before the data)',
      Buffer.concat([bytes, Buffer.alloc(300)]),
      seqs,
      300,
      /zeros/,
    ],
    [
      "zeros after the last whole entry, as many as the largest commit's bytes",
      Buffer.concat([bytes, Buffer.alloc(maxCommitBytes)]),
      seqs,
      maxCommitBytes,
      /zeros/,
    ],
  ]
  for (const [name, content, kept, ignoredBytes, what] of cases) {
    await t.test(name, async (t) => {
      const dir = join(base, name.replace(/\W+/g, '-'))
      cpSync(join(base, 'runs'), join(dir, 'runs'), { recursive: true })
      const copy = join(dir, 'runs', runId, 'acks.log')
      writeFileSync(copy, content)
      const store = await AckStore.load(dir)
      t.equal(store.lastAckedSeq(runId), kept, `acks 1-${kept} kept`)
      t.equal(store.warnings.length, 1)
      t.match(
        store.warnings[0],
        new RegExp(
          `run ${runId}: ignored ${ignoredBytes} bytes of a torn ack log tail at byte ${content.length - ignoredBytes} of ${copy} \\(${what.source}\\): the last commit, cut short by a crash, was never reported as recorded`,
        ),
      )
      const verify = await verifyAcks(dir, file)
      t.equal(verify.code, 1, 'verify judges it: FAIL')
      t.match(JSON.parse(verify.stdout), { verdict: 'fail', runs: [{ acked: kept, lost: kept - lostFromSeq + 1 }] })
      t.match(verify.stderr, /ignored \d+ bytes of a torn ack log tail/, 'the warning is shown')
    })
  }

  // A crash leaves at most the last commit's bytes as zeros; more zeros hide commits that were recorded.
  for (const zeros of [maxCommitBytes + 1, 300_000]) {
    await t.test(`${zeros} zeros after the last whole entry, more than a commit: damage`, async (t) => {
      const dir = join(base, `zeros-${zeros}`)
      cpSync(join(base, 'runs'), join(dir, 'runs'), { recursive: true })
      const copy = join(dir, 'runs', runId, 'acks.log')
      writeFileSync(copy, Buffer.concat([bytes, Buffer.alloc(zeros)]))
      await refusedAt(
        t,
        dir,
        file,
        copy,
        bytes.length,
        new RegExp(
          `does not match its checksum, and ${zeros} bytes run from there to the end of the file, more than the largest commit \\(${maxCommitBytes} bytes\\)`,
        ),
      )
    })
  }

  await t.test('a listener started on a torn log keeps serving it', async (t) => {
    const dir = join(base, 'restart')
    cpSync(join(base, 'runs'), join(dir, 'runs'), { recursive: true })
    truncateSync(join(dir, 'runs', runId, 'acks.log'), lastAck + 30)
    const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir })
    t.teardown(() => listener.close())
    t.equal(listener.store.lastAckedSeq(runId), seqs - 1)
  })
})

/** A run of the previous format: a bare msgpack meta.msgpack and a log of single entries, no header. */
function legacyRun(dir: string, file: string, entries: number): { log: string; offsets: number[] } {
  const announcedMs = Date.now() - 3_600_000
  const meta = craftMeta(runId, file, { requestedPath: file, createdMs: announcedMs, slotCount: entries })
  const runDir = join(dir, 'runs', runId)
  mkdirSync(runDir, { recursive: true })
  writeFileSync(join(runDir, 'meta.msgpack'), packr.pack({ meta, announcedMs, announceIndex: 1, peer: '127.0.0.1' }))
  const framed = range(1, entries).map((seq) =>
    frameLogEntry({ k: 'ack', fromSeq: seq, toSeq: seq, firstMs: announcedMs + seq, lastMs: announcedMs + seq }),
  )
  framed.push(
    frameLogEntry({ k: 'steady', atMs: announcedMs + entries }),
    frameLogEntry({ k: 'end', reason: 'duration', atMs: announcedMs + entries + 1 }),
  )
  const log = join(runDir, 'acks.log')
  writeFileSync(log, Buffer.concat(framed))
  writeDataFile(meta, range(1, lostFromSeq - 1), { sizeSlots: entries })
  return { log, offsets: entryOffsets(readFileSync(log)) }
}

t.test("a previous listener's log (no header, an entry per item) loads and is judged by the same rule", async (t) => {
  const base = tempDir(t)
  const file = join(base, 'data')
  const { log, offsets } = legacyRun(base, file, seqs)
  const store = await AckStore.load(base)
  t.equal(store.lastAckedSeq(runId), seqs)
  t.same(store.warnings, [])
  t.equal(store.runInfo(runId)!.ended, true)
  const intact = await verifyAcks(base, file)
  t.equal(intact.code, 1, 'FAIL, as written')

  const size = statSync(log).size
  const flipped = join(base, 'flipped')
  cpSync(join(base, 'runs'), join(flipped, 'runs'), { recursive: true })
  const at = offsets.filter((o) => o <= size - 40 * 1024).at(-1)!
  flipByte(join(flipped, 'runs', runId, 'acks.log'), at + 30)
  await refusedAt(
    t,
    flipped,
    file,
    join(flipped, 'runs', runId, 'acks.log'),
    at,
    /does not match its checksum, and \d+ bytes of data follow its end/,
  )

  const torn = join(base, 'torn')
  cpSync(join(base, 'runs'), join(torn, 'runs'), { recursive: true })
  truncateSync(join(torn, 'runs', runId, 'acks.log'), offsets.at(-1)! + 5)
  const tornStore = await AckStore.load(torn)
  t.equal(tornStore.lastAckedSeq(runId), seqs, 'a torn last entry (the end): every ack kept')
  t.equal(tornStore.runInfo(runId)!.ended, false)
  t.match(tornStore.warnings, [/ignored 5 bytes of a torn ack log tail/])

  // A previous listener's commit of several entries (ack, end) torn with its later entry intact
  // cannot be told from damage: refused, never fewer acks.
  const split = join(base, 'split')
  cpSync(join(base, 'runs'), join(split, 'runs'), { recursive: true })
  flipByte(join(split, 'runs', runId, 'acks.log'), offsets.at(-2)! + 5)
  await refusedAt(
    t,
    split,
    file,
    join(split, 'runs', runId, 'acks.log'),
    offsets.at(-2)!,
    /does not match its checksum, and \d+ bytes of data follow its end/,
  )
})

t.test('entries that check out but cannot be true here are damage, not a torn tail', async (t) => {
  const announcedMs = Date.now() - 60_000
  const ack = (fromSeq: number, toSeq: number, ms = announcedMs + 1000) => ({ k: 'ack', fromSeq, toSeq, firstMs: ms, lastMs: ms })
  const cases: Array<[string, Buffer[], RegExp]> = [
    [
      'a gap in the seqs',
      [frameCommit(1, [ack(1, 10)]), frameCommit(2, [ack(12, 20)])],
      /\(commit 2\) acknowledges seqs 12-20 after seq 10 \(not contiguous/,
    ],
    [
      'a seq no writer can have reached',
      [frameCommit(1, [ack(1, 2 ** 50)])],
      /\(commit 1\) acknowledges seq 1125899906842624 by .*, more than a writer can have written/,
    ],
    [
      'a time before the run',
      [frameCommit(1, [ack(1, 5, announcedMs - 3_600_000)])],
      /\(commit 1\) acknowledges seqs 1-5 at .*, not after the run's announcement/,
    ],
    [
      'a second end',
      [
        frameCommit(1, [{ k: 'end', reason: 'duration', atMs: announcedMs + 5 }]),
        frameCommit(2, [{ k: 'end', reason: 'duration', atMs: announcedMs + 6 }]),
      ],
      /\(commit 2\) ends the run a second time/,
    ],
    [
      'acks after the end',
      [frameCommit(1, [ack(1, 3), { k: 'end', reason: 'duration', atMs: announcedMs + 5 }, ack(4, 5)])],
      /\(commit 1\) acknowledges seqs 4-5 after the run's end/,
    ],
    [
      'a seq that is not a number, as the last entry',
      [frameCommit(1, [ack(1, 3)]), frameLogEntry({ k: 'commit', n: 2, e: [{ ...ack(4, 5), toSeq: 'many' }] })],
      /matches its checksum but is not an ack log entry \(field e\.0\.toSeq/,
    ],
    [
      'an entry of the previous format among commits',
      [frameCommit(1, [ack(1, 3)]), frameLogEntry(ack(4, 5))],
      /is a single ack entry of the previous format, inside a log of commits/,
    ],
    ['a header of a newer format', [], /is the header of a log of format 3/],
  ]
  for (const [name, entries, what] of cases) {
    await t.test(name, async (t) => {
      const dir = tempDir(t)
      const file = join(dir, 'data')
      const meta = craftMeta(runId, file, { requestedPath: file, createdMs: announcedMs })
      const store = await AckStore.open(dir)
      await store.createRun(meta, announcedMs)
      await store.close()
      const log = join(dir, 'runs', runId, 'acks.log')
      const header = name === 'a header of a newer format' ? frameLogEntry({ k: 'log', version: 3, runId }) : logHeader(runId)
      writeFileSync(log, Buffer.concat([header, ...entries]))
      const atByte = name === 'a header of a newer format' ? 0 : header.length + entries.slice(0, -1).reduce((n, e) => n + e.length, 0)
      const expected = ['a gap in the seqs', 'a second end'].includes(name) ? header.length + entries[0]!.length : atByte
      await t.rejects(AckStore.load(dir), {
        exitCode: 3,
        message: new RegExp(`could not read ${log}: damaged at byte ${expected}: the entry there ${what.source}`),
      })
    })
  }
})

t.test('a listener appends commits to the log it created, numbered on from replay of a new store', async (t) => {
  const dir = tempDir(t)
  const store = await AckStore.open(dir)
  const meta = craftMeta(runId, join(dir, 'data'), { createdMs: Date.now() })
  await store.createRun(meta, Date.now())
  for (let seq = 1; seq <= 20; seq++) {
    store.appendAck(runId, seq, seq, Date.now())
    await new Promise<void>((resolve) => store.once('recorded', () => resolve()))
  }
  store.recordSteady(runId, Date.now())
  store.endRun(runId, 'duration', undefined, Date.now())
  await store.close()
  const bytes = readFileSync(join(dir, 'runs', runId, 'acks.log'))
  const offsets = entryOffsets(bytes)
  const bodies = offsets.map(
    (o) => packr.unpack(bytes.subarray(o + 12, o + 12 + bytes.readUInt32LE(o))) as { k: string; n?: number; e?: Array<{ k: string }> },
  )
  t.same(bodies[0], { k: 'log', version: 2, runId }, 'the header first')
  t.same(
    bodies.slice(1).map((b) => b.n),
    range(1, bodies.length - 1),
    'then commits numbered 1, 2, 3, ... one entry each',
  )
  t.same(
    bodies.at(-1)!.e!.map((i) => i.k),
    ['steady', 'end'],
    'the steady and the end queued together went in one commit',
  )
  const replayed = await AckStore.load(dir)
  t.equal(replayed.lastAckedSeq(runId), 20)
  t.same(replayed.warnings, [])
})
