/**
 * The seqs a judge found failed (lost, torn or corrupt), kept packed in Float64Arrays rather than one
 * by one, since a hostile listener or a dead disk can make them many; merged into seq ranges for the
 * report, and counted below the highest surviving seq for reordering.
 */
import type { RunReport, SeqRange } from './run-report.js'
import { maxDetailList } from './run-report.js'

export const tornCode = 254
export const corruptCode = 255
const maxReasonCodes = 250

/** Failed seqs fromSeq..toSeq, all with one reason code (a loss reason, torn or corrupt). */
interface FailedRun {
  readonly fromSeq: number
  readonly toSeq: number
  readonly code: number
}

/**
 * Failed seqs as runs: (first seq * 256 + code, length) in two growing Float64Arrays, 16 bytes per run.
 * Append judges slots in order, so its failed seqs come in at most two ascending stretches (the latest
 * lap of the file, then the lap before it) and a loss of any size that is contiguous in seq is one
 * run: memory follows the number of lost ranges, not lost records. Overwrite's seqs come in slot
 * order, which is random in seq: one run per seq, sorted natively (slotCount bounds their number).
 */
export class FailedSeqs {
  private starts = new Float64Array(1024)
  private lengths = new Float64Array(1024)
  length = 0
  private readonly reasons: string[] = []
  private readonly reasonCodes = new Map<string, number>()

  constructor(private readonly coalesce: boolean) {}

  reasonCode(reason: string): number {
    let code = this.reasonCodes.get(reason)
    if (code === undefined) {
      if (this.reasons.length >= maxReasonCodes) return this.reasonCode('lost')
      code = this.reasons.length
      this.reasons.push(reason)
      this.reasonCodes.set(reason, code)
    }
    return code
  }

  reason(code: number): string {
    return this.reasons[code]!
  }

  push(seq: number, code: number): void {
    this.pushRange(seq, seq, code)
  }

  /** Seqs fromSeq..toSeq (inclusive), all failed with one code: one entry, however many seqs. */
  pushRange(fromSeq: number, toSeq: number, code: number): void {
    const last = this.length - 1
    if (
      this.coalesce &&
      last >= 0 &&
      this.starts[last]! % 256 === code &&
      (this.starts[last]! - code) / 256 + this.lengths[last]! === fromSeq
    ) {
      this.lengths[last]! += toSeq - fromSeq + 1
      return
    }
    if (this.length === this.starts.length) {
      this.starts = grown(this.starts)
      this.lengths = grown(this.lengths)
    }
    this.starts[this.length] = fromSeq * 256 + code
    this.lengths[this.length++] = toSeq - fromSeq + 1
  }

  /** The runs in ascending seq order. */
  *ascending(): Generator<FailedRun> {
    const starts = this.starts.subarray(0, this.length)
    const descents: number[] = []
    for (let i = 1; i < starts.length && descents.length < 2; i++) if (starts[i - 1]! > starts[i]!) descents.push(i)
    let order: Iterable<number>
    if (descents.length === 0) order = indices(0, starts.length)
    else if (descents.length === 1 && starts.at(-1)! < starts[0]!)
      order = [...indices(descents[0]!, starts.length), ...indices(0, descents[0]!)] // two ascending stretches
    else if (this.lengths.subarray(0, this.length).every((n) => n === 1)) order = indices(0, starts.sort().length)
    else order = Array.from(indices(0, starts.length)).sort((a, b) => starts[a]! - starts[b]!)
    for (const i of order) {
      const code = starts[i]! % 256
      const fromSeq = (starts[i]! - code) / 256
      yield { fromSeq, toSeq: fromSeq + this.lengths[i]! - 1, code }
    }
  }
}

function grown(values: Float64Array<ArrayBuffer>): Float64Array<ArrayBuffer> {
  const larger = new Float64Array(values.length * 2)
  larger.set(values)
  return larger
}

function* indices(from: number, to: number): Generator<number> {
  for (let i = from; i < to; i++) yield i
}

/** Seqs fromSeq..toSeq (inclusive) all lost for one reason: slots past the end of an append file, or no file. */
export interface BulkLoss {
  readonly fromSeq: number
  readonly toSeq: number
  readonly code: number
}

/**
 * Append: the seqs judged at slots [first, limit) as at most two ranges. The judged seqs are the last
 * `limit` ones, throughSeq - limit + 1 .. throughSeq; seq q sits at slot (q - 1) % slotCount.
 */
export function addAppendBulk(bulk: BulkLoss[], slotCount: number, throughSeq: number, first: number, limit: number, code: number): number {
  if (first >= limit) return 0
  const lowest = throughSeq - limit + 1
  // Walk the judged seqs' slots in seq order: they start at slot (lowest - 1) % slotCount and wrap once at most.
  const startSlot = (lowest - 1) % slotCount
  const pieces: Array<[number, number]> = []
  // Slots startSlot..limit-1 hold seqs lowest.., then slots 0..startSlot-1 hold the rest.
  const firstRun: [number, number] = [startSlot, limit - 1]
  const secondRun: [number, number] = [0, startSlot - 1]
  let seqAt = lowest
  for (const [a, b] of [firstRun, secondRun]) {
    if (b < a) continue
    const from = Math.max(a, first)
    if (from <= b) pieces.push([seqAt + (from - a), seqAt + (b - a)])
    seqAt += b - a + 1
  }
  let count = 0
  for (const [fromSeq, toSeq] of pieces) {
    bulk.push({ fromSeq, toSeq, code })
    count += toSeq - fromSeq + 1
  }
  return count
}

/**
 * Lost seqs (packed entries with a reason code, and bulk ranges) merged in seq order into ranges; the
 * first maxDetailList kept, their acknowledgement windows not yet known (withAckTimes).
 */
export function toRanges(failed: FailedSeqs, bulk: readonly BulkLoss[]): { count: number; ranges: SeqRange[] } {
  const ranges: SeqRange[] = []
  let count = 0
  let open: { fromSeq: number; toSeq: number; code: number } | null = null
  const flush = (): void => {
    if (open === null) return
    count++
    if (ranges.length < maxDetailList) {
      ranges.push({
        fromSeq: open.fromSeq,
        toSeq: open.toSeq,
        count: open.toSeq - open.fromSeq + 1,
        reason: failed.reason(open.code),
        ackedFromMs: Number.NaN,
        ackedToMs: Number.NaN,
      })
    }
    open = null
  }
  const add = (fromSeq: number, toSeq: number, code: number): void => {
    if (open !== null && open.code === code && fromSeq === open.toSeq + 1) {
      open.toSeq = toSeq
      return
    }
    flush()
    open = { fromSeq, toSeq, code }
  }
  const bulkSorted = [...bulk].sort((a, b) => a.fromSeq - b.fromSeq)
  let b = 0
  for (const { fromSeq, toSeq, code } of failed.ascending()) {
    if (code === tornCode || code === corruptCode) continue
    while (b < bulkSorted.length && bulkSorted[b]!.fromSeq < fromSeq) {
      add(bulkSorted[b]!.fromSeq, bulkSorted[b]!.toSeq, bulkSorted[b]!.code)
      b++
    }
    add(fromSeq, toSeq, code)
  }
  for (; b < bulkSorted.length; b++) add(bulkSorted[b]!.fromSeq, bulkSorted[b]!.toSeq, bulkSorted[b]!.code)
  flush()
  return { count, ranges }
}

/** Every failed seq (lost, torn or corrupt) below the highest surviving one, counted exactly. */
export function reorderingOf(failed: FailedSeqs, bulk: readonly BulkLoss[], survivedSeq: number): RunReport['reordering'] {
  if (survivedSeq === 0) return null
  let count = 0
  let earliest = Number.POSITIVE_INFINITY
  for (const range of failed.ascending()) {
    if (range.fromSeq >= survivedSeq) break
    count += Math.min(range.toSeq, survivedSeq - 1) - range.fromSeq + 1
    earliest = Math.min(earliest, range.fromSeq)
  }
  for (const range of bulk) {
    if (range.fromSeq >= survivedSeq) continue
    count += Math.min(range.toSeq, survivedSeq - 1) - range.fromSeq + 1
    earliest = Math.min(earliest, range.fromSeq)
  }
  return count === 0 ? null : { count, survivedSeq, earliestLostSeq: earliest }
}
