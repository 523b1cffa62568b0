/**
 * judgeRun streams the file in large chunks with reads in flight and a fast path for whole records,
 * checked on worker threads or on the main thread; its report must be what classifying every slot on
 * its own, the slow way, gives. Real files of 12 KiB records (no read size is a multiple of them: a
 * read is cut to whole records), ending mid-record, with seeded random damage
 * (PLUGCHECK_JUDGE_SEED replays a run): flipped bytes, zeroed sectors, torn and stale records,
 * misdirected writes. Each file is judged by the main thread alone, by the default threads with
 * 16 MiB reads (two chunks), and by three threads with ~1 MiB reads (19 chunks, dealt round robin).
 * A thread that fails to start or throws mid-file makes judgeRun fail (exit 3), never pass.
 */
import { closeSync, openSync, readSync, statSync, truncateSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { judgeRun, type RunReport } from '../../src/client/judge.js'
import { threadsEnv } from '../../src/client/scan-threads.js'
import { PlugcheckError } from '../../src/errors.js'
import { Classifier, runLayout } from '../../src/record/classify.js'
import { fillRecord, runKey, sectorBytes, slotOf, slotOffsetBytes, type Pattern, type RunMeta } from '../../src/record/format.js'
import { craftMeta, craftRun, writeDataFile, range } from '../fixtures/crafted-run.js'
import { seededRandom } from '../lab/seeded.js'

const recordSize = 12 * 1024
const slotCount = 1600 // 18.75 MiB of records: more than one 16 MiB read
const damagedSlots = 80
const smallReadBytes = 1024 * 1024 + 5000

/** How judgeRun checks records: threads (env; unset: the default for this machine) and read size. */
const ways = [
  { name: 'main thread only', threads: '0', readChunkBytes: undefined },
  { name: 'default threads', threads: undefined, readChunkBytes: undefined },
  { name: '3 threads, small reads', threads: '3', readChunkBytes: smallReadBytes },
] as const

/** Sets (or unsets) an environment variable for the rest of test t. */
function setEnv(t: Test, name: string, value: string | undefined): void {
  const before = process.env[name]
  const put = (v: string | undefined): void => {
    if (v === undefined) delete process.env[name]
    else process.env[name] = v
  }
  put(value)
  t.teardown(() => put(before))
}

/** What the slow classifier says of every judged slot, read one by one. */
interface Reference {
  readonly counts: Record<string, number>
  readonly findings: string[]
  readonly lostSeqs: number[]
  readonly failedSeqs: number[]
  readonly survivedSeq: number
}

function reference(meta: RunMeta, acked: number, nowMs: number): Reference {
  const key = runKey(meta.runId)
  const last = new Map<number, number>()
  for (let seq = 1; seq <= acked; seq++) last.set(slotOf(key, meta.pattern, seq, meta.slotCount), seq)
  const classifier = new Classifier(key, recordSize, runLayout(meta, nowMs), { fastPath: false })
  const counts: Record<string, number> = { intact: 0, interrupted: 0, lost: 0, torn: 0, corrupt: 0 }
  const findings: string[] = []
  const lostSeqs: number[] = []
  const failedSeqs: number[] = []
  let survivedSeq = 0
  const fd = openSync(meta.path, 'r')
  try {
    const buffer = Buffer.alloc(recordSize)
    for (const [slot, seq] of [...last].sort((a, b) => a[0] - b[0])) {
      const got = readSync(fd, buffer, 0, recordSize, slotOffsetBytes(recordSize, slot))
      const verdict = classifier.classify(buffer.subarray(0, got), slot, seq)
      counts[verdict.kind]!++
      if (verdict.kind === 'torn' || verdict.kind === 'corrupt' || verdict.kind === 'interrupted') findings.push(`${verdict.kind} ${seq} ${slot}: ${verdict.detail}`)
      if (verdict.kind === 'lost') lostSeqs.push(seq)
      if (verdict.kind === 'lost' || verdict.kind === 'torn' || verdict.kind === 'corrupt') failedSeqs.push(seq)
      else survivedSeq = Math.max(survivedSeq, verdict.foundSeq ?? seq)
    }
  } finally {
    closeSync(fd)
  }
  const ascending = (xs: number[]): number[] => xs.sort((a, b) => a - b)
  return { counts, findings: findings.sort(), lostSeqs: ascending(lostSeqs), failedSeqs: ascending(failedSeqs), survivedSeq }
}

function damage(meta: RunMeta, acked: number, random: () => number): void {
  const key = runKey(meta.runId)
  const pick = (n: number): number => Math.floor(random() * n)
  const fd = openSync(meta.path, 'r+')
  try {
    const record = Buffer.alloc(recordSize)
    for (let i = 0; i < damagedSlots; i++) {
      const slot = pick(meta.slotCount)
      const at = slotOffsetBytes(recordSize, slot)
      const kind = pick(5)
      if (kind === 0) {
        writeSync(fd, Buffer.from([pick(256)]), 0, 1, at + pick(recordSize)) // a flipped (or rewritten) byte anywhere: payload, header, checksum
      } else if (kind === 1) {
        const from = pick(recordSize / sectorBytes)
        writeSync(fd, Buffer.alloc((1 + pick(3)) * sectorBytes), 0, undefined, at + from * sectorBytes) // zeroed blocks
      } else {
        // A record of another seq: an older one at this slot (stale, or torn when only part of it lands), or one of another slot (misdirected).
        const seq = 1 + pick(acked)
        fillRecord(record, key, seq, slotOf(key, meta.pattern, seq, meta.slotCount), (meta.createdMs + 1000) * 1000 + seq)
        const sectors = kind === 2 ? recordSize / sectorBytes : 1 + pick(recordSize / sectorBytes - 1)
        writeSync(fd, record, 0, sectors * sectorBytes, at)
      }
    }
  } finally {
    closeSync(fd)
  }
  // The file ends inside the third slot from the end, not on a sector boundary.
  truncateSync(meta.path, slotOffsetBytes(recordSize, meta.slotCount - 3) + 5000)
}

function compare(t: Test, report: RunReport, expected: Reference): void {
  t.same({ intact: report.intact, interrupted: report.interrupted, lost: report.lost, torn: report.torn, corrupt: report.corrupt }, expected.counts, 'the same counts')
  const findings = [
    ...report.tornRecords.map((f) => `torn ${f.seq} ${f.slot}: ${f.detail}`),
    ...report.corruptRecords.map((f) => `corrupt ${f.seq} ${f.slot}: ${f.detail}`),
    ...report.interruptedRecords.map((f) => `interrupted ${f.seq} ${f.slot}: ${f.detail}`),
  ].sort()
  t.same(findings, expected.findings, 'the same findings, detail for detail')
  t.ok(report.lost + report.torn + report.corrupt > 0, 'the damage was found')
  const inRanges = report.lostRanges.flatMap((r) => range(r.fromSeq, r.toSeq))
  t.ok(report.lostRangeCount <= report.lostRanges.length, 'every lost range listed')
  t.same(inRanges, expected.lostSeqs, 'the lost ranges hold exactly the lost seqs, in order')
  const reordered = expected.failedSeqs.filter((q) => q < expected.survivedSeq)
  t.same(report.reordering, reordered.length === 0 ? null : { count: reordered.length, survivedSeq: expected.survivedSeq, earliestLostSeq: reordered[0] }, 'the same reordering')
}

for (const pattern of ['append', 'overwrite'] as const satisfies readonly Pattern[]) {
  t.test(`${pattern}: streamed judging equals the slot-by-slot slow path`, async (t) => {
    const seed = process.env.PLUGCHECK_JUDGE_SEED === undefined ? (Date.now() ^ (process.pid << 8)) >>> 0 : Number(process.env.PLUGCHECK_JUDGE_SEED) >>> 0
    t.comment(`PLUGCHECK_JUDGE_SEED=${seed}`)
    const random = seededRandom(seed)
    const dir = t.testdir()
    const meta = craftMeta('00112233445566aa', join(dir, 'data'), { pattern, recordSizeBytes: recordSize, slotCount })
    const acked = pattern === 'append' ? slotCount + 700 : slotCount * 3
    writeDataFile(meta, range(1, acked), { sizeSlots: slotCount + 1 })
    const nowMs = Date.now()
    for (const way of ways) {
      setEnv(t, threadsEnv, way.threads)
      const clean = await judgeRun(craftRun(meta, acked), { nowMs, readChunkBytes: way.readChunkBytes })
      t.equal(clean.intact, clean.acked - clean.superseded, `an undamaged file: every judged record intact (${way.name})`)
    }

    damage(meta, acked, random)
    t.not(statSync(meta.path).size % recordSize, 0, 'the file ends mid-record')
    const expected = reference(meta, acked, nowMs)
    for (const way of ways) {
      await t.test(way.name, async (t) => {
        setEnv(t, threadsEnv, way.threads)
        compare(t, await judgeRun(craftRun(meta, acked), { nowMs, readChunkBytes: way.readChunkBytes }), expected)
      })
    }
  })
}

t.test('a verify thread that fails: judgeRun fails with exit 3, never a partial verdict', async (t) => {
  const dir = t.testdir()
  const meta = craftMeta('00112233445566bb', join(dir, 'data'), { pattern: 'append', recordSizeBytes: recordSize, slotCount })
  writeDataFile(meta, range(1, slotCount), { sizeSlots: slotCount + 1 })
  setEnv(t, threadsEnv, '2')
  for (const fault of ['start', '1', '3']) {
    await t.test(`PLUGCHECK_SCAN_THREAD_FAULT=${fault}`, async (t) => {
      setEnv(t, 'PLUGCHECK_SCAN_THREAD_FAULT', fault)
      const error = await judgeRun(craftRun(meta, slotCount), { readChunkBytes: smallReadBytes }).then(
        () => null,
        (e: unknown) => e,
      )
      t.ok(error instanceof PlugcheckError, 'a plugcheck error')
      t.equal((error as PlugcheckError).exitCode, 3)
      t.match((error as PlugcheckError).message, /^a verify thread failed: .*PLUGCHECK_SCAN_THREAD_FAULT.*; the file was not judged$/)
    })
  }
})
