/**
 * A page of a run's ack spans on the wire (protocol 4's span-page): a long run's spans are read page
 * by page, never in one reply. A page is the spans holding seqs afterSeq+1.. in order, each as three
 * little-endian doubles (toSeq, firstAckMs, lastAckMs): 24 bytes a span, and no array per span to
 * decode. A span starts where the one before it ended (seqs are contiguous from 1: the listener takes
 * acks only in order), so its fromSeq is implied: afterSeq + 1 for the first span of a page.
 *
 * Every span of a page is checked as the schema checks spans in a runs reply (spanProblem): the next
 * seq, a real time window that does not start before the run was announced, and no more seqs than a
 * writer can have written by then. A page that fails is the listener's fault, never a judgement.
 */
import { epochMsSchema, maxPlausibleSeq, spanPageEntryBytes } from './messages.js'

export { maxSpansPerPage, spanPageEntryBytes } from './messages.js'
/** A span's receive times are real clock readings (epochMsSchema's bounds). */
const epochMsMin = epochMsSchema.minValue!
const maxEpochMs = epochMsSchema.maxValue!
/** Acks stamped up to this long before their run's announcement are a stepped clock, not damage (as in a runs reply). */
const spanClockSkewMs = 60_000

/** [fromSeq, toSeq, firstAckMs, lastAckMs], as the listener keeps them. */
export type SpanTuple = readonly [number, number, number, number]

/**
 * What is wrong with a span that should start at seq expectedFrom of a run announced at announcedMs,
 * or undefined when it is a span a listener can have recorded.
 */
export function spanProblem(span: SpanTuple, expectedFrom: number, announcedMs: number): string | undefined {
  const [fromSeq, toSeq, firstMs, lastMs] = span
  if (fromSeq !== expectedFrom) return `span starts at seq ${fromSeq}, expected ${expectedFrom}`
  if (!Number.isSafeInteger(toSeq) || toSeq < fromSeq) return `span ${fromSeq}-${toSeq} runs backwards or is not a seq`
  if (!Number.isInteger(firstMs) || !Number.isInteger(lastMs) || firstMs < epochMsMin || lastMs > maxEpochMs || lastMs < firstMs) {
    return `span ${fromSeq}-${toSeq} was acknowledged at no real time (${firstMs} to ${lastMs})`
  }
  if (firstMs < announcedMs - spanClockSkewMs) return 'span acknowledged before its run was announced'
  if (toSeq > maxPlausibleSeq(announcedMs, lastMs)) return `seq ${toSeq} is more than a writer can have written by then`
  return undefined
}

/** The spans as a page: toSeq, firstAckMs, lastAckMs of each, in order. */
export function encodeSpanPage(count: number, spanAt: (i: number) => SpanTuple): Buffer {
  const page = Buffer.allocUnsafe(count * spanPageEntryBytes)
  for (let i = 0; i < count; i++) {
    const [, toSeq, firstMs, lastMs] = spanAt(i)
    page.writeDoubleLE(toSeq, i * spanPageEntryBytes)
    page.writeDoubleLE(firstMs, i * spanPageEntryBytes + 8)
    page.writeDoubleLE(lastMs, i * spanPageEntryBytes + 16)
  }
  return page
}

/**
 * Visits the spans of a page that follows seq afterSeq, each checked (spanProblem) and none past
 * throughSeq; returns the last seq the page covers, or a problem. An empty page makes no progress,
 * which is a problem too: the reader asked for seqs that the listener said it holds.
 */
export function readSpanPage(
  page: Uint8Array,
  afterSeq: number,
  throughSeq: number,
  announcedMs: number,
  visit: (fromSeq: number, toSeq: number, firstMs: number, lastMs: number) => void,
): { through: number } | { problem: string } {
  if (page.length % spanPageEntryBytes !== 0) return { problem: `a page of ${page.length} bytes, not whole spans` }
  const count = page.length / spanPageEntryBytes
  if (count === 0) return { problem: `no spans after seq ${afterSeq}, although the acks go to seq ${throughSeq}` }
  const view = new DataView(page.buffer, page.byteOffset, page.byteLength)
  let through = afterSeq
  for (let i = 0; i < count; i++) {
    const at = i * spanPageEntryBytes
    const span: SpanTuple = [through + 1, view.getFloat64(at, true), view.getFloat64(at + 8, true), view.getFloat64(at + 16, true)]
    const problem =
      spanProblem(span, through + 1, announcedMs) ??
      (span[1] > throughSeq ? `span ${span[0]}-${span[1]} goes past seq ${throughSeq}, the last acknowledged` : undefined)
    if (problem !== undefined) return { problem }
    visit(span[0], span[1], span[2], span[3])
    through = span[1]
  }
  return { through }
}
