/**
 * A run's acknowledged seqs as judging needs them: how far they go (seqs 1..throughSeq, contiguous:
 * the listener takes acks only in order), and, for the few seqs that start and end a lost range,
 * when the listener received their acks (the window of the span holding each).
 *
 * A short run's spans come with the listener's answer and are looked up in memory. A long run's (a
 * week is six million spans per method) are not held at all: the answer says only how far they go,
 * and the windows are read in one pass over the listener's span pages, after the file was judged and
 * only if a lost range needs them, from the first seq asked for to the last. (The seqs a file can
 * show lost are its last slotCount or so, so that is usually one page.) Memory is one page, whatever
 * the run's length. Every span read is checked (span-page.ts): a listener that sends spans that do
 * not follow each other, or are not real, is an error (exit 3), never a judgement.
 */
import { maxSpansPerPage, maxStoredSpans, spanPageEntryBytes, type AckSpan, type StoredRun } from '../../protocol/messages.js'
import { readSpanPage } from '../../protocol/span-page.js'
import { runtimeError } from '../../base/errors.js'

/** When the listener received the acks of a seq: [firstAckMs, lastAckMs] of its span (NaN when unknown). */
export type AckWindow = readonly [number, number]

export interface AckTimeline {
  /** The last acknowledged seq (0: none). */
  readonly throughSeq: number
  /** The windows of the given seqs (ascending, each 1..throughSeq), in the same order. */
  windows(seqs: readonly number[]): Promise<AckWindow[]>
}

/**
 * Reads a run's span pages from the one after seq startAfterSeq: onPage gets each page (the spans
 * after afterSeq) and says how far it has read, or null to stop.
 */
export type SpanPageReader = (startAfterSeq: number, onPage: (page: Uint8Array, afterSeq: number) => number | null) => Promise<void>

/** The last acknowledged seq of a run as the listener answered: where its spans end, or ackedThroughSeq when they were left out. */
export function ackedThroughSeqOf(run: StoredRun): number {
  return run.spans.at(-1)?.[1] ?? run.ackedThroughSeq ?? 0
}

/** True when the answer left the run's spans out: they are read page by page. */
export function spansLeftOut(run: StoredRun): boolean {
  return run.spans.length === 0 && (run.ackedThroughSeq ?? 0) > 0
}

/** The spans given with the answer; they must be contiguous from seq 1 (checked here, before anything is judged). */
export function timelineOfSpans(runId: string, spans: readonly AckSpan[]): AckTimeline {
  let throughSeq = 0
  for (const [fromSeq, toSeq] of spans) {
    if (fromSeq !== throughSeq + 1 || toSeq < fromSeq) {
      throw runtimeError(
        `the listener sent acks of run ${runId} that are not contiguous from seq 1 (a span ${fromSeq}-${toSeq} after seq ${throughSeq})`,
      )
    }
    throughSeq = toSeq
  }
  return {
    throughSeq,
    windows: async (seqs) => seqs.map((seq) => windowOf(spans, seq)),
  }
}

/**
 * A run whose spans were left out: windows are read from its pages, in one pass, stopping at the last
 * seq asked for. The pages are bounded as a listener makes them: full (maxSpansPerPage) but the one
 * that reaches the last seq, maxStoredSpans in all; so a listener that drips one seq a page cannot
 * keep verify reading for ever.
 */
export function pagedTimeline(run: StoredRun, read: SpanPageReader): AckTimeline {
  const throughSeq = ackedThroughSeqOf(run)
  return {
    throughSeq,
    windows: async (seqs) => {
      const found: AckWindow[] = []
      if (seqs.length === 0) return found
      let spansRead = 0
      await read(seqs[0]! - 1, (page, afterSeq) => {
        const result = readSpanPage(page, afterSeq, throughSeq, run.announcedMs, (_fromSeq, toSeq, firstMs, lastMs) => {
          while (found.length < seqs.length && seqs[found.length]! <= toSeq) found.push([firstMs, lastMs])
        })
        if ('problem' in result) throw new Error(result.problem)
        const spans = page.length / spanPageEntryBytes
        spansRead += spans
        if (spans < maxSpansPerPage && result.through < throughSeq)
          throw new Error(`a page of ${spans} spans stops at seq ${result.through}, before seq ${throughSeq}, the last acknowledged`)
        if (spansRead > maxStoredSpans) throw new Error(`more than ${maxStoredSpans} spans, more than a run keeps`)
        return found.length === seqs.length ? null : result.through
      })
      if (found.length < seqs.length)
        throw runtimeError(`the listener's spans of run ${run.meta.runId} end before seq ${seqs[found.length]}, which it acknowledged`)
      return found
    },
  }
}

function windowOf(spans: readonly AckSpan[], seq: number): AckWindow {
  let lo = 0
  let hi = spans.length - 1
  while (lo <= hi) {
    const mid = (lo + hi) >> 1
    const span = spans[mid]!
    if (seq < span[0]) hi = mid - 1
    else if (seq > span[1]) lo = mid + 1
    else return [span[2], span[3]]
  }
  return [Number.NaN, Number.NaN]
}
