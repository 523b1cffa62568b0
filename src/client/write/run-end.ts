/**
 * The end of a write, however its loop stopped: every run ends with its reason (the listener records
 * the end before the write exits), the summary is printed (by --duration, a failed write or sync, a
 * lost listener, a data file changed, the storage losing a record, or SIGINT/SIGTERM/SIGHUP), and the
 * write's exit code or error is decided.
 */
import { NativeError } from '../../native/index.js'
import type { EndReason } from '../../protocol/messages.js'
import { describeSystemError, exitCodes, runtimeError } from '../../base/errors.js'
import { listRuns } from '../verify/listener-client.js'
import { formatSize } from '../../base/sizes.js'
import type { AckChannel } from './ack-channel.js'
import type { ActiveRun } from './active-run.js'
import { watchFiles, type FileFinding } from './file-watch.js'
import { RecordFileGone } from './files-run.js'
import { signalNumbers, stoppedLine, type StopSignal } from './stop-signals.js'
import { runsCommand, verifyCommand, verifyLine, type WriteIo, type WriteOptions } from './write-options.js'
import { formatUs } from './write-status.js'
import { jobOf, patternText, summaryEvent, type RunSummary } from './write-events.js'

/** What ending the runs needs. */
export interface WriteEnd {
  readonly options: WriteOptions
  readonly runs: ActiveRun[]
  readonly channel: AckChannel
  readonly io: WriteIo
  readonly timeoutMs: number
}

/** How the loop stopped: what decides how the runs end. */
export interface LoopOutcome {
  /** A write or sync that failed (never retried). */
  readonly failure: { run: ActiveRun; error: unknown } | undefined
  /** The listener refused or went away (a PlugcheckError): nothing more can reach it. */
  readonly lostListener: unknown
  /** A data file changed by someone else, or an acknowledged record the storage lost, during the run (file-watch.ts). */
  readonly watched: FileFinding | null
  /** The stop signal received, if any. */
  readonly signal: () => StopSignal | undefined
  /** Why another job of the group could not start: then no run wrote a record. */
  readonly groupFailure: string | undefined
  /** Why the agent's campaign asked the writer to stop (WriteOptions.stopRequest), when no signal came. */
  readonly requested?: string | undefined
}

/**
 * How long the summary waits for the listener's list of runs when it did not confirm every ack over
 * the write's connection (refused, gone, or slow): what it holds is asked on a new connection.
 */
export const maxHeldQueryMs = 5_000

/** Ends the runs as the outcome says, prints the summary; returns the exit code or throws the write's error. */
export async function endWrite(end: WriteEnd, outcome: LoopOutcome): Promise<number> {
  const { runs, io } = end
  if (outcome.lostListener !== undefined) {
    // Nothing more can reach the listener over this connection: the summary asks it on a new one.
    io.out(await summary(end, 'listener-lost'))
    throw outcome.lostListener
  }

  // A kept record file deleted by another program is a file changed, not a failed call of the storage's.
  if (outcome.failure?.error instanceof RecordFileGone)
    return endAfterFileFinding(end, { kind: 'changed', message: outcome.failure.error.message })
  if (outcome.failure !== undefined) return endAfterFailedCall(end, outcome.failure)

  // Once more before the run is called complete: a change since the last tick counts too.
  const watched = outcome.watched ?? watchFiles(runs)
  if (watched !== null) return endAfterFileFinding(end, watched)

  return endAsPlanned(end, outcome.signal(), outcome.groupFailure, outcome.requested)
}

/** A write or sync failed: the runs end as 'error' saying which call failed where. */
async function endAfterFailedCall(end: WriteEnd, failure: { run: ActiveRun; error: unknown }): Promise<never> {
  const { runs, channel, io, timeoutMs } = end
  const { run, error } = failure
  const what = error instanceof NativeError ? error.syscall : 'write'
  const message = `${what} failed on ${run.meta.path} after seq ${run.lastSeq} (method ${run.meta.method}): ${describeSystemError(error)}`
  endRuns(runs, channel, 'error', message, timeoutMs)
  io.out(await summary(end, 'error'))
  throw runtimeError(message, 'records acknowledged before the failure still count; run verify after checking the device')
}

/** The watch over the files found something (file-watch.ts): each kind ends the runs its own way. */
async function endAfterFileFinding(end: WriteEnd, watched: FileFinding): Promise<number> {
  const { runs, channel, io, timeoutMs } = end
  switch (watched.kind) {
    case 'changed': {
      const message = watched.message
      endRuns(runs, channel, 'file-changed', message.slice(0, 4000), timeoutMs)
      io.out(await summary(end, 'file-changed'))
      throw runtimeError(
        message,
        'verify will not judge this run (the storage is not to blame for what was done to its file); start a new run and leave its files alone',
      )
    }
    case 'unreadable': {
      const message = watched.message
      endRuns(runs, channel, 'error', message, timeoutMs)
      io.out(await summary(end, 'error'))
      throw runtimeError(message, 'records acknowledged before the failure still count; run verify after checking the device')
    }
    case 'lost':
      return storageLost(end, watched)
  }
}

/** --duration, a stop signal, or a job of the group that could not start: every run ends and every ack is recorded. */
async function endAsPlanned(
  end: WriteEnd,
  signal: StopSignal | undefined,
  groupFailure: string | undefined,
  requested?: string,
): Promise<number> {
  const { options, runs, channel, io, timeoutMs } = end
  let recorded = false
  const [reason, detail] = requested === undefined ? plannedEnd(options, signal, groupFailure) : (['interrupted', requested] as const)
  try {
    for (const run of runs) channel.end(run.meta.runId, reason, detail)
    recorded = channel.waitRecorded(new Map(runs.map((r) => [r.meta.runId, r.lastSeq])), timeoutMs)
  } catch (error) {
    io.out(await summary(end, reason))
    throw error
  }
  io.out(await summary(end, reason))
  if (!recorded)
    throw runtimeError(
      `the listener did not confirm every ack as recorded within ${timeoutMs / 1000} s`,
      'the summary says how many it confirmed; raise --listener-timeout for a busy listener',
    )
  if (groupFailure !== undefined) return exitCodes.runtime // the write's error is the failed job's, said by the main thread
  if (requested !== undefined) {
    io.err(requestedStopLine(requested))
    return exitCodes.runtime
  }
  if (signal !== undefined) {
    if (options.job === undefined) io.err(stoppedLine(signal)) // a group's is said once, by its main thread
    return 128 + signalNumbers[signal]
  }
  return 0
}

/** What a write the agent's campaign stopped says once every ack is recorded. */
export function requestedStopLine(reason: string): string {
  return `plugcheck: ${reason}; the writer stopped, every ack is recorded at the listener\n`
}

/** The reason and detail every run ends with when nothing went wrong in this job. */
function plannedEnd(
  options: WriteOptions,
  signal: StopSignal | undefined,
  groupFailure: string | undefined,
): readonly [EndReason, string | undefined] {
  // A group whose job could not start ends every run as one that stopped before its first record:
  // verify then knows why the group lacks that job's runs (it never announced them).
  return groupFailure !== undefined
    ? (['error', `could not start: ${groupFailure}`.slice(0, 4000)] as const)
    : signal === undefined
      ? (['duration', undefined] as const)
      : (['interrupted', options.stopBecause?.() ?? `stopped by ${signal}`] as const)
}

/**
 * The storage lost an acknowledged record of our own file while the run was going (file-watch.ts):
 * every run ends saying so, every ack is recorded, the summary printed. Exit 1 when the record was a
 * tested method's: its sync returned and the storage broke that promise, the same proof for which
 * verify exits 1 (and verify, run now, judges it so). A loss of the control's (never synced) record
 * says the storage loses written data while powered, which is no verdict on a method: exit 3.
 */
async function storageLost(end: WriteEnd, lost: Extract<FileFinding, { kind: 'lost' }>): Promise<number> {
  const { options, runs, channel, io, timeoutMs } = end
  // A listener older than the reason takes the same words as an 'error' end (verify judges both).
  const reason = channel.knowsStorageLost ? 'storage-lost' : 'error'
  const recorded = endRuns(runs, channel, reason, lost.message.slice(0, 4000), timeoutMs)
  io.out(await summary(end, reason))
  const unrecorded = recorded ? '' : ` (the listener did not confirm every ack as recorded: the summary says how many it holds)`
  const hint = `no power cut is needed to see it: run ${verifyCommand(options)} now; then test the device before trusting it`
  if (lost.run.meta.method === 'none') throw runtimeError(`${lost.message}${unrecorded}`, hint)
  io.err(`plugcheck: ${lost.message}${unrecorded}\nhint: ${hint}\n`)
  return exitCodes.lossFound
}

/** What the listener holds of each run; beyond: the counts it listed for runs that it never got so many acks of (refused). */
interface HeldAtListener {
  readonly held: ReadonlyMap<string, number | undefined>
  readonly beyond: ReadonlyMap<string, number>
}

/**
 * What the listener holds of each run: the 'recorded' reports of the write's connection when they
 * cover every ack (the channel refuses one beyond the acks sent); else the listener is asked on a new
 * connection (plugcheck runs' list), since reports it sent before it refused or closed may never have
 * been read. undefined for a run it did not answer for (gone, silent, or the run not listed), or that
 * it listed with more acks than were sent (a broken or lying listener: never shown as recorded): the
 * summary then says it cannot know.
 */
async function recordedAtListener(end: WriteEnd): Promise<HeldAtListener> {
  const { options, runs, channel } = end
  const confirmed = (run: ActiveRun): number => channel.recordedThrough.get(run.meta.runId) ?? 0
  if (runs.every((run) => confirmed(run) >= run.lastSeq))
    return { held: new Map(runs.map((run) => [run.meta.runId, confirmed(run)])), beyond: new Map() }
  let listed: Map<string, number>
  try {
    const answer = await listRuns(options.server, options.token, Math.min(end.timeoutMs, maxHeldQueryMs))
    listed = new Map(answer.runs.map((r) => [r.runId, r.ackedThroughSeq]))
  } catch {
    return { held: new Map(), beyond: new Map() }
  }
  const held = new Map<string, number | undefined>()
  const beyond = new Map<string, number>()
  for (const run of runs) {
    const count = listed.get(run.meta.runId)
    if (count !== undefined && count > run.lastSeq) beyond.set(run.meta.runId, count)
    else held.set(run.meta.runId, count)
  }
  return { held, beyond }
}

/** Each run's counts and sync latency, then (outside a group) the verify command: printed however the write ends; --json: the summary event. */
async function summary(end: WriteEnd, endKind: EndReason | 'listener-lost'): Promise<string> {
  const { options, runs, channel } = end
  const { held, beyond } = await recordedAtListener(end)
  if (options.json)
    return summaryEvent(
      runs.map((run) => runSummary(run, endKind, held.get(run.meta.runId))),
      verifyCommand(options),
    )
  const lines: string[] = []
  for (const run of runs) {
    const m = run.meta
    const recorded = held.get(m.runId)
    lines.push(
      `run ${m.runId}: ${m.method}${m.direct ? ' --direct' : ''}, ${patternText(m)}, ${formatSize(m.recordSizeBytes)} records, ${m.path}`,
    )
    const done = m.method === 'none' ? 'written (never synced: the negative control)' : 'synced'
    const unsent =
      run.syncedSeq > run.lastSeq ? ` (${(run.syncedSeq - run.lastSeq).toLocaleString('en-US')} more ${done}, their ack not sent)` : ''
    const acknowledged = `  ${run.lastSeq.toLocaleString('en-US')} records ${done} and acknowledged${unsent}`
    const listed = beyond.get(m.runId)
    const why =
      listed === undefined
        ? `the listener stopped answering (it had confirmed ${(channel.recordedThrough.get(m.runId) ?? 0).toLocaleString('en-US')})`
        : `the listener listed ${listed.toLocaleString('en-US')} recorded, more than were acknowledged (a protocol violation)`
    lines.push(
      recorded === undefined
        ? `${acknowledged}; recorded by the listener: unknown, ${why}: ask it with ${runsCommand(options)}`
        : `${acknowledged}, ${recorded.toLocaleString('en-US')} recorded by the listener`,
    )
    lines.push(
      `  sync latency p50 ${formatUs(run.latency.quantileUs(0.5))}, p99 ${formatUs(run.latency.quantileUs(0.99))}, max ${formatUs(run.latency.maxUs)}`,
    )
  }
  if (options.job === undefined) lines.push(verifyLine(options, endKind)) // a group's follows every job's runs
  return `${lines.join('\n')}\n`
}

/** One run's line of the summary event. */
function runSummary(run: ActiveRun, end: string, recorded: number | undefined): RunSummary {
  const m = run.meta
  const finite = (us: number): number | null => (Number.isFinite(us) ? Math.round(us) : null)
  return {
    runId: m.runId,
    method: m.method,
    direct: m.direct,
    pattern: m.pattern,
    recordSizeBytes: m.recordSizeBytes,
    path: m.path,
    job: jobOf(m),
    end,
    acknowledged: run.lastSeq,
    syncedNotAcknowledged: Math.max(0, run.syncedSeq - run.lastSeq),
    recorded: recorded ?? null,
    syncP50Us: finite(run.latency.quantileUs(0.5)),
    syncP99Us: finite(run.latency.quantileUs(0.99)),
    syncMaxUs: run.latency.count === 0 ? null : Math.round(run.latency.maxUs),
  }
}

/**
 * Ends every run with reason and detail, then waits (within timeoutMs) until the listener has recorded
 * every ack: the listener takes a connection's frames in order, so the end is stored before the write
 * exits (a verify started right after sees it) and verify counts every ack. False when the listener
 * could not confirm it (gone, or slow); the failure being reported matters more.
 */
function endRuns(runs: readonly ActiveRun[], channel: AckChannel, reason: EndReason, detail: string, timeoutMs: number): boolean {
  try {
    for (const r of runs) channel.end(r.meta.runId, reason, detail)
    return channel.waitRecorded(new Map(runs.map((r) => [r.meta.runId, r.lastSeq])), timeoutMs)
  } catch {
    return false
  }
}
