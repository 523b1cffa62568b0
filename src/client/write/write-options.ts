/**
 * The options of `plugcheck write` and what is checked of them before anything is touched: the flags
 * (methods, sizes, jobs), the data paths they name, and the verify command the trail ends with.
 */
import { dirname } from 'node:path'
import type { Io } from '../../base/io.js'
import type { CampaignTag } from '../../protocol/messages.js'
import { maxGroupRuns } from '../../record/run-id.js'
import { directAlignmentBytes, nativePort } from '../../native/index.js'
import { methodAvailability, type MethodName } from '../../native/registry.js'
import { memberPath } from '../../record/format.js'
import { sectorBytes } from '../../record/records.js'
import type { Pattern, PublishWay } from '../../record/patterns.js'
import { usageError } from '../../base/errors.js'
import { checkDirectSupported, checkFolder, checkReplaceable } from './data-file.js'
import { checkRunDirectory } from './files-run.js'
import { maxKeptFiles } from '../../record/files-layout.js'
import { formatEndpoint, type Endpoint } from '../../protocol/endpoint.js'
import type { EvidenceQuestion } from './evidence.js'
import { quotePath, shellQuote } from '../../base/shell-quote.js'
import type { StopSignal } from './stop-signals.js'

export interface WriteOptions {
  readonly server: Endpoint
  /** Absolute path. */
  readonly file: string
  readonly methods: readonly MethodName[]
  readonly direct: boolean
  readonly recordSizeBytes: number
  readonly sizeBytes: number
  readonly pattern: Pattern
  /** --pattern files only (absent otherwise): --no-dir-sync, --publish, --keep-files (files-run.ts). */
  readonly files?: FilesOptions
  readonly durationS?: number
  readonly token?: string
  /** --token-file, absolute, when the token came from a file: the verify command printed names it. */
  readonly tokenFile?: string
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
  /**
   * Set by `agent`: why its campaign wants the writer to stop (the campaign stopped), or undefined.
   * Read at each housekeeping tick; the runs then end as 'interrupted' with that reason, every ack
   * recorded, and the write exits 3. Never crosses into a job's thread (jobs.ts asks it for the group).
   */
  readonly stopRequest?: () => string | undefined
  /** --json: the write's events as JSON lines on stdout, and nothing else there (write-events.ts). */
  readonly json?: boolean
}

/** How a files run makes its record files; keepFiles absent: as many as --size holds records (as append's slots). */
export interface FilesOptions {
  readonly dirSync: boolean
  readonly publish: PublishWay
  readonly keepFiles?: number
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

/** The command's output, with the write loop's progress when a parent sums it (write --jobs). */
export interface WriteIo extends Io {
  /**
   * Where the loop's progress goes as data, every status interval (write --jobs: each job's, summed
   * by the main thread); without it the loop shows its own (write-status.ts).
   */
  readonly progress?: (progress: WriteProgress) => void
}

/** A write's progress over its runs, every status interval. */
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

/** Checks everything that can be checked before touching the network or the disk (exit 2 on a problem). */
export function validateWriteOptions(options: WriteOptions): void {
  validateWriteFlags(options)
  checkFolder(dirname(options.file))
  for (const path of [...groupDataPaths(options), options.file]) {
    const unsafe = nativePort().unsafeFileName(path)
    if (unsafe !== null) throw usageError(`refusing to write to ${path}: ${unsafe}`, 'give --file another name')
  }
  for (const path of groupDataPaths(options)) {
    const own = options.ownPaths?.has(path) === true
    const reusable = options.force || own
    if (options.pattern === 'files') checkRunDirectory(path, reusable, own)
    else checkReplaceable(path, reusable)
  }
  if (options.direct) checkDirectSupported(dirname(options.file))
}

/** The flags alone (methods, sizes): what `agent` checks at once, before it waits for the listener or looks at the disk. */
export function validateWriteFlags(
  options: Pick<WriteOptions, 'methods' | 'direct' | 'recordSizeBytes' | 'sizeBytes' | 'jobs' | 'pattern' | 'files'>,
): void {
  for (const method of options.methods) {
    const availability = methodAvailability(method)
    if (!availability.available) throw usageError(`method ${method} is not available here: ${availability.reason}`)
  }
  if (new Set(options.methods).size !== options.methods.length) throw usageError('--method lists a method twice')
  const jobs = options.jobs ?? 1
  if (jobs * options.methods.length > maxGroupRuns) {
    throw usageError(
      `--jobs ${jobs} with ${options.methods.length} methods makes ${jobs * options.methods.length} runs; one write makes at most ${maxGroupRuns}`,
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
  if (Math.floor(options.sizeBytes / options.recordSizeBytes) < 2 && options.files?.keepFiles === undefined) {
    throw usageError(`--size ${options.sizeBytes} leaves no room for records of ${options.recordSizeBytes} bytes after the superblock`)
  }
  const keptFiles = options.files?.keepFiles ?? Math.floor(options.sizeBytes / options.recordSizeBytes) - 1
  if (options.pattern === 'files' && keptFiles > maxKeptFiles) {
    throw usageError(
      `--size ${options.sizeBytes} / --record-size ${options.recordSizeBytes} would keep ${keptFiles} record files; a files run keeps at most ${maxKeptFiles}`,
      'give --keep-files N, or a smaller --size',
    )
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
export function jobPlace(options: Pick<WriteOptions, 'job'>): { jobs: number; job: number } {
  return { jobs: options.job?.count ?? 1, job: (options.job?.index ?? 0) + 1 }
}

/** Every data file of the write: every job's (a job's own when called inside it). */
export function groupDataPaths(options: Pick<WriteOptions, 'file' | 'methods' | 'job' | 'jobs'>): string[] {
  const count = options.jobs ?? 1
  if (options.job !== undefined || count === 1) return dataPaths(options)
  return Array.from({ length: count }, (_, index) => dataPaths({ ...options, job: { index, count, groupId: '', groupKey: '' } })).flat()
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

/**
 * The trail's last line: what to run after the cut. A write that ended by itself (--duration) or was
 * stopped (a signal, its campaign) was cut by nothing: its line says to check it now instead.
 */
export function verifyLine(options: Pick<WriteOptions, 'server' | 'file' | 'token' | 'tokenFile'>, endedBy?: string): string {
  const when = endedBy === 'duration' || endedBy === 'interrupted' ? 'to check it now' : 'after a power cut and reboot'
  return `${when}: ${verifyCommand(options)}`
}

/** The command to paste after the reboot: the path shell-quoted, the token named but never printed (its file kept when it came from one). */
export function verifyCommand(options: Pick<WriteOptions, 'server' | 'file' | 'token' | 'tokenFile'>): string {
  const token = tokenFlag(options)
  return `plugcheck verify --server ${shellQuote(formatEndpoint(options.server))} --file ${quotePath(options.file)}${token}`
}

/** The command that lists what the listener holds (the runs and their recorded acks). */
export function runsCommand(options: Pick<WriteOptions, 'server' | 'token' | 'tokenFile'>): string {
  return `plugcheck runs --server ${shellQuote(formatEndpoint(options.server))}${tokenFlag(options)}`
}

/** How a printed command passes the token: the --token-file given, or --token with a placeholder (never the token). */
function tokenFlag(options: { readonly token?: string; readonly tokenFile?: string }): string {
  if (options.token === undefined) return ''
  return options.tokenFile === undefined ? " --token 'YOUR-TOKEN'" : ` --token-file ${quotePath(options.tokenFile)}`
}
