/**
 * The status line of a write while stderr is a terminal: its progress, redrawn in place, and the
 * 'steady' line once, the moment to cut the power.
 */
import { eraseToEndOfLine } from '../../base/status-line.js'
import type { Io } from '../../base/io.js'
import type { AckChannel } from './ack-channel.js'
import type { ActiveRun } from './active-run.js'
import type { WriteProgress } from './write-options.js'

export const statusIntervalMs = 250

/** The loop's progress over its runs: what the status line shows (or a parent sums, write --jobs). */
export function progressOf(
  runs: ActiveRun[],
  channel: AckChannel,
  elapsedS: number,
  waitingUnrecorded: number | undefined,
  steady: boolean,
): WriteProgress {
  return {
    elapsedS,
    written: runs.reduce((n, r) => n + r.lastSeq, 0),
    recorded: runs.reduce((n, r) => n + (channel.recordedThrough.get(r.meta.runId) ?? 0), 0),
    syncP50Us: Math.max(...runs.map((r) => r.latency.quantileUs(0.5))),
    syncP99Us: Math.max(...runs.map((r) => r.latency.quantileUs(0.99))),
    waitingUnrecorded,
    steady,
  }
}

/** A single write's status line, redrawn in place, and the 'steady' line once, on err. */
export function drawProgress(io: Io): (progress: WriteProgress) => void {
  let toldToCut = false
  return (p) => {
    io.err(`\r${statusLine(p)}${eraseToEndOfLine}`)
    if (p.steady && !toldToCut) {
      toldToCut = true
      io.err(`\nsteady: the listener is recording acks. Now is the moment to cut the power (pull the plug, not a clean shutdown).\n`)
    }
  }
}

function statusLine(p: WriteProgress): string {
  if (p.waitingUnrecorded !== undefined) {
    return `${p.elapsedS.toFixed(0)} s: waiting for the listener: ${p.waitingUnrecorded.toLocaleString('en-US')} acks unrecorded`
  }
  return `${p.elapsedS.toFixed(0)} s: ${p.written.toLocaleString('en-US')} records written and acked, ${p.recorded.toLocaleString('en-US')} recorded by the listener, ${Math.round(p.written / p.elapsedS).toLocaleString('en-US')}/s, sync p50 ${formatUs(p.syncP50Us)} p99 ${formatUs(p.syncP99Us)}`
}

/** A latency for people: microseconds below 1 ms, then milliseconds. */
export function formatUs(us: number): string {
  if (!Number.isFinite(us)) return '-'
  return us >= 1000 ? `${(us / 1000).toFixed(us >= 10_000 ? 0 : 1)} ms` : `${Math.round(us)} us`
}
