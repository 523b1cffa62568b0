/**
 * Judging one run: the listener's acks against what the data file holds (DESIGN.md, verify semantics).
 * Findings are values in the report; only a failure to read the file at all is an error.
 *
 * Each slot is judged by its last acknowledged seq (Classifier). In overwrite, an acked seq that a
 * later acked seq superseded on the same slot is counted as superseded, not judged.
 */
import { closeSync, fstatSync, openSync, readSync } from 'node:fs'
import type { AckSpan, StoredRun } from '../protocol/messages.js'
import { Classifier, type SlotVerdict } from '../record/classify.js'
import { decodeSuperblock, runKey, slotOf, slotOffsetBytes } from '../record/format.js'
import { describeSystemError, runtimeError } from '../errors.js'

const readChunkBytes = 4 * 1024 * 1024
/** Per-record detail lists are capped; counts are always exact. */
export const detailListLimit = 1000

export interface SeqRange {
  readonly fromSeq: number
  readonly toSeq: number
  readonly count: number
  /** Why these seqs are gone (zeros, older data, past the end of the file, another run's data). */
  readonly reason: string
  /** When the listener received the acks of these seqs (ms since the epoch; span precision 100 ms). */
  readonly ackedFromMs: number
  readonly ackedToMs: number
}

export interface RecordFinding {
  readonly seq: number
  readonly slot: number
  readonly offsetBytes: number
  readonly lengthBytes: number
  readonly detail: string
}

export interface RunReport {
  readonly runId: string
  readonly groupId: string
  readonly method: string
  readonly direct: boolean
  readonly recordSize: number
  readonly pattern: string
  readonly path: string
  readonly createdMs: number
  readonly ended: string | null
  readonly acked: number
  readonly superseded: number
  readonly intact: number
  readonly lost: number
  readonly torn: number
  readonly corrupt: number
  /** Overwrites of a newer, unacknowledged seq cut mid-record: the device's atomic write unit, not a failure. */
  readonly interrupted: number
  readonly verdict: 'pass' | 'fail'
  readonly superblock: { readonly kind: string; readonly detail: string }
  readonly lostRanges: readonly SeqRange[]
  readonly tornRecords: readonly RecordFinding[]
  readonly corruptRecords: readonly RecordFinding[]
  readonly interruptedRecords: readonly RecordFinding[]
  /** Acknowledged seqs lost while a later record survived: writes reordered across a flush. */
  readonly reordering: { readonly count: number; readonly survivedSeq: number; readonly earliestLostSeq: number } | null
}

export function judgeRun(run: StoredRun): RunReport {
  const meta = run.meta
  const key = runKey(meta.runId)
  const recordSize = meta.recordSizeBytes

  // Last acknowledged seq per slot. Float64Array: seqs exceed 2^32 only after years at full rate, but cost nothing.
  const lastAcked = new Float64Array(meta.slotCount)
  let acked = 0
  for (const [fromSeq, toSeq] of run.spans) {
    acked += toSeq - fromSeq + 1
    for (let seq = fromSeq; seq <= toSeq; seq++) {
      const slot = slotOf(key, meta.pattern, seq, meta.slotCount)
      if (seq > lastAcked[slot]!) lastAcked[slot] = seq
    }
  }
  let judged = 0
  for (let slot = 0; slot < meta.slotCount; slot++) if (lastAcked[slot]! > 0) judged++

  const lost: Array<{ seq: number; reason: string }> = []
  const torn: RecordFinding[] = []
  const corrupt: RecordFinding[] = []
  const interrupted: RecordFinding[] = []
  let intact = 0
  let tornCount = 0
  let corruptCount = 0
  let interruptedCount = 0
  let maxSurvivingSeq = 0

  let fd: number | undefined
  let superblock = { kind: 'missing', detail: 'the data file does not exist' }
  try {
    fd = openSync(meta.path, 'r')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw runtimeError(`could not open ${meta.path}: ${describeSystemError(error)}`)
  }

  if (fd === undefined) {
    for (let slot = 0; slot < meta.slotCount; slot++) {
      if (lastAcked[slot]! > 0) lost.push({ seq: lastAcked[slot]!, reason: 'the data file is missing' })
    }
  } else {
    try {
      const fileSizeBytes = fstatSync(fd).size
      const head = Buffer.alloc(recordSize)
      const headBytes = readSync(fd, head, 0, recordSize, 0)
      const reading = decodeSuperblock(head.subarray(0, headBytes))
      superblock =
        reading.kind === 'valid'
          ? reading.meta.runId === meta.runId
            ? { kind: 'valid', detail: `superblock of run ${meta.runId}` }
            : { kind: 'other-run', detail: `the file holds run ${reading.meta.runId} (created ${new Date(reading.meta.createdMs).toISOString()}), not run ${meta.runId}: the new file did not survive` }
          : { kind: reading.kind, detail: reading.detail }

      const classifier = new Classifier(key, recordSize)
      const chunk = Buffer.alloc(readChunkBytes - (readChunkBytes % recordSize) || recordSize)
      const slotsPerChunk = chunk.length / recordSize
      for (let firstSlot = 0; firstSlot < meta.slotCount; firstSlot += slotsPerChunk) {
        const lastSlot = Math.min(meta.slotCount, firstSlot + slotsPerChunk) - 1
        let any = false
        for (let s = firstSlot; s <= lastSlot && !any; s++) any = lastAcked[s]! > 0
        if (!any) continue
        const chunkOffset = slotOffsetBytes(recordSize, firstSlot)
        const wanted = (lastSlot - firstSlot + 1) * recordSize
        const got = chunkOffset >= fileSizeBytes ? 0 : readFully(fd, chunk, wanted, chunkOffset, meta.path)
        for (let slot = firstSlot; slot <= lastSlot; slot++) {
          const seq = lastAcked[slot]!
          if (seq === 0) continue
          const start = (slot - firstSlot) * recordSize
          const bytes = chunk.subarray(start, Math.max(start, Math.min(got, start + recordSize)))
          const verdict: SlotVerdict = classifier.classify(bytes, slot, seq)
          const finding = (): RecordFinding => ({ seq, slot, offsetBytes: chunkOffset + start, lengthBytes: recordSize, detail: verdict.detail })
          switch (verdict.kind) {
            case 'intact':
              intact++
              maxSurvivingSeq = Math.max(maxSurvivingSeq, verdict.foundSeq ?? seq)
              break
            case 'interrupted':
              interruptedCount++
              maxSurvivingSeq = Math.max(maxSurvivingSeq, seq)
              if (interrupted.length < detailListLimit) interrupted.push(finding())
              break
            case 'lost':
              lost.push({ seq, reason: lossReason(verdict) })
              break
            case 'torn':
              tornCount++
              if (torn.length < detailListLimit) torn.push(finding())
              break
            case 'corrupt':
              corruptCount++
              if (corrupt.length < detailListLimit) corrupt.push(finding())
              break
          }
        }
      }
    } finally {
      closeSync(fd)
    }
  }

  lost.sort((a, b) => a.seq - b.seq)
  const lostRanges = toRanges(lost, run.spans)
  const failedSeqs = [...lost.map((l) => l.seq), ...torn.map((t) => t.seq)]
  const earlierLost = failedSeqs.filter((seq) => seq < maxSurvivingSeq)
  const superblockOk = superblock.kind === 'valid' || acked === 0
  const failed = lost.length + tornCount + corruptCount > 0 || !superblockOk
  return {
    runId: meta.runId,
    groupId: meta.groupId,
    method: meta.method,
    direct: meta.direct,
    recordSize,
    pattern: meta.pattern,
    path: meta.path,
    createdMs: meta.createdMs,
    ended: run.end === undefined ? null : run.end.reason,
    acked,
    superseded: acked - judged,
    intact,
    lost: lost.length,
    torn: tornCount,
    corrupt: corruptCount,
    interrupted: interruptedCount,
    verdict: failed ? 'fail' : 'pass',
    superblock,
    lostRanges,
    tornRecords: torn,
    corruptRecords: corrupt,
    interruptedRecords: interrupted,
    reordering: earlierLost.length === 0 ? null : { count: earlierLost.length, survivedSeq: maxSurvivingSeq, earliestLostSeq: Math.min(...earlierLost) },
  }
}

/** Reads up to `wanted` bytes; short only at end of file. */
function readFully(fd: number, buffer: Buffer, wanted: number, offset: number, path: string): number {
  let done = 0
  try {
    while (done < wanted) {
      const n = readSync(fd, buffer, done, wanted - done, offset + done)
      if (n === 0) break
      done += n
    }
  } catch (error) {
    throw runtimeError(`could not read ${path} at offset ${offset + done}: ${describeSystemError(error)}`)
  }
  return done
}

function lossReason(verdict: SlotVerdict): string {
  // Group older-seq losses under one reason so ranges stay long; the exact older seq is in the detail only.
  return verdict.detail.startsWith('older data') || verdict.detail.startsWith('holds older') ? 'older data: the write vanished' : verdict.detail
}

function toRanges(lost: ReadonlyArray<{ seq: number; reason: string }>, spans: readonly AckSpan[]): SeqRange[] {
  const ranges: SeqRange[] = []
  let i = 0
  while (i < lost.length) {
    let j = i
    while (j + 1 < lost.length && lost[j + 1]!.seq === lost[j]!.seq + 1 && lost[j + 1]!.reason === lost[i]!.reason) j++
    const fromSeq = lost[i]!.seq
    const toSeq = lost[j]!.seq
    ranges.push({ fromSeq, toSeq, count: j - i + 1, reason: lost[i]!.reason, ackedFromMs: ackTimeMs(spans, fromSeq, 2), ackedToMs: ackTimeMs(spans, toSeq, 3) })
    i = j + 1
  }
  return ranges
}

/** The first (index 2) or last (index 3) receive time of the span holding seq. */
function ackTimeMs(spans: readonly AckSpan[], seq: number, index: 2 | 3): number {
  let lo = 0
  let hi = spans.length - 1
  while (lo <= hi) {
    const mid = (lo + hi) >> 1
    const span = spans[mid]!
    if (seq < span[0]) hi = mid - 1
    else if (seq > span[1]) lo = mid + 1
    else return span[index]
  }
  return Number.NaN
}

