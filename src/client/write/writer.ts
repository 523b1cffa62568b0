/**
 * `plugcheck write`: writes numbered, checksummed records with one or more sync methods and reports
 * each seq to the listener only after the sync call that covers it has returned.
 *
 * The write loop is synchronous on purpose. Every async hop (koffi .async, fs.write, a worker
 * message) costs 15-25 us, half a real flush, and yielding to the event loop delays queued acks by
 * milliseconds. So records are written through libc, and right after the sync returns each ack
 * leaves through a blocking send() on a socket of our own, before the next record is written: no
 * ack ever waits behind another sync. (A send thread was measured: it raised the tmpfs rate by a
 * third but let acks trail the loop by milliseconds on a busy box, see bench/README.md.)
 * writeRecords holds that sequence; the periodic work between records is housekeeping.ts's.
 *
 * The writer always leaves a trail: one line per run and the verify command go to stdout with a
 * synchronous write before the loop starts (run-start.ts), and the summary is printed however the
 * run ends (run-end.ts). Signals are caught from before the first run is announced and seen at each
 * housekeeping tick, and between the chunks of an overwrite file's zero fill (stop-signals.ts, data-file.ts say why).
 */
import { dirname } from 'node:path'
import { performance } from 'node:perf_hooks'
import { assert } from '../../base/assert.js'
import { writerEnvironment } from '../environment.js'
import { NativeError, type DataFile, type FileLock } from '../../native/index.js'
import { recordFileName, recycledBy, tempFileName } from '../../record/files-layout.js'
import { lockedFileOf, RecordFileGone, type FilesRun } from './files-run.js'
import { fillRecord, slotOf, slotOffsetBytes } from '../../record/records.js'
import { PlugcheckError } from '../../base/errors.js'
import { AckChannel } from './ack-channel.js'
import { listenerTimeoutMs as defaultListenerTimeoutMs } from '../../protocol/endpoint.js'
import { lockExisting } from './data-file.js'
import { runTimeBase, type TimeBase } from '../run-clock.js'
import { checkEvidence } from './evidence.js'
import { shellQuote } from '../../base/shell-quote.js'
import type { ActiveRun } from './active-run.js'
import { Housekeeping } from './housekeeping.js'
import { endWrite, type LoopOutcome } from './run-end.js'
import { closeAll, startRuns, trailLine, warnIfInMemory } from './run-start.js'
import { announcedEvent, announcedLine, writeOutputOf } from './write-events.js'
import type { RunMeta } from '../../record/format.js'
import { catchStopSignals, type StopSignal } from './stop-signals.js'
import { TraceLog, jobTracePath } from './trace-log.js'
import {
  dataPaths,
  evidenceQuestion,
  validateWriteOptions,
  verifyCommand,
  verifyLine,
  type WriteIo,
  type WriteOptions,
} from './write-options.js'

export { shellQuote }

/** One write (one job of write --jobs): checks, listener, announce and create, the loop, the end. */
export async function runWrite(options: WriteOptions, io: WriteIo): Promise<number> {
  assert((options.jobs ?? 1) === 1 || options.job !== undefined, 'runWrite writes one job; --jobs N goes through writeCommand')
  validateWriteOptions(options)
  const timeoutMs = options.listenerTimeoutMs ?? defaultListenerTimeoutMs
  const paths = dataPaths(options)
  const outNow = io.outNow ?? io.out
  // Collected before anything else, so it never delays the write loop; never fails the run.
  const writer = writerEnvironment(dirname(options.file))
  warnIfInMemory(writer, options.file, io)
  // Lock every existing data file before the run is announced: a second writer on a live run's
  // path is refused here, before it can announce anything or touch the file.
  const locks: (FileLock | null)[] = []
  const runs: ActiveRun[] = []
  let channel: AckChannel | undefined
  // Caught from before any run is announced: a signal while an overwrite file is filled (seconds for a
  // large one) stops the fill and ends the runs as interrupted, as in the loop, instead of Node's
  // default action killing the writer and the listener recording a vanished run (a cut that never was).
  const early = catchStopSignals(undefined)
  try {
    for (const path of paths) locks.push(lockExisting(lockedFileOf(options.pattern, path)))
    channel = await AckChannel.open(options.server, options.token, timeoutMs)
    // Once the listener answered (a refusal or silence is said by the channel, in a writer's words),
    // before anything is announced. A group's main thread asked for every job (jobs.ts).
    if (options.job === undefined) await checkEvidence(evidenceQuestion(options, timeoutMs))
    // Every time of every run of this write is this base plus monotonic time (run-clock.ts).
    const clock = runTimeBase(channel.listenerClock, channel.endpointText, io.err)
    const stopped = (): boolean => early.received() !== undefined
    await startRuns({
      options,
      channel,
      writer,
      clock,
      paths,
      locks,
      runs,
      announced: announcer(options, io, channel.endpointText),
      io,
      stopped,
    })
    // A group's command names PATH: the first job prints it for all (--json: in every announced event).
    if ((options.job?.index ?? 0) === 0 && !options.json) outNow(`${verifyLine(options)}\n`)
    const start = await options.startBarrier?.(undefined)
    // writeLoop installs its own handlers before these are released (finally): no moment is uncaught.
    return await writeLoop(options, runs, channel, io, timeoutMs, start?.signal ?? early.received(), clock, start?.groupFailure)
  } finally {
    early.release()
    closeAll(runs, channel, locks)
  }
}

/**
 * What says a run is announced, before its file is created: the trail's line on stdout, written
 * before the loop starts (a SIGKILL may come at any moment after), and without a terminal the same
 * on stderr with the listener named; with --json, its announced event on stdout instead.
 */
function announcer(options: WriteOptions, io: WriteIo, listener: string): (meta: RunMeta) => void {
  const outNow = io.outNow ?? io.out
  const output = writeOutputOf(options.json, io.statusTty)
  return (meta) => {
    if (output === 'json') return outNow(announcedEvent(meta, listener, verifyCommand(options)))
    outNow(trailLine(meta))
    if (output === 'lines') io.err(announcedLine(meta, listener))
  }
}

/** Writes until --duration, a signal, a failed call, a finding in the files or a lost listener stops it; then ends the runs. */
async function writeLoop(
  options: WriteOptions,
  runs: ActiveRun[],
  channel: AckChannel,
  io: WriteIo,
  timeoutMs: number,
  stoppedBefore: StopSignal | undefined,
  clock: TimeBase,
  groupFailure?: string,
): Promise<number> {
  const trace = options.traceFile === undefined ? undefined : new TraceLog(jobTracePath(options.traceFile, options.job))
  const caught = catchStopSignals(stoppedBefore)
  // A stop the agent's campaign asks for (stopRequest) stops the loop as a signal does; it ends the runs with its own reason.
  const requested = (): string | undefined => (caught.received() === undefined ? options.stopRequest?.() : undefined)
  const signals =
    options.stopRequest === undefined
      ? caught
      : { ...caught, received: () => caught.received() ?? (requested() === undefined ? undefined : 'SIGTERM') }
  const startMs = performance.now()
  const endMs = options.durationS === undefined ? Infinity : startMs + options.durationS * 1000
  const housekeeping = new Housekeeping(runs, channel, io, signals, startMs, endMs, timeoutMs, options.json)
  let failure: LoopOutcome['failure']
  let lostListener: unknown
  try {
    // A job stopped while it waited for the group's other jobs writes no record: its runs end at once.
    const writes = stoppedBefore === undefined && groupFailure === undefined
    failure = await writeRecords(runs, channel, housekeeping, trace, clock, startMs, writes)
  } catch (error) {
    if (!(error instanceof PlugcheckError)) throw error
    lostListener = error
  } finally {
    signals.release()
    trace?.close()
  }
  if (io.statusTty && io.progress === undefined) io.err('\n')
  const outcome = { failure, lostListener, watched: housekeeping.watched, signal: caught.received, requested: requested(), groupFailure }
  return await endWrite({ options, runs, channel, io, timeoutMs }, outcome)
}

/**
 * The records, round-robin over the runs: fill, write, sync, and only once the sync has returned the
 * ack, before the next record. Returns the write or sync that failed (never retried), if one did.
 */
async function writeRecords(
  runs: ActiveRun[],
  channel: AckChannel,
  housekeeping: Housekeeping,
  trace: TraceLog | undefined,
  clock: TimeBase,
  startMs: number,
  writes: boolean,
): Promise<LoopOutcome['failure']> {
  /** The clock read that ended the previous record: this record's write time (two clock reads per record, not three). */
  let previousMs = startMs
  /** Write time = the run's time base + monotonic time: a step of the wall clock moves nothing (run-clock.ts). */
  const epochMinusPerfMs = clock.epochMs - clock.perfMs
  for (let i = 0; writes; i++) {
    const run = runs[i % runs.length]!
    const seq = run.lastSeq + 1
    const slot = slotOf(run.key, run.meta.pattern, seq, run.meta.slotCount)
    fillRecord(run.buffer, run.key, seq, slot, Math.round((epochMinusPerfMs + previousMs) * 1000))
    const beforeMs = performance.now()
    const offsetBytes = slotOffsetBytes(run.meta.recordSizeBytes, slot)
    try {
      if (run.records !== null) writeRecordFile(run.records, run.buffer, seq)
      else {
        run.file!.write(run.buffer, offsetBytes)
        run.file!.sync()
      }
    } catch (error) {
      // Never retried: after a failed sync the kernel may have dropped the data and a retry can lie.
      return { run, error }
    }
    // The sync covering `seq` has returned (a files run: its last durable step). Between here and the ack leaving only what must be:
    run.syncedSeq = seq // so a summary after a failed send counts the record as synced
    trace?.completed(run.key, seq) // lab: first, so ack coverage counts every sync completed before a cut
    channel.ack(run.meta.runId, seq, seq) // on the wire before the next record is written
    run.lastSeq = seq
    // How far records reach into the data file, for the watch over it (a files run's records are not in its superblock file).
    if (run.records === null && offsetBytes + run.meta.recordSizeBytes > run.endBytes) run.endBytes = offsetBytes + run.meta.recordSizeBytes
    const afterMs = performance.now()
    previousMs = afterMs
    run.latency.record((afterMs - beforeMs) * 1000)

    if (afterMs >= housekeeping.nextMs) {
      if (await housekeeping.stopsLoop(afterMs)) break
      previousMs = performance.now() // housekeeping may have waited (for the listener, for the event loop)
    }
  }
  return undefined
}

/**
 * One record of a files run, made the way a careful program makes a file (record/files-layout.ts,
 * PostgreSQL's durable_rename); each call returns before the next is made, and a failed one throws
 * (writeRecords ends the run, never retrying). The last durable step (the directory sync, or the
 * publish with --no-dir-sync) has returned when this returns, so the ack that follows covers the
 * record file under its final name.
 */
function writeRecordFile(run: FilesRun, record: Buffer, seq: number): void {
  const { directory } = run
  const tmp = tempFileName(seq)
  // 1. Create the temporary name (O_EXCL, the method's open flags), write, the method's file sync, close.
  const file = directory.create(tmp)
  try {
    file.write(record, 0)
    file.sync()
  } catch (error) {
    closeQuietly(file) // the failed write or sync is what is reported
    throw error
  }
  file.close()
  // 2. Publish under the final name: rename, or a second name and the temporary one removed.
  const name = recordFileName(seq)
  if (run.publish === 'link') {
    directory.link(tmp, name)
    directory.unlink(tmp)
  } else directory.rename(tmp, name)
  // 3. Recycle: past the window, the oldest kept record file goes (as a log's old segments do).
  const recycled = recycledBy(seq, run.keep)
  if (recycled !== null) unlinkRecycled(run, recordFileName(recycled))
  // 4. The method's directory sync makes the create, the publish and the delete durable (none for --no-dir-sync).
  if (run.dirSync) directory.sync()
}

/** Deletes a kept record file; one already gone was deleted by another program (RecordFileGone), any other failure is thrown as it is. */
function unlinkRecycled(run: FilesRun, name: string): void {
  try {
    run.directory.unlink(name)
  } catch (error) {
    if (error instanceof NativeError && error.code === 'ENOENT') throw new RecordFileGone(run.path, name)
    throw error
  }
}

function closeQuietly(file: DataFile): void {
  try {
    file.close()
  } catch {
    // the descriptor is gone either way
  }
}
