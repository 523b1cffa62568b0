/**
 * A run's acknowledged seqs in the listener's memory: spans of consecutive seqs, each with the window
 * in which the listener received them. Acks arrive in order from seq 1 (the listener refuses anything
 * else, and replay checks it), so a span starts where the one before it ended and only its last seq
 * and its two times are kept: three columns of doubles, 24 bytes a span, where an array per span
 * costs ~110 with its share of the list. A week of acks (maxStoredSpans) is ~145 MB, not ~650.
 *
 * Consecutive seqs received within spanWindowMs of a span's first ack share it. Past maxSpans,
 * neighbouring spans are merged pairwise: the seqs stay exact, a merged window covers both halves
 * (coarser, never wrong), so memory stays bounded however long a run lasts.
 */
import { assert } from '../base/assert.js'
import type { AckSpan } from '../protocol/messages.js'
import { encodeSpanPage } from '../protocol/span-page.js'

export const spanWindowMs = 100
const initialCapacity = 16
/** The columns of a table holding no span yet, shared (never written: the first add grows them): a run announced costs no arrays. */
const noColumn = new Float64Array(0)

export class SpanTable {
  private toSeqs: Float64Array<ArrayBuffer> = noColumn
  private firstMss: Float64Array<ArrayBuffer> = noColumn
  private lastMss: Float64Array<ArrayBuffer> = noColumn
  private count = 0

  get length(): number {
    return this.count
  }

  /** The last seq held (0 when none). */
  get throughSeq(): number {
    return this.count === 0 ? 0 : this.toSeqs[this.count - 1]!
  }

  /** When the latest ack was received (undefined when none). */
  get lastAckMs(): number | undefined {
    return this.count === 0 ? undefined : this.lastMss[this.count - 1]
  }

  /** Seqs fromSeq..toSeq, the next ones, received between firstMs and lastMs; beyond maxSpans spans, neighbours merge. */
  add(fromSeq: number, toSeq: number, firstMs: number, lastMs: number, maxSpans: number): void {
    assert(fromSeq === this.throughSeq + 1, () => `span ${fromSeq}-${toSeq} does not follow seq ${this.throughSeq}`)
    const last = this.count - 1
    if (last >= 0 && lastMs - this.firstMss[last]! <= spanWindowMs) {
      this.toSeqs[last] = toSeq
      this.lastMss[last] = Math.max(this.lastMss[last]!, lastMs)
      return
    }
    if (this.count === this.toSeqs.length) this.grow(maxSpans + 1)
    this.toSeqs[this.count] = toSeq
    this.firstMss[this.count] = firstMs
    this.lastMss[this.count] = lastMs
    this.count++
    if (this.count > maxSpans) this.coarsen()
  }

  /** Forgets every seq after throughSeq (a span cut there keeps its window). */
  truncate(throughSeq: number): void {
    while (this.count > 0 && (this.count === 1 ? 1 : this.toSeqs[this.count - 2]! + 1) > throughSeq) this.count--
    if (this.count > 0 && this.toSeqs[this.count - 1]! > throughSeq) this.toSeqs[this.count - 1] = throughSeq
  }

  /** Span i as [fromSeq, toSeq, firstAckMs, lastAckMs]. */
  at(i: number): AckSpan {
    return [i === 0 ? 1 : this.toSeqs[i - 1]! + 1, this.toSeqs[i]!, this.firstMss[i]!, this.lastMss[i]!]
  }

  /** Every span, as a runs reply carries them. */
  toArray(): AckSpan[] {
    return Array.from({ length: this.count }, (_, i) => this.at(i))
  }

  /**
   * The spans holding seqs afterSeq+1..throughSeq, at most maxCount of them, as a span-page: the first
   * starts at afterSeq + 1 and the last ends at throughSeq at most (a span cut there keeps its window:
   * the acks of its seqs came within it). Empty when afterSeq is at or past the last seq held.
   */
  page(afterSeq: number, throughSeq: number, maxCount: number): Buffer {
    const first = this.indexOfSeq(afterSeq + 1)
    let end = first
    while (end < this.count && end - first < maxCount) {
      end++
      if (this.toSeqs[end - 1]! >= throughSeq) break
    }
    return encodeSpanPage(end - first, (i) => {
      const [fromSeq, toSeq, firstMs, lastMs] = this.at(first + i)
      return [Math.max(fromSeq, afterSeq + 1), Math.min(toSeq, throughSeq), firstMs, lastMs]
    })
  }

  /** The index of the span holding seq (count when seq is past the last one). */
  private indexOfSeq(seq: number): number {
    let lo = 0
    let hi = this.count
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (this.toSeqs[mid]! < seq) lo = mid + 1
      else hi = mid
    }
    return lo
  }

  /** Doubles the columns, up to limit spans. */
  private grow(limit: number): void {
    const capacity = Math.min(limit, Math.max(initialCapacity, this.toSeqs.length * 2))
    const larger = (column: Float64Array<ArrayBuffer>): Float64Array<ArrayBuffer> => {
      const next = new Float64Array(capacity)
      next.set(column.subarray(0, this.count))
      return next
    }
    this.toSeqs = larger(this.toSeqs)
    this.firstMss = larger(this.firstMss)
    this.lastMss = larger(this.lastMss)
  }

  /** Halves the spans by merging neighbours pairwise; amortised O(1) per span added. */
  private coarsen(): void {
    let out = 0
    for (let i = 0; i < this.count; i += 2) {
      const b = i + 1 < this.count ? i + 1 : i
      this.toSeqs[out] = this.toSeqs[b]!
      this.firstMss[out] = Math.min(this.firstMss[i]!, this.firstMss[b]!)
      this.lastMss[out] = Math.max(this.lastMss[i]!, this.lastMss[b]!)
      out++
    }
    this.count = out
  }
}

/**
 * What a run keeps of its spans once they left memory (its full table is read back from its log for
 * a query): enough to answer length, throughSeq and lastAckMs, and to go on taking spans exactly as
 * its SpanTable would, in 64 bytes whatever the run's length. add() reads the last span only; coarsen
 * leaves the last span alone (an odd count) or merged with the one before it (an even count, which
 * happens only when maxSpans is odd). Between two coarsenings the count grows from
 * ceil((maxSpans + 1) / 2) to maxSpans + 1, that is by (maxSpans + 1) / 2 >= 2 spans when maxSpans is
 * odd: both spans merged then were appended since the last coarsening, and are known exactly. So
 * the count and the last two spans suffice, for any maxSpans >= 2 (test/unit/store/span-summary.test.ts
 * holds it against a SpanTable).
 */
export class SpanSummary {
  private count = 0
  private lastToSeq = 0
  private lastFirstMs = Number.NaN
  private lastLastMs = Number.NaN
  /** The span before the last (NaN when unknown: only right after a coarsening, never needed then). */
  private beforeFirstMs = Number.NaN
  private beforeLastMs = Number.NaN

  /** The summary of a table's spans as they are now. */
  static of(table: SpanTable): SpanSummary {
    const summary = new SpanSummary()
    summary.count = table.length
    if (table.length === 0) return summary
    const [, toSeq, firstMs, lastMs] = table.at(table.length - 1)
    summary.lastToSeq = toSeq
    summary.lastFirstMs = firstMs
    summary.lastLastMs = lastMs
    if (table.length > 1) {
      const [, , beforeFirstMs, beforeLastMs] = table.at(table.length - 2)
      summary.beforeFirstMs = beforeFirstMs
      summary.beforeLastMs = beforeLastMs
    }
    return summary
  }

  get length(): number {
    return this.count
  }

  get throughSeq(): number {
    return this.lastToSeq
  }

  get lastAckMs(): number | undefined {
    return this.count === 0 ? undefined : this.lastLastMs
  }

  /** SpanTable.add, on the summary. */
  add(fromSeq: number, toSeq: number, firstMs: number, lastMs: number, maxSpans: number): void {
    assert(fromSeq === this.lastToSeq + 1, () => `span ${fromSeq}-${toSeq} does not follow seq ${this.lastToSeq}`)
    if (this.count > 0 && lastMs - this.lastFirstMs <= spanWindowMs) {
      this.lastToSeq = toSeq
      this.lastLastMs = Math.max(this.lastLastMs, lastMs)
      return
    }
    this.beforeFirstMs = this.lastFirstMs
    this.beforeLastMs = this.lastLastMs
    this.lastToSeq = toSeq
    this.lastFirstMs = firstMs
    this.lastLastMs = lastMs
    this.count++
    if (this.count > maxSpans) this.coarsen()
  }

  /** SpanTable.coarsen, on the last span: merged with the one before it when the count is even. */
  private coarsen(): void {
    if (this.count % 2 === 0) {
      assert(!Number.isNaN(this.beforeFirstMs), 'SpanSummary: the span before the last is not known at a coarsening (maxSpans < 2?)')
      this.lastFirstMs = Math.min(this.beforeFirstMs, this.lastFirstMs)
      this.lastLastMs = Math.max(this.beforeLastMs, this.lastLastMs)
    }
    this.count = Math.ceil(this.count / 2)
    this.beforeFirstMs = Number.NaN
    this.beforeLastMs = Number.NaN
  }
}
