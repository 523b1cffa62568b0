/**
 * Flow control: the write loop stops and waits when a run's acks run too far ahead of the listener's
 * "recorded" reports, and gives up only when the listener records nothing at all for the timeout.
 */
import { performance } from 'node:perf_hooks'
import { runtimeError } from '../../base/errors.js'
import type { AckChannel } from './ack-channel.js'
import type { ActiveRun } from './active-run.js'
import { yieldToEventLoop, type StopSignal } from './stop-signals.js'
import { statusIntervalMs } from './write-status.js'

/**
 * Flow control: how far a run's acks may run ahead of the listener's "recorded" reports before the
 * writer stops and waits. A healthy listener records a group commit every few milliseconds and
 * trails by a few thousand seqs at most, so the bound binds only when the listener is truly behind
 * (busy with other writers, a slow disk). 100,000 seqs is 2.5 s of the fastest writer measured
 * (tmpfs, ~40k records/s) and 5 s of a real disk (~20k/s): it caps the acks a cut can catch
 * between the writer and the listener's disk to a few seconds' worth and what the listener must
 * buffer to ~4 MB per run, without slowing a writer whose listener keeps up.
 */
export const maxUnrecordedAcks = 100_000
/** Once blocked, resume when the listener has caught up to half the bound (no flapping). */
const unrecordedAcksResume = maxUnrecordedAcks / 2

/** The listener has reported acks of every run as recorded. */
export function everyRunRecorded(runs: readonly ActiveRun[], channel: AckChannel): boolean {
  return runs.every((r) => (channel.recordedThrough.get(r.meta.runId) ?? 0) > 0)
}

export function unrecordedMax(runs: readonly ActiveRun[], channel: AckChannel): number {
  let max = 0
  for (const run of runs) max = Math.max(max, run.lastSeq - (channel.recordedThrough.get(run.meta.runId) ?? 0))
  return max
}

/**
 * Flow control: the listener trails by more than maxUnrecordedAcks. Wait for its "recorded"
 * reports instead of writing on (or failing); give up only when it records nothing at all for
 * timeoutMs. Returns false when a signal arrived meanwhile; throws when the listener stalls.
 */
export async function waitForListener(
  runs: readonly ActiveRun[],
  channel: AckChannel,
  timeoutMs: number,
  signal: () => StopSignal | undefined,
  status: (nowMs: number, unrecorded: number) => void,
): Promise<boolean> {
  let behind = unrecordedMax(runs, channel)
  let progressMs = performance.now()
  let statusMs = 0
  while (behind > unrecordedAcksResume) {
    const nowMs = performance.now()
    if (nowMs - progressMs > timeoutMs) {
      throw runtimeError(
        `the listener at ${channel.endpointText} recorded no acks for ${timeoutMs / 1000} s while ${behind.toLocaleString('en-US')} waited`,
        'the listener or its disk is overloaded; raise --listener-timeout to wait longer',
      )
    }
    if (nowMs - statusMs >= statusIntervalMs) {
      statusMs = nowMs
      status(nowMs, behind)
    }
    channel.receiveFor(100)
    await yieldToEventLoop()
    if (signal() !== undefined) return false
    const now = unrecordedMax(runs, channel)
    if (now < behind) progressMs = performance.now()
    behind = now
  }
  return true
}
