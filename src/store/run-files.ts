/**
 * A run's small files as the ack store reads and writes them: meta.msgpack and verdict.msgpack
 * (schemas, sealed-file.ts bodies in msgpack, bounded reads), the refusals that name a damaged file,
 * and a log's size and stamp. Files are opened with O_NONBLOCK and must be regular files: a FIFO or
 * device planted in the directory cannot hang the listener.
 */
import { constants as fsConstants, fsync, stat as statCallback, writeSync } from 'node:fs'
import { open, readdir, rm, stat, type FileHandle } from 'node:fs/promises'
import { promisify } from 'node:util'
import { join } from 'node:path'
import { Packr } from 'msgpackr'
import { z } from 'zod'
import { runMetaSchema } from '../record/format.js'
import { runIdSchema } from '../record/run-id.js'
import { campaignTagSchema, epochMsSchema, storedVerdictSchema, writerEnvSchema } from '../protocol/messages.js'
import { describeSystemError, runtimeError } from '../base/errors.js'
import { replayLog, type LogReplay } from './ack-log-reader.js'
import { unseal, type SealedKind } from './sealed-file.js'
import type { RunOrigin } from './run-state.js'

/** meta.msgpack is a few KiB (a fingerprint included); anything over this is damage. */
export const maxMetaFileBytes = 1024 * 1024
export const packr = new Packr({ useRecords: false, int64AsType: 'number', mapsAsObjects: true })

export const metaFileSchema = z.object({
  meta: runMetaSchema,
  announcedMs: epochMsSchema,
  /** Announcement order on this listener (absent in meta files of older listeners). */
  announceIndex: z.number().int().positive().max(Number.MAX_SAFE_INTEGER).optional(),
  peer: z.string().max(64).optional(),
  writer: writerEnvSchema.optional(),
  /** The listener required a token and the writer presented it. */
  authenticated: z.boolean().optional(),
  /** The campaign cycle the run belongs to (absent outside campaigns and in older directories). */
  campaign: campaignTagSchema.optional(),
})

/** verdict.msgpack: what a verifier reported for the run. */
export const verdictFileSchema = z.object({ runId: runIdSchema, result: storedVerdictSchema })
/** A verdict with a fingerprint is tens of KiB at most; anything over this is damage. */
export const maxVerdictFileBytes = 1024 * 1024

export const fsyncAsync = promisify(fsync)

/** Writes every byte or throws: a short write (the disk filled) is a failure, not a success. */
export function writeAllSync(fd: number, bytes: Buffer, path: string): void {
  const bytesWritten = writeSync(fd, bytes, 0, bytes.length)
  if (bytesWritten !== bytes.length) {
    throw Object.assign(new Error(`short write to ${path}: ${bytesWritten} of ${bytes.length} bytes (disk full?)`), { code: 'ENOSPC' })
  }
}

/** Opens for reading without blocking: a FIFO planted in the directory must not hang the listener. */
const readFlags = fsConstants.O_RDONLY | fsConstants.O_NONBLOCK

/**
 * A whole small file, or 'missing' (ENOENT), 'not-a-directory' (ENOTDIR: its parent is a file),
 * 'not-a-file' or 'too-large'; any other error is a refusal.
 */
export async function readBounded(
  path: string,
  maxBytes: number,
): Promise<Buffer | 'missing' | 'not-a-directory' | 'not-a-file' | 'too-large'> {
  let file: FileHandle
  try {
    file = await open(path, readFlags)
  } catch (error) {
    const code = (error as { code?: string }).code
    if (code === 'ENOENT') return 'missing'
    if (code === 'ENOTDIR') return 'not-a-directory'
    throw unreadable(path, error)
  }
  try {
    const stats = await file.stat()
    if (!stats.isFile()) return 'not-a-file'
    const size = stats.size
    if (size > maxBytes) return 'too-large'
    const bytes = Buffer.alloc(size)
    let filled = 0
    while (filled < size) {
      const { bytesRead } = await file.read(bytes, filled, size - filled, filled)
      if (bytesRead === 0) break
      filled += bytesRead
    }
    return bytes.subarray(0, filled)
  } catch (error) {
    throw unreadable(path, error)
  } finally {
    await file.close().catch(() => undefined)
  }
}

/** A run's metadata that exists (or must exist) but cannot be used: a refusal, never a run left out. */
export function damagedMeta(path: string, what: string): Error {
  return runtimeError(
    `could not read ${path}: ${what}`,
    "a run left out could turn a FAIL into a PASS, so nothing is answered without it; restore the file, or move the run's directory out of runs/ if the run does not matter",
  )
}

/** A run's ack log that must hold more than it does: a refusal, never a run judged with fewer acks. */
export function damagedLog(path: string, what: string): Error {
  return runtimeError(
    `could not read ${path}: ${what}`,
    "the listener refuses to answer from a damaged ack log (a run judged with fewer acks than were recorded could turn a FAIL into a PASS); restore the file, or move the run's directory out of runs/ if the run does not matter",
  )
}

/** Why a log of a run whose meta.msgpack is sealed (this version's) is damage: it lacks the header written before that file. */
export function logWithoutHeader(replayed: LogReplay): string {
  const lacks = "but the run's meta.msgpack, written only after the log's header was fsynced, is there"
  if (replayed.totalBytes === 0) return `it is missing or empty, ${lacks}`
  if (replayed.format === 1) return `it has no header (entries of the previous format), ${lacks}`
  return `its header is not there (${replayed.totalBytes} bytes that are not a whole entry), ${lacks}`
}

/** A schema failure in plain words: which field, and what is wrong with it (the first problem). */
export function describeInvalid(error: z.ZodError): string {
  const issue = error.issues[0]
  if (issue === undefined) return 'it is not valid'
  const field = issue.path.length === 0 ? undefined : issue.path.join('.')
  if (issue.code === 'invalid_type' && /received undefined$/.test(issue.message)) return `field ${field ?? '(top level)'} is missing`
  const message = issue.message.charAt(0).toLowerCase() + issue.message.slice(1)
  return field === undefined ? `it is not a run's metadata (${message})` : `field ${field} is not valid (${message})`
}

function unreadable(path: string, error: unknown): Error {
  return runtimeError(
    `could not read ${path}: ${describeSystemError(error)}`,
    'the listener refuses to answer from an ack log it cannot read in full',
  )
}

/** How many items a log holds, for a run directory without metadata (any damage in the log is a refusal too). */
export async function itemsInLog(path: string, runId: string): Promise<{ items: number; totalBytes: number }> {
  let items = 0
  const { totalBytes } = await replayLog(path, runId, () => void items++)
  return { items, totalBytes }
}

/** The warning for a torn tail: what was ignored, where, and why that is safe (and when it would not be). */
export function tornTailWarning(runId: string, path: string, tail: NonNullable<LogReplay['tornTail']>): string {
  return (
    `run ${runId}: ignored ${tail.bytes} bytes of a torn ack log tail at byte ${tail.atByte} of ${path} (${tail.what}): ` +
    'the last commit, cut short by a crash, was never reported as recorded (if the listener did not crash, its last entry is damaged)'
  )
}

/** A file's body (sealed-file.ts) decoded from msgpack, or what is wrong with it. */
export function unsealed(
  kind: SealedKind,
  bytes: Buffer,
): { readonly value: unknown; readonly sealed: boolean } | { readonly problem: string } {
  const file = unseal(kind, bytes)
  if (file.kind === 'damaged') return { problem: `${file.problem} (damaged)` }
  try {
    return { value: packr.unpack(file.body), sealed: file.kind === 'sealed' }
  } catch {
    return { problem: `its ${bytes.length} bytes are not valid msgpack` }
  }
}

export function originOf(metaFile: z.infer<typeof metaFileSchema>): RunOrigin {
  return {
    ...(metaFile.peer === undefined ? {} : { peer: metaFile.peer }),
    ...(metaFile.writer === undefined ? {} : { writer: metaFile.writer }),
    ...(metaFile.authenticated === undefined ? {} : { authenticated: metaFile.authenticated }),
    ...(metaFile.campaign === undefined ? {} : { campaign: metaFile.campaign }),
  }
}

/** Directories of pruned runs, renamed out of the runs before their deletion (a crash may leave some). */
export async function removePruned(runsDir: string): Promise<void> {
  for (const name of await readdir(runsDir))
    if (name.startsWith('.pruned-')) await rm(join(runsDir, name), { recursive: true, force: true })
}

/** A run log's size (0 when missing: replay then says what is wrong). */
export async function fileSize(path: string): Promise<number> {
  try {
    return (await statAsync(path)).size
  } catch (error) {
    if ((error as { code?: string }).code === 'ENOENT') return 0
    throw unreadable(path, error)
  }
}
const statAsync = promisify(statCallback)

/**
 * A log's inode, size, mtime and ctime (ns): any write to it changes them (ctime cannot be set back
 * but by the clock), so an unchanged stamp says its bytes are the ones read. Undefined when it cannot
 * be stat()ed (the read that follows says why). On a file system with coarse timestamps, a write of the
 * same size within one tick of the last one keeps the stamp: the background check and a restart still find it.
 */
export async function logStamp(path: string): Promise<string | undefined> {
  try {
    const s = await stat(path, { bigint: true })
    return `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`
  } catch {
    return undefined
  }
}
