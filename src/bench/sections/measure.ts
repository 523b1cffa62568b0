/**
 * The timed loop. Like pg_test_fsync: run ops back to back for the test's duration, then
 * ops/sec = ops / elapsed and usecs/op = elapsed / ops. Unlike it, every op is timed on its own,
 * for the latency percentiles.
 *
 * The loop is synchronous (an async hop costs as much as half a real flush), so it runs in slices
 * of at most sliceMs and yields to the event loop between them: signal handlers run there, and the
 * loop stops if one asked it to. The pauses are not counted in the elapsed time.
 */
import { setImmediate as yieldToEventLoop } from 'node:timers/promises'
import { LatencyHistogram } from '../../base/latency.js'

/** Longest stretch without yielding to the event loop (and so without noticing a signal). */
export const sliceMs = 100

export interface Measurement {
  readonly opCount: number
  readonly elapsedS: number
  readonly opsPerSec: number
  readonly usecsPerOp: number
  readonly latencyUsP50: number
  readonly latencyUsP99: number
  readonly latencyUsMax: number
}

/**
 * Runs op(0), op(1), ... for durationS seconds of measured time. Between slices, stopRequested is
 * polled; when it returns a reason, that value is thrown.
 */
export async function measure(op: (opIndex: number) => void, durationS: number, stopRequested: () => Error | null): Promise<Measurement> {
  const histogram = new LatencyHistogram()
  const budgetMs = durationS * 1000
  let opCount = 0
  let elapsedMs = 0
  for (;;) {
    const sliceStart = performance.now()
    const sliceEnd = sliceStart + Math.min(sliceMs, budgetMs - elapsedMs)
    let before = sliceStart
    let now = sliceStart
    do {
      op(opCount)
      now = performance.now()
      histogram.record((now - before) * 1000)
      before = now
      opCount++
    } while (now < sliceEnd)
    elapsedMs += now - sliceStart
    if (elapsedMs >= budgetMs) break
    await yieldToEventLoop()
    const stop = stopRequested()
    if (stop !== null) throw stop
  }
  const elapsedS = elapsedMs / 1000
  return {
    opCount,
    elapsedS,
    opsPerSec: opCount / elapsedS,
    usecsPerOp: (elapsedMs * 1000) / opCount,
    latencyUsP50: histogram.quantileUs(0.5),
    latencyUsP99: histogram.quantileUs(0.99),
    latencyUsMax: histogram.maxUs,
  }
}
