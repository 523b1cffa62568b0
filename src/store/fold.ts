/**
 * The fold (checkpoint) of a journal segment into the per-run files: each run's commits from the
 * segment are written to runs/<id>/acks.log at the offset the journal gave them (`at`), as the exact
 * frames the journal holds, in one write per run; a run announced in the segment gets its directory,
 * its log (header, then its commits) and its meta.msgpack (temp file, fsync, rename). Every touched
 * file is fsynced and every touched directory too, before the caller deletes the segment.
 *
 * Why this never loses a recorded ack, nor reads fewer: a commit was reported recorded only once the
 * round holding it was fdatasynced in the journal, and a segment is deleted only after its fold was
 * fsynced. So a recorded commit is always in the journal or durable in its run's log. The first
 * commit of a run in the remaining journal says, by its `at`, where the durable part of the run's log
 * ends: every fold before it was fsynced before its segment went. Bytes past `at` can only be a fold
 * cut short by a crash (unfsynced): they are cut off and written again from the journal. A log shorter
 * than `at` lost fsynced bytes: damage, a refusal naming it.
 */
import { constants as fsConstants } from 'node:fs'
import { mkdir, open, rename, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { syncDirectoryAsync } from '../base/directory-sync.js'
import { logHeader } from './ack-log.js'
import { runtimeError } from '../base/errors.js'

/** One run's part of a segment: its announcement (meta.msgpack's bytes) if it was announced there, and its commits from byte `at` on. */
export interface FoldRun {
  readonly runId: string
  readonly meta?: Buffer
  readonly at: number
  readonly frames: Buffer[]
}

/** Runs whose files may be in the threadpool at once (it has 4 threads; rounds need one). */
export const foldLanes = 2

export interface FoldCounters {
  openLogs: number
}

export async function foldRuns(runsDir: string, runs: readonly FoldRun[], counters: FoldCounters): Promise<void> {
  const created: string[] = []
  let next = 0
  const lane = async (): Promise<void> => {
    while (next < runs.length) {
      const run = runs[next++]!
      if (run.meta !== undefined) {
        await createRunFiles(join(runsDir, run.runId), run, counters)
        created.push(join(runsDir, run.runId))
      } else {
        await appendCommits(join(runsDir, run.runId, 'acks.log'), run, counters)
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(foldLanes, runs.length) }, lane))
  for (let i = 0; i < created.length; i += foldLanes)
    await Promise.all(created.slice(i, i + foldLanes).map((dir) => syncDirectoryAsync(dir)))
  if (created.length > 0) await syncDirectoryAsync(runsDir)
}

/** A run announced in the segment: its log written whole (header first), then meta.msgpack, which makes the run exist in runs/. */
async function createRunFiles(dir: string, run: FoldRun, counters: FoldCounters): Promise<void> {
  await mkdir(dir, { recursive: true })
  const header = logHeader(run.runId)
  if (run.at !== header.length) throw new Error(`run ${run.runId}: its first commit is at byte ${run.at}, not after its log's header`)
  const log = Buffer.concat([header, ...run.frames])
  await checkFoldCutShort(join(dir, 'acks.log'), 0, log)
  await writeFile(join(dir, 'acks.log'), fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_TRUNC, log, 0, counters)
  await writeFile(join(dir, 'meta.msgpack.tmp'), fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_TRUNC, run.meta!, 0, counters)
  await rename(join(dir, 'meta.msgpack.tmp'), join(dir, 'meta.msgpack'))
}

/** Commits of a run already on disk, at the offset the journal gave them (bytes past it were never fsynced). */
async function appendCommits(path: string, run: FoldRun, counters: FoldCounters): Promise<void> {
  const file = await open(path, fsConstants.O_WRONLY | fsConstants.O_NONBLOCK)
  counters.openLogs++
  try {
    const stats = await file.stat()
    if (!stats.isFile()) throw new Error(`${path} is not a regular file`)
    if (stats.size < run.at) throw logShorterThanJournal(path, stats.size, run.at)
    const frames = Buffer.concat(run.frames)
    if (stats.size > run.at) {
      await checkFoldCutShort(path, run.at, frames)
      await file.truncate(run.at)
    }
    await writeAll(file, frames, run.at, path)
    await file.datasync()
  } finally {
    counters.openLogs--
    await file.close().catch(() => undefined)
  }
}

async function writeFile(path: string, flags: number, bytes: Buffer, position: number, counters: FoldCounters): Promise<void> {
  const file = await open(path, flags, 0o644)
  counters.openLogs++
  try {
    await writeAll(file, bytes, position, path)
    await file.sync()
  } finally {
    counters.openLogs--
    await file.close().catch(() => undefined)
  }
}

async function writeAll(file: Awaited<ReturnType<typeof open>>, bytes: Buffer, position: number, path: string): Promise<void> {
  const { bytesWritten } = await file.write(bytes, 0, bytes.length, position)
  if (bytesWritten !== bytes.length) {
    throw Object.assign(new Error(`short write to ${path}: ${bytesWritten} of ${bytes.length} bytes (disk full?)`), { code: 'ENOSPC' })
  }
}

/** A run's log shorter than where the journal's first commit of it goes: fsynced bytes are gone. */
export function logShorterThanJournal(path: string, sizeBytes: number, atByte: number): Error {
  return runtimeError(
    `could not read ${path}: it is ${sizeBytes} bytes, but the journal holds the run's next commit for byte ${atByte}: fsynced acks are missing from the log`,
    "the listener refuses to answer from a damaged ack log (a run judged with fewer acks than were recorded could turn a FAIL into a PASS); restore the file, or move the run's directory out of runs/ if the run does not matter",
  )
}

/**
 * Bytes of a log past where the fold writes can only be this fold cut short by a crash (unfsynced:
 * whatever the file system kept of them), never more than it writes. A longer log means the journal
 * is not the log's latest history: a refusal, never a truncation of recorded acks.
 */
async function checkFoldCutShort(path: string, atByte: number, writes: Buffer): Promise<void> {
  let sizeBytes: number
  try {
    sizeBytes = (await stat(path)).size
  } catch (error) {
    if ((error as { code?: string }).code === 'ENOENT') return
    throw error
  }
  if (sizeBytes > atByte + writes.length) throw logNotFromJournal(path, sizeBytes, atByte + writes.length)
}

function logNotFromJournal(path: string, sizeBytes: number, journalEndByte: number): Error {
  const what = `it is ${sizeBytes} bytes, more than the journal's commits of the run (they end at byte ${journalEndByte})`
  return runtimeError(
    `could not fold the journal into ${path}: ${what}: the journal is older than the log (a segment from an earlier state of the directory)`,
    "the listener refuses to overwrite an ack log with an older journal (recorded acks would be lost); restore the directory's journal/ from the same copy as its runs/, or move the segment out of journal/",
  )
}
