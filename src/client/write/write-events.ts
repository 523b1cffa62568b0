/**
 * What a write tells whoever watches it, as events: each run announced, steady once (the moment to
 * cut the power), its progress, and the summary at the end. One source (the loop's progress, the
 * runs' metadata and counts), three ways to show it, chosen once per write (writeOutputOf):
 * - terminal: stderr is a terminal; the status line redrawn in place (write-status.ts).
 * - lines: stderr is no terminal (a script, nohup, ssh without a tty, a service's log): plain lines
 *   on stderr, one per event, never an escape sequence; the trail and summary on stdout as ever.
 * - json (--json): newline-delimited JSON on stdout, one complete object per line, every line an
 *   event; stdout carries nothing else. Warnings and errors stay on stderr.
 */
import type { RunMeta } from '../../record/format.js'
import { directorySyncs, nativePort, type DirectorySyncCall } from '../../native/index.js'
import type { WriteProgress } from './write-options.js'

export type WriteOutput = 'terminal' | 'lines' | 'json'

/** The pattern as the trail and the summary say it: a files run with how it makes its files, the directory sync this platform makes named. */
export function patternText(meta: RunMeta): string {
  if (meta.files === undefined) return meta.pattern
  const sync = meta.files.dirSync ? directorySyncWords[directorySyncs[nativePort().family][meta.method]] : 'no directory sync'
  return `files (${meta.files.publish}, ${sync}, ${meta.slotCount.toLocaleString('en-US')} kept)`
}

const directorySyncWords: Readonly<Record<DirectorySyncCall, string>> = {
  fsync: 'fsync of the directory',
  fdatasync: 'fdatasync of the directory',
  fullfsync: 'F_FULLFSYNC of the directory',
  barrier: 'F_BARRIERFSYNC of the directory',
  none: 'no directory sync (none)',
  cannot: 'no directory sync (Windows cannot)',
}

/** How often the lines and json outputs report progress (a terminal's line is redrawn every statusIntervalMs). */
export const progressEventIntervalMs = 5000

/** --json wins; else a terminal on stderr gets the status line; else plain lines. */
export function writeOutputOf(json: boolean | undefined, statusTty: boolean): WriteOutput {
  return json === true ? 'json' : statusTty ? 'terminal' : 'lines'
}

/** One run at its end, as the summary reports it. */
export interface RunSummary {
  readonly runId: string
  readonly method: string
  readonly direct: boolean
  readonly pattern: string
  readonly recordSizeBytes: number
  readonly path: string
  /** 1-based job of write --jobs N, null without jobs. */
  readonly job: number | null
  /** How the run ended at the listener: duration, interrupted, error, file-changed, storage-lost; listener-lost when it could not be told. */
  readonly end: string
  /** Records written, synced (none: written only) and acknowledged to the listener. */
  readonly acknowledged: number
  /** Synced, but their ack never sent (a send that failed): at most one per run. */
  readonly syncedNotAcknowledged: number
  /** Acknowledged records the listener confirmed as recorded; null when it stopped answering before it said, or claimed more than were acknowledged (run-end.ts). */
  readonly recorded: number | null
  readonly syncP50Us: number | null
  readonly syncP99Us: number | null
  readonly syncMaxUs: number | null
}

/** A run's job for the events: 1-based, null without --jobs. */
export function jobOf(meta: Pick<RunMeta, 'member'>): number | null {
  return meta.member !== undefined && meta.member.jobs > 1 ? meta.member.job : null
}

/** The plain line (lines output) that says a run is announced: its id, method, file and listener. */
export function announcedLine(meta: RunMeta, listener: string): string {
  const job = jobOf(meta)
  return `announced: run ${meta.runId} (${meta.method}${meta.direct ? ' --direct' : ''}, ${patternText(meta)}${job === null ? '' : `, job ${job}`}) of ${meta.path} at the listener ${listener}\n`
}

/** The json output's announced event, one per run: written before the run's first record. */
export function announcedEvent(meta: RunMeta, listener: string, verifyCommand: string): string {
  return jsonLine({
    event: 'announced',
    timeMs: Date.now(),
    runId: meta.runId,
    groupId: meta.groupId,
    method: meta.method,
    direct: meta.direct,
    pattern: meta.pattern,
    // A files run's way of making its record files, and how many it keeps; null for a data file.
    files: meta.files === undefined ? null : { ...meta.files, keptFiles: meta.slotCount },
    recordSizeBytes: meta.recordSizeBytes,
    path: meta.path,
    file: meta.requestedPath,
    job: jobOf(meta),
    listener,
    verifyCommand,
  })
}

/** The progress counts an event carries (json); jobs: write --jobs N, null without. */
function progressFields(p: WriteProgress, jobs: number | null) {
  return {
    timeMs: Date.now(),
    elapsedS: round(p.elapsedS, 3),
    acknowledged: p.written,
    recorded: p.recorded,
    ratePerS: p.elapsedS > 0 ? Math.round(p.written / p.elapsedS) : 0,
    syncP50Us: finiteOrNull(p.syncP50Us),
    syncP99Us: finiteOrNull(p.syncP99Us),
    waitingUnrecorded: p.waitingUnrecorded ?? null,
    jobs,
  }
}

export function steadyEvent(p: WriteProgress, jobs: number | null): string {
  return jsonLine({ event: 'steady', ...progressFields(p, jobs) })
}

export function progressEvent(p: WriteProgress, jobs: number | null): string {
  return jsonLine({ event: 'progress', ...progressFields(p, jobs), steady: p.steady })
}

/** The json output's last event: every run's counts, their totals, and the command to run after the cut. */
export function summaryEvent(runs: readonly RunSummary[], verifyCommand: string): string {
  return jsonLine({
    event: 'summary',
    timeMs: Date.now(),
    acknowledged: runs.reduce((n, r) => n + r.acknowledged, 0),
    recorded: runs.some((r) => r.recorded === null) ? null : runs.reduce((n, r) => n + (r.recorded ?? 0), 0),
    runs,
    verifyCommand,
  })
}

/** The runs of summary events (json) in text: what a job of write --jobs sent its main thread, for the group's one summary. */
export function summaryRunsOf(text: string): RunSummary[] {
  return text
    .split('\n')
    .filter((line) => line !== '')
    .flatMap((line) => {
      const event = JSON.parse(line) as { event: string; runs?: RunSummary[] }
      return event.event === 'summary' ? (event.runs ?? []) : []
    })
}

function jsonLine(event: Record<string, unknown>): string {
  return `${JSON.stringify(event)}\n`
}

function finiteOrNull(n: number): number | null {
  return Number.isFinite(n) ? Math.round(n) : null
}

function round(n: number, digits: number): number {
  const f = 10 ** digits
  return Math.round(n * f) / f
}
