/**
 * A write's progress shown as it goes, from the loop's progress as data (progressOf; write --jobs
 * sums its jobs' into one), in the write's output (write-events.ts): on a terminal the status line,
 * redrawn in place and cut to the terminal's width, and the 'steady' line once, the moment to cut the
 * power; without one, plain lines on stderr (steady once, progress every few seconds); with --json,
 * the same events as JSON lines on stdout (and the status line too when stderr is a terminal).
 */
import { eraseToEndOfLine, fitToColumns } from '../../base/status-line.js'
import type { Io } from '../../base/io.js'
import type { AckChannel } from './ack-channel.js'
import type { ActiveRun } from './active-run.js'
import type { WriteProgress } from './write-options.js'
import { progressEvent, progressEventIntervalMs, steadyEvent, type WriteOutput } from './write-events.js'

/** How often the loop reports its progress (the terminal's line is redrawn this often). */
export const statusIntervalMs = 250

const cutNow = 'Now is the moment to cut the power (pull the plug, not a clean shutdown).'
const cutNowPlain = 'cut the power now (pull the plug, not a clean shutdown)'

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

/** What is shown of a write --jobs N: the jobs' progress summed, with N and how many of them wait for the listener. */
export interface ShownProgress extends WriteProgress {
  readonly jobs?: { readonly count: number; readonly waiting: number }
}

/** Shows progress, reported every statusIntervalMs; shown: a status line is on the terminal now (a message must start a new line). */
export interface ProgressView {
  readonly report: (progress: ShownProgress) => void
  readonly shown: () => boolean
}

/** The view for the write's output; columns: the terminal's width now (read at each draw: a terminal can be resized). */
export function progressView(io: Io, output: WriteOutput, columns: () => number | undefined = () => process.stderr.columns): ProgressView {
  const terminal = output === 'terminal' || (output === 'json' && io.statusTty) ? terminalView(io, columns) : undefined
  const events = output === 'terminal' ? undefined : eventView(io, output)
  return {
    report: (p) => {
      terminal?.report(p)
      events?.(p)
    },
    shown: () => terminal?.shown() ?? false,
  }
}

/** The status line redrawn in place, never wider than the terminal, and the 'steady' line once. */
function terminalView(io: Io, columns: () => number | undefined): ProgressView {
  let toldToCut = false
  let shown = false
  return {
    report: (p) => {
      io.err(`\r${fitToColumns(statusLine(p), columns())}${eraseToEndOfLine}`)
      shown = true
      if (p.steady && !toldToCut) {
        toldToCut = true
        const who = p.jobs === undefined ? 'the listener is recording acks' : `all ${p.jobs.count} jobs are recording acks at the listener`
        io.err(`\nsteady: ${who}. ${cutNow}\n`)
      }
    },
    shown: () => shown,
  }
}

/** lines: plain lines on stderr; json: JSON lines on stdout. Steady once, as soon as it is; progress every progressEventIntervalMs. */
function eventView(io: Io, output: 'lines' | 'json'): (p: ShownProgress) => void {
  let toldSteady = false
  let nextS = progressEventIntervalMs / 1000
  return (p) => {
    const jobs = p.jobs?.count ?? null
    if (p.steady && !toldSteady) {
      toldSteady = true
      if (output === 'json') io.out(steadyEvent(p, jobs))
      else {
        const whose = jobs === null ? 'records are' : `the records of all ${jobs} jobs are`
        io.err(`steady: ${whose} being acknowledged and recorded by the listener; ${cutNowPlain}\n`)
      }
    }
    if (p.elapsedS >= nextS) {
      nextS = (Math.floor(p.elapsedS / (progressEventIntervalMs / 1000)) + 1) * (progressEventIntervalMs / 1000)
      if (output === 'json') io.out(progressEvent(p, jobs))
      else io.err(`progress: ${statusLine(p)}\n`)
    }
  }
}

/** The status in words: one write's, or the group's (its jobs summed, the slowest job's sync latency). */
export function statusLine(p: ShownProgress): string {
  const elapsed = `${p.elapsedS.toFixed(0)} s: `
  if (p.jobs === undefined && p.waitingUnrecorded !== undefined) {
    return `${elapsed}waiting for the listener: ${p.waitingUnrecorded.toLocaleString('en-US')} acks unrecorded`
  }
  const jobs = p.jobs === undefined ? '' : `${p.jobs.count} jobs, `
  const wait =
    p.jobs === undefined || p.jobs.waiting === 0
      ? ''
      : `, ${p.jobs.waiting} waiting for the listener (${(p.waitingUnrecorded ?? 0).toLocaleString('en-US')} acks unrecorded)`
  const rate = p.elapsedS > 0 ? Math.round(p.written / p.elapsedS) : 0
  return `${elapsed}${jobs}${p.written.toLocaleString('en-US')} records written and acked, ${p.recorded.toLocaleString('en-US')} recorded by the listener, ${rate.toLocaleString('en-US')}/s, sync p50 ${formatUs(p.syncP50Us)} p99 ${formatUs(p.syncP99Us)}${wait}`
}

/** A latency for people: microseconds below 1 ms, then milliseconds. */
export function formatUs(us: number): string {
  if (!Number.isFinite(us)) return '-'
  return us >= 1000 ? `${(us / 1000).toFixed(us >= 10_000 ? 0 : 1)} ms` : `${Math.round(us)} us`
}
