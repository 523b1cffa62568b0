/**
 * The start of a write's runs, once the listener has answered: each run is announced, its line of the
 * trail printed, then its data file created and opened. The trail goes to stdout with a synchronous
 * write before the loop starts (stdout to a pipe is asynchronous in Node and would still be queued
 * when a SIGKILL lands). A run announced but never started ends as 'error' with the cause.
 */
import { randomBytes } from 'node:crypto'
import { openSync, closeSync, fstatSync } from 'node:fs'
import { hostname } from 'node:os'
import { dirname } from 'node:path'
import type { Io } from '../../base/io.js'
import type { WriterEnv } from '../../protocol/messages.js'
import { NativeError, directAlignmentBytes, nativePort, type DataFile, type FileLock } from '../../native/index.js'
import type { MethodName } from '../../native/registry.js'
import { encodeSuperblock, type RunMeta } from '../../record/format.js'
import { runKey, slotOffsetBytes } from '../../record/records.js'
import { describeSystemError, runtimeError, usageError } from '../../base/errors.js'
import type { AckChannel } from './ack-channel.js'
import { createDataFile, directFlag } from './data-file.js'
import { createRunDirectory, lockedFileOf, openFilesRun } from './files-run.js'
import { fillReporter, type FillReportOptions } from './fill-progress.js'
import { patternText } from './write-events.js'
import { superblockHeadBytes } from './file-watch.js'
import { epochAt, type TimeBase } from '../run-clock.js'
import { LatencyHistogram } from '../../base/latency.js'
import type { ActiveRun } from './active-run.js'
import { jobPlace, type WriteOptions } from './write-options.js'

/** A memory file system keeps nothing through a power cut: the run can only rehearse the workflow, and is told so. */
export function warnIfInMemory(writer: WriterEnv, file: string, io: Io): void {
  const fileSystem = writer.fingerprint?.target
  if (fileSystem?.inMemory === true) {
    io.err(
      `plugcheck: warning: ${dirname(file)} is on ${fileSystem.fileSystem.type}, in memory: nothing there survives a power cut, so this run can only rehearse the workflow\n`,
    )
  }
}

/** What starting the runs needs; runs and locks are filled in place, so the caller closes what was opened however the start ends. */
export interface RunStart {
  readonly options: WriteOptions
  readonly channel: AckChannel
  readonly writer: WriterEnv
  readonly clock: TimeBase
  readonly paths: readonly string[]
  /** The existing files' locks, one per path: each is replaced by its new file's. */
  readonly locks: (FileLock | null)[]
  readonly runs: ActiveRun[]
  /** Says the run is announced, before its file is created: the trail's line, or its event (writer.ts). */
  readonly announced: (meta: RunMeta) => void
  /** Where the fill of an overwrite run's file is reported (fill-progress.ts). */
  readonly io: Io
  /** Whether a stop signal came: it cuts an overwrite file's zero fill short (data-file.ts createDataFile). */
  readonly stopped?: () => boolean
}

/** What the report of a new file's zero fill needs: the file, its size when it is filled (overwrite), and whether a group's job fills it. */
function fillReport(options: WriteOptions, meta: RunMeta): FillReportOptions {
  const totalBytes = meta.pattern === 'overwrite' ? slotOffsetBytes(meta.recordSizeBytes, meta.slotCount) : 0
  return { path: meta.path, totalBytes, grouped: options.job !== undefined }
}

/** What every run of the write shares. */
interface RunGroup {
  readonly groupId: string
  readonly host: string
  readonly slotCount: number
  readonly clock: TimeBase
}

/** Announces each method's run, then creates and opens its file, in method order. */
export async function startRuns(start: RunStart): Promise<void> {
  const { options, channel, writer, paths, locks, runs, announced: tell, io } = start
  const announced: RunMeta[] = []
  const groupId = options.job?.groupId ?? randomBytes(8).toString('hex')
  const host = hostname()
  const slotCount = options.files?.keepFiles ?? Math.floor(options.sizeBytes / options.recordSizeBytes) - 1
  try {
    for (const [i, method] of options.methods.entries()) {
      const meta = newRunMeta(options, { groupId, host, slotCount, clock: start.clock }, method, paths[i]!)
      // Announce first: a run the listener knows with no acks can never be judged lost, while a file
      // replaced before its run was announced would make verify judge the previous run against it.
      channel.announce(meta, writer, options.campaign, options.job?.groupKey)
      announced.push(meta)
      tell(meta)
      // The new file's lock replaces the old file's: the old inode is no longer at the path.
      const newLock =
        meta.pattern === 'files'
          ? await createRunDirectory(
              meta,
              locks[i]!,
              options.force || options.ownPaths?.has(meta.path) === true,
              options.ownPaths?.has(meta.path) === true,
            )
          : await createDataFile(meta, locks[i]!, fillReporter(io, fillReport(options, meta)), start.stopped)
      locks[i]?.release()
      locks[i] = newLock
      runs.push(openRun(meta, newLock))
    }
  } catch (error) {
    await endUnstarted(options, channel, announced, error)
    throw error
  }
}

/** The trail's line for a run announced (stdout, but with --json). */
export function trailLine(meta: RunMeta): string {
  return `run ${meta.runId}: ${meta.method}${meta.direct ? ' --direct' : ''}, ${patternText(meta)}, ${meta.path}\n`
}

/** One method's run: a new id, in the write's group, stamped with the run's time base. */
function newRunMeta(options: WriteOptions, group: RunGroup, method: MethodName, path: string): RunMeta {
  return {
    runId: randomBytes(8).toString('hex'),
    groupId: group.groupId,
    method,
    direct: options.direct,
    pattern: options.pattern,
    recordSizeBytes: options.recordSizeBytes,
    slotCount: group.slotCount,
    host: group.host,
    path,
    requestedPath: options.file,
    createdMs: Math.floor(epochAt(group.clock)),
    // The group's plan in every run: verify names a member the listener lost.
    member: { ...jobPlace(options), methods: [...options.methods] },
    ...(options.files === undefined ? {} : { files: { dirSync: options.files.dirSync, publish: options.files.publish } }),
  }
}

/**
 * The run's file opened for its method (a files run: its directory), with a second descriptor the
 * watch over the file reads through (file-watch.ts; a files run's superblock).
 */
function openRun(meta: RunMeta, newLock: FileLock): ActiveRun {
  const checkFd = openSync(lockedFileOf(meta.pattern, meta.path), 'r')
  let records
  try {
    records = meta.pattern === 'files' ? openFilesRun(meta) : null
  } catch (error) {
    closeSync(checkFd)
    throw error
  }
  return {
    meta,
    key: runKey(meta.runId),
    buffer: nativePort().alignedBuffer(meta.recordSizeBytes, directAlignmentBytes),
    file: records === null ? openForMethod(meta) : null,
    records,
    identity: { dev: newLock.dev, ino: newLock.ino },
    endBytes: meta.recordSizeBytes,
    allocatedAtStartBytes: allocatedBytes(checkFd),
    superblockHead: encodeSuperblock(meta).subarray(0, superblockHeadBytes),
    checkFd,
    syncedSeq: 0,
    lastSeq: 0,
    latency: new LatencyHistogram(),
  }
}

/**
 * Announced runs that never reached their first record end as 'error' with the cause, so verify
 * knows the run stopped before writing (its file may never have been created) and the listener
 * does not wait for it as a vanished writer.
 */
async function endUnstarted(options: WriteOptions, channel: AckChannel, announced: readonly RunMeta[], error: unknown): Promise<void> {
  const detail = `could not start: ${error instanceof Error ? error.message : String(error)}`
  for (const meta of announced) tryQuietly(() => channel.end(meta.runId, 'error', detail.slice(0, 4000)))
  await options.startBarrier?.(error instanceof Error ? error.message : String(error)) // the connection stays open until the group's other jobs have joined
}

/** However the write ended: every run's descriptors, the connection, the locks. */
export function closeAll(runs: readonly ActiveRun[], channel: AckChannel | undefined, locks: readonly (FileLock | null)[]): void {
  for (const run of runs) {
    run.file?.close()
    run.records?.directory.close()
    closeSync(run.checkFd)
  }
  channel?.close()
  // Releasing the locks; exit would too.
  for (const lock of locks) lock?.release()
}

/** What the file system has allocated to the file, at most its size (file-watch.ts). */
function allocatedBytes(fd: number): number {
  const stats = fstatSync(fd)
  return Math.min(stats.blocks * 512, stats.size)
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

function tryQuietly(fn: () => void): void {
  try {
    fn()
  } catch {
    // the listener may be gone; the failure being reported matters more
  }
}
