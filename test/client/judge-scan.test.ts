/**
 * judgeRun streams the file in large chunks with reads in flight and a fast path for whole records;
 * its report must be what classifying every slot on its own, the slow way, gives. Real files of
 * 12 KiB records (16 MiB is no multiple of them: a read is cut to whole records, and the file spans
 * two reads), ending mid-record, with seeded random damage
 * (PLUGCHECK_JUDGE_SEED replays a run): flipped bytes, zeroed sectors, torn and stale records,
 * misdirected writes.
 */
import { closeSync, openSync, readSync, statSync, truncateSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { judgeRun } from '../../src/client/judge.js'
import { Classifier, runLayout } from '../../src/record/classify.js'
import { fillRecord, runKey, sectorBytes, slotOf, slotOffsetBytes, type Pattern, type RunMeta } from '../../src/record/format.js'
import { craftMeta, craftRun, writeDataFile, range } from '../fixtures/crafted-run.js'
import { seededRandom } from '../lab/seeded.js'

const recordSize = 12 * 1024
const slotCount = 1600 // 18.75 MiB of records: more than one 16 MiB read
const damagedSlots = 80

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

    const clean = await judgeRun(craftRun(meta, acked), { nowMs })
    t.equal(clean.intact, clean.acked - clean.superseded, 'an undamaged file: every judged record intact')

    damage(meta, acked, random)
    t.not(statSync(meta.path).size % recordSize, 0, 'the file ends mid-record')
    const report = await judgeRun(craftRun(meta, acked), { nowMs })
    const expected = reference(meta, acked, nowMs)
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
  })
}
