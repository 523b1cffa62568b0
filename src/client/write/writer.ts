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
 *
 * The writer always leaves a trail: one line per run and the verify command go to stdout with a
 * synchronous write before the loop starts (stdout to a pipe is asynchronous in Node and would
 * still be queued when a SIGKILL lands), and the summary is printed however the run ends: by
 * --duration, a failed write or sync, a lost listener, or SIGINT/SIGTERM/SIGHUP.
 *
 * Signals. Node runs a JS signal handler only when the event loop turns, which a synchronous loop
 * never lets it do. Blocking the signals with pthread_sigmask and polling sigpending() would not
 * work either: the mask is per thread, Node's other threads (libuv pool, V8 platform) leave SIGTERM
 * unblocked, and the kernel then delivers it to one of them with its default action, which kills
 * the process. So the handlers are ordinary process.on() handlers that set a flag, and the loop
 * yields to the event loop once per housekeeping tick (every 50 ms, after the ack has left): that
 * costs one setImmediate hop (a few microseconds) per 50 ms, and a signal is seen within 50 ms plus
 * one sync. The run then ends with 'interrupted' and exits 128 + the signal number (130, 143, 129 for
 * SIGHUP: a dropped SSH session or a closed terminal), the status a shell reports for a process that a
 * signal ended.
 */
import { randomBytes } from 'node:crypto'
import { openSync, writeSync, closeSync, fstatSync } from 'node:fs'
import { hostname } from 'node:os'
import { dirname } from 'node:path'
import { performance } from 'node:perf_hooks'
import { encodeFrame } from '../../protocol/framing.js'
import type { Io } from '../../base/io.js'
import { assert } from '../../base/assert.js'
import { groupRunsMax, writerEnvSchema, type CampaignTag, type EndReason, type WriterEnv } from '../../protocol/messages.js'
import { writerEnvironment } from '../environment.js'
import { NativeError, directAlignmentBytes, nativePort, type DataFile, type FileLock } from '../../native/index.js'
import { methodAvailability, type MethodName } from '../../native/registry.js'
import {
  encodeSuperblock,
  fillRecord,
  memberPath,
  readStamp,
  runKey,
  sectorBytes,
  slotOf,
  slotOffsetBytes,
  stampBytes,
  type Pattern,
  type RunKey,
  type RunMeta,
} from '../../record/format.js'
import { PlugcheckError, describeSystemError, exitCodes, runtimeError, usageError } from '../../base/errors.js'
import { formatSize } from '../../base/sizes.js'
import { AckChannel } from './ack-channel.js'
import { listenerTimeoutMs as defaultListenerTimeoutMs } from '../../protocol/endpoint.js'
import { checkDirectSupported, checkFolder, directFlag, checkReplaceable, createDataFile, lockExisting } from './data-file.js'
import { formatEndpoint, type Endpoint } from '../../protocol/endpoint.js'
import { superblockHeadBytes, watchFiles, type FileFinding, type WatchedRun } from './file-watch.js'
import { epochAt, runTimeBase, type TimeBase } from '../run-clock.js'
import { checkEvidence, type EvidenceQuestion } from './evidence.js'
import { shellQuote } from '../../base/shell-quote.js'

export { shellQuote }
import { LatencyHistogram } from '../../base/latency.js'

export interface WriteOptions {
  readonly server: Endpoint
  /** Absolute path. */
  readonly file: string
  readonly methods: readonly MethodName[]
  readonly direct: boolean
  readonly recordSizeBytes: number
  readonly sizeBytes: number
  readonly pattern: Pattern
  readonly durationS?: number
  readonly token?: string
  readonly force: boolean
  /**
   * Data files of this host's previous run at these paths, just verified by the agent: replaced even
   * when the cut destroyed their superblock (they are plugcheck's own, whatever their bytes say now).
   */
  readonly ownPaths?: ReadonlySet<string>
  /**
   * --discard-unverified: write even though the last run of this host and path may have been cut and
   * was never verified (evidence.ts). The agent sets it: it verified that run first.
   */
  readonly discardUnverified?: boolean
  /** Lab and bench only: a side file (outside the cut) logging every completed sync. */
  readonly traceFile?: string
  /** Bounds connect, every answer, a stall of the listener's "recorded" reports and the final wait (--listener-timeout). */
  readonly listenerTimeoutMs?: number
  /** The campaign cycle this run belongs to (set by `agent`), sent with each run's announcement. */
  readonly campaign?: CampaignTag
  /** --jobs: writer threads, each with its own data files, runs and connection, all one group (jobs.ts). */
  readonly jobs?: number
  /** Set by jobs.ts inside each job: which one it is, and the group's id and key that every job shares. */
  readonly job?: JobOf
  /**
   * Set inside each job of `write --jobs N` (job-worker.ts): called once the job's runs are announced
   * and its files created (failure: why its start failed, its announced runs already ended), it
   * resolves when every job has got that far, so no job writes, ends a run or closes its connection
   * while another is still joining the group (the listener lets a job join only while one of the
   * group's connections is open). Resolves with the stop signal that arrived meanwhile, if any, and
   * why another job could not start, if one could not (then no job writes a record).
   */
  readonly startBarrier?: (failure: string | undefined) => Promise<GroupStart>
  /** A job of write --jobs: why its stop signal came when no one sent one (another job failed), said in its runs' end. */
  readonly stopBecause?: () => string | undefined
}

/** What a job learns at the start barrier: a stop signal that came meanwhile; a job of the group that could not start. */
export interface GroupStart {
  readonly signal: StopSignal | undefined
  /** "job 3 of 4 could not start: ...": every run of this job then ends as 'error' before its first record. */
  readonly groupFailure: string | undefined
}

/** One job of `write --jobs N`: index 0..count-1; the key proves to the listener that the job belongs to the group. */
export interface JobOf {
  readonly index: number
  readonly count: number
  readonly groupId: string
  readonly groupKey: string
}

/** Runs of one group: the listener answers a verify with at most this many, so --jobs x methods is bounded by it. */
export { groupRunsMax }

/** The command's output, with the write loop's progress when a parent sums it (write --jobs). */
export interface WriteIo extends Io {
  /**
   * Where a terminal's status goes as data (write --jobs: each job's, summed by the main thread);
   * without it the loop draws its own status line and 'steady' line on err. Only when statusTty.
   */
  readonly progress?: (progress: WriteProgress) => void
}

/** A write's progress over its runs, every status interval while stderr is a terminal. */
export interface WriteProgress {
  readonly elapsedS: number
  /** Records written, synced and acknowledged. */
  readonly written: number
  /** Of those, the ones the listener has reported as recorded. */
  readonly recorded: number
  readonly syncP50Us: number
  readonly syncP99Us: number
  /** Set while the loop waits for the listener to catch up: the acks it has not recorded yet. */
  readonly waitingUnrecorded: number | undefined
  /** Every run has acked for 3 s and the listener records its acks: the moment to cut the power. */
  readonly steady: boolean
}

/** A run being written; the fields the watch over its file reads are WatchedRun's (file-watch.ts). */
interface ActiveRun extends WatchedRun {
  readonly buffer: Buffer
  readonly file: DataFile
  endBytes: number
  /** Highest seq whose sync returned. */
  syncedSeq: number
  lastSeq: number
  readonly latency: LatencyHistogram
}

const housekeepingIntervalMs = 50
const statusIntervalMs = 250
const steadyAfterMs = 3000
/**
 * Flow control: how far a run's acks may run ahead of the listener's "recorded" reports before the
 * writer stops and waits. A healthy listener records a group commit every few milliseconds and
 * trails by a few thousand seqs at most, so the bound binds only when the listener is truly behind
 * (busy with other writers, a slow disk). 100,000 seqs is 2.5 s of the fastest writer measured
 * (tmpfs, ~40k records/s) and 5 s of a real disk (~20k/s): it caps the acks a cut can catch
 * between the writer and the listener's disk to a few seconds' worth and what the listener must
 * buffer to ~4 MB per run, without slowing a writer whose listener keeps up.
 */
export const unrecordedAcksMax = 100_000
/** Once blocked, resume when the listener has caught up to half the bound (no flapping). */
const unrecordedAcksResume = unrecordedAcksMax / 2
/** Trace entries: run id (8 bytes), seq (f64), sync-return time from process.hrtime in ns (f64). */
export const traceEntryBytes = 24

/** Checks everything that can be checked before touching the network or the disk (exit 2 on a problem). */
export function validateWriteOptions(options: WriteOptions): void {
  validateWriteFlags(options)
  checkFolder(dirname(options.file))
  for (const path of [...groupDataPaths(options), options.file]) {
    const unsafe = nativePort().unsafeFileName(path)
    if (unsafe !== null) throw usageError(`refusing to write to ${path}: ${unsafe}`, 'give --file another name')
  }
  for (const path of groupDataPaths(options)) checkReplaceable(path, options.force || options.ownPaths?.has(path) === true)
  if (options.direct) checkDirectSupported(dirname(options.file))
}

/** The flags alone (methods, sizes): what `agent` checks at once, before it waits for the listener or looks at the disk. */
export function validateWriteFlags(options: Pick<WriteOptions, 'methods' | 'direct' | 'recordSizeBytes' | 'sizeBytes' | 'jobs'>): void {
  for (const method of options.methods) {
    const availability = methodAvailability(method)
    if (!availability.available) throw usageError(`method ${method} is not available here: ${availability.reason}`)
  }
  if (new Set(options.methods).size !== options.methods.length) throw usageError('--method lists a method twice')
  const jobs = options.jobs ?? 1
  if (jobs * options.methods.length > groupRunsMax) {
    throw usageError(
      `--jobs ${jobs} with ${options.methods.length} methods makes ${jobs * options.methods.length} runs; one write makes at most ${groupRunsMax}`,
      'use fewer jobs or methods',
    )
  }
  const alignment = options.direct ? directAlignmentBytes : sectorBytes
  if (options.recordSizeBytes % alignment !== 0 || options.recordSizeBytes === 0) {
    throw usageError(
      `--record-size ${options.recordSizeBytes} is not a multiple of ${alignment}${options.direct ? ' (needed with --direct)' : ''}`,
    )
  }
  if (options.recordSizeBytes > 1024 * 1024) throw usageError('--record-size is larger than 1 MiB')
  if (Math.floor(options.sizeBytes / options.recordSizeBytes) < 2) {
    throw usageError(`--size ${options.sizeBytes} leaves no room for records of ${options.recordSizeBytes} bytes after the superblock`)
  }
}

/**
 * One file per method; with several methods, PATH.method. With --jobs N (N > 1) each job adds
 * .jobK (K = 1..N): PATH.job2, PATH.fsync.job2. Inside a job, that job's files only.
 */
export function dataPaths(options: Pick<WriteOptions, 'file' | 'methods' | 'job'>): string[] {
  const { jobs, job } = jobPlace(options)
  return options.methods.map((m) => memberPath(options.file, options.methods, jobs, job, m))
}

/** Which job this write is (1-based) of how many: 1 of 1 outside write --jobs. */
function jobPlace(options: Pick<WriteOptions, 'job'>): { jobs: number; job: number } {
  return { jobs: options.job?.count ?? 1, job: (options.job?.index ?? 0) + 1 }
}

/** Every data file of the write: every job's (a job's own when called inside it). */
export function groupDataPaths(options: Pick<WriteOptions, 'file' | 'methods' | 'job' | 'jobs'>): string[] {
  const count = options.jobs ?? 1
  if (options.job !== undefined || count === 1) return dataPaths(options)
  return Array.from({ length: count }, (_, index) => dataPaths({ ...options, job: { index, count, groupId: '', groupKey: '' } })).flat()
}

export async function runWrite(options: WriteOptions, io: WriteIo): Promise<number> {
  assert((options.jobs ?? 1) === 1 || options.job !== undefined, 'runWrite writes one job; --jobs N goes through writeCommand')
  validateWriteOptions(options)
  const timeoutMs = options.listenerTimeoutMs ?? defaultListenerTimeoutMs
  const paths = dataPaths(options)
  const outNow = io.outNow ?? io.out
  // Collected before anything else, so it never delays the write loop; never fails the run.
  const writer = writerEnvironment(dirname(options.file))
  const fileSystem = writer.fingerprint?.target
  if (fileSystem?.inMemory === true) {
    io.err(
      `plugcheck: warning: ${dirname(options.file)} is on ${fileSystem.fileSystem.type}, in memory: nothing there survives a power cut, so this run can only rehearse the workflow\n`,
    )
  }
  // Lock every existing data file before the run is announced: a second writer on a live run's
  // path is refused here, before it can announce anything or touch the file.
  const locks: (FileLock | null)[] = []
  const runs: ActiveRun[] = []
  let channel: AckChannel | undefined
  const announced: RunMeta[] = []
  try {
    for (const path of paths) locks.push(lockExisting(path))
    channel = await AckChannel.open(options.server, options.token, timeoutMs)
    // Once the listener answered (a refusal or silence is said by the channel, in a writer's words),
    // before anything is announced. A group's main thread asked for every job (jobs.ts).
    if (options.job === undefined) await checkEvidence(evidenceQuestion(options, timeoutMs))
    // Every time of every run of this write is this base plus monotonic time (run-clock.ts).
    const clock = runTimeBase(channel.listenerClock, channel.endpointText, io.err)
    const groupId = options.job?.groupId ?? randomBytes(8).toString('hex')
    const host = hostname()
    const slotCount = Math.floor(options.sizeBytes / options.recordSizeBytes) - 1
    try {
      for (const [i, method] of options.methods.entries()) {
        const meta: RunMeta = {
          runId: randomBytes(8).toString('hex'),
          groupId,
          method,
          direct: options.direct,
          pattern: options.pattern,
          recordSizeBytes: options.recordSizeBytes,
          slotCount,
          host,
          path: paths[i]!,
          requestedPath: options.file,
          createdMs: Math.floor(epochAt(clock)),
          // The group's plan in every run: verify names a member the listener lost.
          member: { ...jobPlace(options), methods: [...options.methods] },
        }
        // Announce first: a run the listener knows with no acks can never be judged lost, while a file
        // replaced before its run was announced would make verify judge the previous run against it.
        channel.announce(meta, writer, options.campaign, options.job?.groupKey)
        announced.push(meta)
        outNow(`run ${meta.runId}: ${meta.method}${meta.direct ? ' --direct' : ''}, ${meta.pattern}, ${meta.path}\n`)
        // The new file's lock replaces the old file's: the old inode is no longer at the path.
        const newLock = createDataFile(meta, locks[i]!)
        locks[i]?.release()
        locks[i] = newLock
        const checkFd = openSync(meta.path, 'r')
        runs.push({
          meta,
          key: runKey(meta.runId),
          buffer: nativePort().alignedBuffer(meta.recordSizeBytes, directAlignmentBytes),
          file: openForMethod(meta),
          identity: { dev: newLock.dev, ino: newLock.ino },
          endBytes: meta.recordSizeBytes,
          allocatedAtStartBytes: allocatedBytes(checkFd),
          superblockHead: encodeSuperblock(meta).subarray(0, superblockHeadBytes),
          checkFd,
          syncedSeq: 0,
          lastSeq: 0,
          latency: new LatencyHistogram(),
        })
      }
    } catch (error) {
      // Announced runs that never reached their first record end as 'error' with the cause, so verify
      // knows the run stopped before writing (its file may never have been created) and the listener
      // does not wait for it as a vanished writer.
      const detail = `could not start: ${error instanceof Error ? error.message : String(error)}`
      for (const meta of announced) tryQuietly(() => channel!.end(meta.runId, 'error', detail.slice(0, 4000)))
      await options.startBarrier?.(error instanceof Error ? error.message : String(error)) // the connection stays open until the group's other jobs have joined
      throw error
    }
    // A group's command names PATH: the first job prints it for all.
    if ((options.job?.index ?? 0) === 0) outNow(`${verifyLine(options)}\n`)
    const start = await options.startBarrier?.(undefined)
    return await writeLoop(options, runs, channel, io, timeoutMs, start?.signal, clock, start?.groupFailure)
  } finally {
    for (const run of runs) {
      run.file.close()
      closeSync(run.checkFd)
    }
    channel?.close()
    // Releasing the locks; exit would too.
    for (const lock of locks) lock?.release()
  }
}

/** What the file system has allocated to the file, at most its size (file-watch.ts). */
function allocatedBytes(fd: number): number {
  const stats = fstatSync(fd)
  return Math.min(stats.blocks * 512, stats.size)
}

/** What the evidence check asks the listener, for this write (evidence.ts). */
export function evidenceQuestion(options: WriteOptions, timeoutMs: number): EvidenceQuestion {
  return {
    server: options.server,
    file: options.file,
    dataPaths: groupDataPaths(options),
    listenerTimeoutMs: timeoutMs,
    verifyCommand: verifyCommand(options),
    ...(options.token === undefined ? {} : { token: options.token }),
    ...(options.discardUnverified === undefined ? {} : { discardUnverified: options.discardUnverified }),
  }
}

/** The trail's last line: what to run after the cut. */
export function verifyLine(options: Pick<WriteOptions, 'server' | 'file' | 'token'>): string {
  return `after a power cut and reboot: ${verifyCommand(options)}`
}

/** The command to paste after the reboot: the path shell-quoted, the token named but never printed. */
export function verifyCommand(options: Pick<WriteOptions, 'server' | 'file' | 'token'>): string {
  const token = options.token === undefined ? '' : " --token 'YOUR-TOKEN'"
  return `plugcheck verify --server ${shellQuote(formatEndpoint(options.server))} --file ${shellQuote(options.file)}${token}`
}

function openForMethod(meta: RunMeta): DataFile {
  try {
    return nativePort().openData(meta.path, meta.method, { direct: meta.direct })
  } catch (error) {
    if (meta.direct && error instanceof NativeError && error.code === 'EINVAL') {
      throw usageError(`--direct is not supported for ${meta.path}: the file system refused direct I/O (${directFlag()})`)
    }
    throw runtimeError(`could not open ${meta.path}: ${describeSystemError(error)}`)
  }
}

/** SIGHUP too: a dropped SSH session or a closed terminal ends a run as interrupted, not as a vanished writer (a cut). */
const signalNumbers = { SIGINT: 2, SIGTERM: 15, SIGHUP: 1 } as const
export type StopSignal = keyof typeof signalNumbers

/** SIGINT/SIGTERM/SIGHUP set a flag the loop reads at each housekeeping tick (see the module header); `before`: one that came before the loop. */
function catchStopSignals(before: StopSignal | undefined): {
  readonly received: () => StopSignal | undefined
  readonly release: () => void
} {
  let received = before
  const handlers = (Object.keys(signalNumbers) as StopSignal[]).map((signal) => {
    const handler = (): void => {
      received ??= signal
    }
    process.on(signal, handler)
    return () => process.off(signal, handler)
  })
  return { received: () => received, release: () => handlers.forEach((off) => off()) }
}

/** One turn of the event loop: lets signal handlers run. */
const yieldToEventLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))

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
  const trace = options.traceFile === undefined ? undefined : new TraceLog(options.traceFile)
  const signals = catchStopSignals(stoppedBefore)
  const startMs = performance.now()
  const endMs = options.durationS === undefined ? Infinity : startMs + options.durationS * 1000
  let nextHousekeepingMs = startMs + housekeepingIntervalMs
  let nextStatusMs = startMs + statusIntervalMs
  let steadyNow = false
  let steadySent = false
  let failure: { run: ActiveRun; error: unknown } | undefined
  let lostListener: unknown
  /** A data file changed by someone else, or an acknowledged record the storage lost, during the run (file-watch.ts). */
  let watched: FileFinding | null = null
  const report = io.progress ?? drawProgress(io)
  const showStatus = (nowMs: number, waiting?: number): void => {
    if (!io.statusTty) return
    nextStatusMs = nowMs + statusIntervalMs
    report(progressOf(runs, channel, (nowMs - startMs) / 1000, waiting, steadyNow))
  }

  /** The clock read that ended the previous record: this record's write time (two clock reads per record, not three). */
  let previousMs = startMs
  /** Write time = the run's time base + monotonic time: a step of the wall clock moves nothing (run-clock.ts). */
  const epochMinusPerfMs = clock.epochMs - clock.perfMs
  try {
    // A job stopped while it waited for the group's other jobs writes no record: its runs end at once.
    for (let i = 0; stoppedBefore === undefined && groupFailure === undefined; i++) {
      const run = runs[i % runs.length]!
      const seq = run.lastSeq + 1
      const slot = slotOf(run.key, run.meta.pattern, seq, run.meta.slotCount)
      fillRecord(run.buffer, run.key, seq, slot, Math.round((epochMinusPerfMs + previousMs) * 1000))
      const beforeMs = performance.now()
      const offsetBytes = slotOffsetBytes(run.meta.recordSizeBytes, slot)
      try {
        run.file.write(run.buffer, offsetBytes)
        run.file.sync()
      } catch (error) {
        // Never retried: after a failed sync the kernel may have dropped the data and a retry can lie.
        failure = { run, error }
        break
      }
      // The sync covering `seq` has returned. Between here and the ack leaving only what must be:
      run.syncedSeq = seq // so a summary after a failed send counts the record as synced
      trace?.completed(run.key, seq) // lab: first, so ack coverage counts every sync completed before a cut
      channel.ack(run.meta.runId, seq, seq) // on the wire before the next record is written
      run.lastSeq = seq
      if (offsetBytes + run.meta.recordSizeBytes > run.endBytes) run.endBytes = offsetBytes + run.meta.recordSizeBytes
      const afterMs = performance.now()
      previousMs = afterMs
      run.latency.record((afterMs - beforeMs) * 1000)

      if (afterMs >= nextHousekeepingMs) {
        nextHousekeepingMs = afterMs + housekeepingIntervalMs
        channel.poll() // takes in "recorded" reports; throws if the listener refused or went away
        await yieldToEventLoop() // lets a SIGINT/SIGTERM/SIGHUP handler run (see the module header)
        if (signals.received() !== undefined) break
        watched = watchFiles(runs)
        if (watched !== null) break
        if (afterMs >= endMs) break
        if (unrecordedMax(runs, channel) > unrecordedAcksMax) {
          if (!(await waitForListener(runs, channel, timeoutMs, signals.received, (nowMs, n) => showStatus(nowMs, n)))) break
          nextHousekeepingMs = performance.now() + housekeepingIntervalMs
        }
        // Steady, once per run: the campaign's listener waits for it before it plans the cut.
        if (!steadySent && afterMs - startMs >= steadyAfterMs && everyRunRecorded(runs, channel)) {
          steadySent = true
          for (const r of runs) channel.steady(r.meta.runId)
        }
        if (io.statusTty && afterMs >= nextStatusMs) {
          steadyNow ||= afterMs - startMs >= steadyAfterMs && everyRunRecorded(runs, channel)
          showStatus(afterMs)
        }
        previousMs = performance.now() // housekeeping may have waited (for the listener, for the event loop)
      }
    }
  } catch (error) {
    if (!(error instanceof PlugcheckError)) throw error
    lostListener = error
  } finally {
    signals.release()
    trace?.close()
  }
  if (io.statusTty && io.progress === undefined) io.err('\n')

  if (lostListener !== undefined) {
    // Nothing more can reach the listener; what it recorded is what the summary says.
    io.out(summary(options, runs, channel))
    throw lostListener
  }

  if (failure !== undefined) {
    const { run, error } = failure
    const what = error instanceof NativeError ? error.syscall : 'write'
    const message = `${what} failed on ${run.meta.path} after seq ${run.lastSeq} (method ${run.meta.method}): ${describeSystemError(error)}`
    endRuns(runs, channel, 'error', message, timeoutMs)
    io.out(summary(options, runs, channel))
    throw runtimeError(message, 'records acknowledged before the failure still count; run verify after checking the device')
  }

  // Once more before the run is called complete: a change since the last tick counts too.
  watched ??= watchFiles(runs)
  if (watched?.kind === 'changed') {
    const message = watched.message
    endRuns(runs, channel, 'file-changed', message.slice(0, 4000), timeoutMs)
    io.out(summary(options, runs, channel))
    throw runtimeError(
      message,
      'verify will not judge this run (the storage is not to blame for what was done to its file); start a new run and leave its files alone',
    )
  }
  if (watched?.kind === 'unreadable') {
    const message = watched.message
    endRuns(runs, channel, 'error', message, timeoutMs)
    io.out(summary(options, runs, channel))
    throw runtimeError(message, 'records acknowledged before the failure still count; run verify after checking the device')
  }
  if (watched?.kind === 'lost') return storageLost(options, watched, runs, channel, io, timeoutMs)

  const signal = signals.received()
  let recorded = false
  try {
    // A group whose job could not start ends every run as one that stopped before its first record:
    // verify then knows why the group lacks that job's runs (it never announced them).
    const [reason, detail] =
      groupFailure !== undefined
        ? (['error', `could not start: ${groupFailure}`.slice(0, 4000)] as const)
        : signal === undefined
          ? (['duration', undefined] as const)
          : (['interrupted', options.stopBecause?.() ?? `stopped by ${signal}`] as const)
    for (const run of runs) channel.end(run.meta.runId, reason, detail)
    recorded = channel.waitRecorded(new Map(runs.map((r) => [r.meta.runId, r.lastSeq])), timeoutMs)
  } catch (error) {
    io.out(summary(options, runs, channel))
    throw error
  }
  io.out(summary(options, runs, channel))
  if (!recorded)
    throw runtimeError(
      `the listener did not confirm every ack as recorded within ${timeoutMs / 1000} s`,
      'the summary says how many it confirmed; raise --listener-timeout for a busy listener',
    )
  if (groupFailure !== undefined) return exitCodes.runtime // the write's error is the failed job's, said by the main thread
  if (signal !== undefined) {
    if (options.job === undefined) io.err(stoppedLine(signal)) // a group's is said once, by its main thread
    return 128 + signalNumbers[signal]
  }
  return 0
}

/**
 * The storage lost an acknowledged record of our own file while the run was going (file-watch.ts):
 * every run ends saying so, every ack is recorded, the summary printed. Exit 1 when the record was a
 * tested method's: its sync returned and the storage broke that promise, the same proof for which
 * verify exits 1 (and verify, run now, judges it so). A loss of the control's (never synced) record
 * says the storage loses written data while powered, which is no verdict on a method: exit 3.
 */
function storageLost(
  options: WriteOptions,
  lost: Extract<FileFinding, { kind: 'lost' }>,
  runs: ActiveRun[],
  channel: AckChannel,
  io: Io,
  timeoutMs: number,
): number {
  // A listener older than the reason takes the same words as an 'error' end (verify judges both).
  const recorded = endRuns(runs, channel, channel.knowsStorageLost ? 'storage-lost' : 'error', lost.message.slice(0, 4000), timeoutMs)
  io.out(summary(options, runs, channel))
  const unrecorded = recorded ? '' : ` (the listener did not confirm every ack as recorded: the summary says how many it holds)`
  const hint = `no power cut is needed to see it: run ${verifyCommand(options)} now; then test the device before trusting it`
  if (lost.run.meta.method === 'none') throw runtimeError(`${lost.message}${unrecorded}`, hint)
  io.err(`plugcheck: ${lost.message}${unrecorded}\nhint: ${hint}\n`)
  return exitCodes.lossFound
}

/** The listener has reported acks of every run as recorded. */
function everyRunRecorded(runs: readonly ActiveRun[], channel: AckChannel): boolean {
  return runs.every((r) => (channel.recordedThrough.get(r.meta.runId) ?? 0) > 0)
}

function unrecordedMax(runs: readonly ActiveRun[], channel: AckChannel): number {
  let max = 0
  for (const run of runs) max = Math.max(max, run.lastSeq - (channel.recordedThrough.get(run.meta.runId) ?? 0))
  return max
}

/**
 * Flow control: the listener trails by more than unrecordedAcksMax. Wait for its "recorded"
 * reports instead of writing on (or failing); give up only when it records nothing at all for
 * timeoutMs. Returns false when a signal arrived meanwhile; throws when the listener stalls.
 */
async function waitForListener(
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

function progressOf(
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
function drawProgress(io: Io): (progress: WriteProgress) => void {
  let toldToCut = false
  return (p) => {
    io.err(`\r${statusLine(p)}\x1b[K`)
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

function summary(options: WriteOptions, runs: ActiveRun[], channel: AckChannel): string {
  const lines: string[] = []
  for (const run of runs) {
    const m = run.meta
    const recorded = channel.recordedThrough.get(m.runId) ?? 0
    lines.push(
      `run ${m.runId}: ${m.method}${m.direct ? ' --direct' : ''}, ${m.pattern}, ${formatSize(m.recordSizeBytes)} records, ${m.path}`,
    )
    const done = m.method === 'none' ? 'written (never synced: the negative control)' : 'synced'
    const unsent =
      run.syncedSeq > run.lastSeq ? ` (${(run.syncedSeq - run.lastSeq).toLocaleString('en-US')} more ${done}, their ack not sent)` : ''
    lines.push(
      `  ${run.lastSeq.toLocaleString('en-US')} records ${done} and acknowledged${unsent}, ${recorded.toLocaleString('en-US')} recorded by the listener`,
    )
    lines.push(
      `  sync latency p50 ${formatUs(run.latency.quantileUs(0.5))}, p99 ${formatUs(run.latency.quantileUs(0.99))}, max ${formatUs(run.latency.maxUs)}`,
    )
  }
  if (options.job === undefined) lines.push(verifyLine(options)) // a group's follows every job's runs
  return lines.join('\n') + '\n'
}

/** What a write stopped by a signal says once every ack is recorded. */
export function stoppedLine(signal: string): string {
  return `plugcheck: stopped by ${signal}; every ack is recorded at the listener\n`
}

export function formatUs(us: number): string {
  if (!Number.isFinite(us)) return '-'
  return us >= 1000 ? `${(us / 1000).toFixed(us >= 10_000 ? 0 : 1)} ms` : `${Math.round(us)} us`
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

function tryQuietly(fn: () => void): void {
  try {
    fn()
  } catch {
    // the listener may be gone; the failure being reported matters more
  }
}

/** Lab/bench side file: one fixed-size entry per completed sync, written in place so it survives SIGKILL. */
class TraceLog {
  private readonly fd: number
  private readonly entry = Buffer.alloc(traceEntryBytes)
  private offset = 0

  constructor(path: string) {
    this.fd = openSync(path, 'w')
  }

  completed(key: RunKey, seq: number): void {
    key.idBytes.copy(this.entry, 0)
    this.entry.writeDoubleLE(seq, 8)
    this.entry.writeDoubleLE(Number(process.hrtime.bigint()), 16)
    writeSync(this.fd, this.entry, 0, traceEntryBytes, this.offset)
    this.offset += traceEntryBytes
  }

  close(): void {
    closeSync(this.fd)
  }
}
