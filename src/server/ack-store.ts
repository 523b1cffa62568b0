/**
 * The listener's durable memory: one directory per run under <dir>/runs/<runId>/ holding
 *   meta.msgpack  the run's metadata, its announcement time, the peer address it came from and the
 *                 writer's environment; written to a temp file, fsynced, renamed, directory fsynced
 *   acks.log      append-only entries, made durable by group commit (one fdatasync covers every
 *                 entry queued while the previous fdatasync ran)
 *
 * acks.log entry:  [u32 LE body length][u64 LE xxh64 of body][body: msgpack LogEntry]
 * Fault model: the listener can be killed at any moment and its disk can fill. A torn or damaged tail
 * entry is ignored at replay (it was never reported as recorded: "recorded" is sent only after its
 * write returned every byte and its fdatasync returned). Replay streams the log in chunks (a log of
 * any size replays), keeps the valid prefix (entries that check out: checksum, schema, seqs contiguous
 * from 1, plausible for the time since announcement, real times), and turns any read error other than
 * a missing file into a refusal: fewer acks than were recorded would turn a FAIL into a PASS. Ack
 * times are stamped monotonic per run (never before the announcement or the previous ack), so a clock
 * stepped back cannot make a run's own log look implausible.
 * A short write, ENOSPC or a failed fdatasync stops that run's acks for good (never retried).
 *
 * File descriptors: a run's log is open only while its writer may still send acks; it is closed
 * once the run ended or its writer disconnected (a 'vanished' end is logged then), reopened on demand.
 * Event loop and threadpool: the listener's main thread may be saturated by acks, and every async fs
 * call costs one trip through the event loop. So the quick metadata and page-cache calls (mkdir, open,
 * write, rename, close) are synchronous, and only the syncs go to the libuv threadpool (4 threads):
 * an announcement costs two trips (fsync the metadata; then fsync log, run directory and runs/ at
 * once), and group commit keeps at most commitLanes fdatasyncs in the threadpool, so an announcement
 * always finds a thread.
 *
 * In memory a run's acks are spans, not one entry per seq: consecutive seqs received within
 * spanWindowMs of each other share a span, so the time window of any lost seq is known to that
 * precision while a run of hours stays small.
 */
import { xxh64 } from '@node-rs/xxhash'
import { EventEmitter } from 'node:events'
import { closeSync, fdatasync, fsync, mkdirSync, openSync, renameSync, writeSync } from 'node:fs'
import { open, readdir, type FileHandle } from 'node:fs/promises'
import { promisify } from 'node:util'
import { join } from 'node:path'
import { Packr } from 'msgpackr'
import { z } from 'zod'
import type { RunMeta } from '../record/format.js'
import { runMetaSchema } from '../record/format.js'
import { epochMsSchema, maxClaims, maxPlausibleSeq, writerEnvSchema, type AckSpan, type Claim, type StoredRun, type WriterEnv } from '../protocol/messages.js'
import { describeSystemError, runtimeError } from '../errors.js'

export const spanWindowMs = 100
const entryHeaderBytes = 12
/** No entry the listener writes comes near this (an end's detail is at most 4 KiB); a longer length is damage. */
const maxEntryBodyBytes = 64 * 1024
/** Replay reads the log in chunks of this size. */
const replayChunkBytes = 1024 * 1024
/** meta.msgpack is a few KiB (a fingerprint included); anything over this is damage. */
const maxMetaFileBytes = 1024 * 1024
/** Runs whose write+fdatasync may be in the threadpool at once (it has 4 threads). */
export const commitLanes = 2
/** A run's acks may be stamped up to this long before its announcement (clock steps). */
const clockSkewMs = 60_000
const packr = new Packr({ useRecords: false, int64AsType: 'number', mapsAsObjects: true })

const logEntrySchema = z.discriminatedUnion('k', [
  z.object({
    k: z.literal('ack'),
    fromSeq: z.number().int().positive().max(Number.MAX_SAFE_INTEGER),
    toSeq: z.number().int().positive().max(Number.MAX_SAFE_INTEGER),
    firstMs: epochMsSchema,
    lastMs: epochMsSchema,
  }),
  z.object({ k: z.literal('end'), reason: z.enum(['duration', 'interrupted', 'error', 'vanished']), detail: z.string().max(4096).optional(), atMs: epochMsSchema }),
])
type LogEntry = z.infer<typeof logEntrySchema>

const metaFileSchema = z.object({
  meta: runMetaSchema,
  announcedMs: epochMsSchema,
  peer: z.string().max(64).optional(),
  writer: writerEnvSchema.optional(),
})

type EndReason = 'duration' | 'interrupted' | 'error' | 'vanished'

/** Who announced a run: the peer address the listener saw and the writer's environment. */
export interface RunOrigin {
  readonly peer?: string
  readonly writer?: WriterEnv
}

interface RunState {
  readonly meta: RunMeta
  readonly announcedMs: number
  readonly origin: RunOrigin
  readonly spans: AckSpan[]
  end?: { reason: EndReason; detail?: string; atMs: number }
  /** Highest seq accepted (in memory, maybe not yet durable). */
  lastAckedSeq: number
  /** The ack log's descriptor: open only while the run may still take entries; reopened on demand. */
  log?: number
  /** No more entries will come (ended, writer gone, or read back at startup): close the log when idle. */
  retired: boolean
  /** createRun is still making the run's directory and files. */
  creating?: boolean
  /** Set when a write or fdatasync failed: the run takes nothing more, ever. */
  failed?: Error
  /** Entries accepted but not yet written (consecutive acks share one), and the highest seq they cover. */
  pendingEntries: LogEntry[]
  pendingThroughSeq: number
  durableThroughSeq: number
}

export class StorageError extends Error {}

export interface AckStoreEvents {
  /** An ack was accepted (in memory; durable at the next 'recorded'). For instrumentation. */
  accepted: [runId: string, fromSeq: number, toSeq: number]
  recorded: [runId: string, throughSeq: number]
  failed: [runId: string, error: Error]
}

export class AckStore extends EventEmitter<AckStoreEvents> {
  private readonly runs = new Map<string, RunState>()
  /** Runs with entries to write or a log to close, for the next group commit round. */
  private readonly dirty = new Set<RunState>()
  private committing: Promise<void> | undefined
  readonly warnings: string[] = []

  private constructor(readonly dir: string) {
    super()
  }

  /** Opens (creating if needed) a store directory and replays every run in it. */
  static async open(dir: string): Promise<AckStore> {
    mkdirSync(join(dir, 'runs'), { recursive: true })
    return AckStore.load(dir)
  }

  /**
   * Reads a store directory without changing it (verify --acks); throws ENOENT when it has no runs/,
   * and a runtime PlugcheckError naming the file when a run's files cannot be read.
   */
  static async load(dir: string): Promise<AckStore> {
    const store = new AckStore(dir)
    for (const runId of (await readdir(join(dir, 'runs'))).sort()) {
      if (!/^[0-9a-f]{16}$/.test(runId)) continue
      await store.replay(runId)
    }
    return store
  }

  private runDir(runId: string): string {
    return join(this.dir, 'runs', runId)
  }

  private async replay(runId: string): Promise<void> {
    const metaPath = join(this.runDir(runId), 'meta.msgpack')
    const metaBytes = await readBounded(metaPath, maxMetaFileBytes)
    if (metaBytes === 'missing') {
      // The listener died before the metadata was in place: the run was never confirmed to its writer.
      this.warnings.push(`run ${runId}: no metadata (its announcement never completed), skipped`)
      return
    }
    let metaFile: z.infer<typeof metaFileSchema>
    try {
      if (metaBytes === 'too-large') throw new Error(`${metaPath} is over ${maxMetaFileBytes} bytes`)
      metaFile = metaFileSchema.parse(packr.unpack(metaBytes))
      if (metaFile.meta.runId !== runId) throw new Error(`it names run ${metaFile.meta.runId}`)
    } catch (error) {
      this.warnings.push(`run ${runId}: unreadable metadata, skipped (${(error as Error).message.split('\n')[0]})`)
      return
    }
    const run = newRunState(metaFile.meta, metaFile.announcedMs, {
      ...(metaFile.peer === undefined ? {} : { peer: metaFile.peer }),
      ...(metaFile.writer === undefined ? {} : { writer: metaFile.writer }),
    })
    run.retired = true
    const logPath = join(this.runDir(runId), 'acks.log')
    const { validBytes, totalBytes, problem } = await replayLog(logPath, run)
    if (validBytes < totalBytes) {
      this.warnings.push(`run ${runId}: ignored ${totalBytes - validBytes} bytes of ${problem} ack log tail (never reported as recorded)`)
    }
    run.durableThroughSeq = run.lastAckedSeq
    this.runs.set(runId, run)
  }

  hasRun(runId: string): boolean {
    return this.runs.has(runId)
  }

  lastAckedSeq(runId: string): number {
    return this.runs.get(runId)?.lastAckedSeq ?? 0
  }

  /** What the listener needs to judge a new announcement or an ack against a known run. */
  runInfo(runId: string): { meta: RunMeta; announcedMs: number; origin: RunOrigin; ended: boolean } | undefined {
    const run = this.runs.get(runId)
    return run === undefined ? undefined : { meta: run.meta, announcedMs: run.announcedMs, origin: run.origin, ended: run.end !== undefined }
  }

  /** Makes the run's metadata durable before the writer is told to start. */
  async createRun(meta: RunMeta, announcedMs: number, origin: RunOrigin = {}): Promise<void> {
    if (this.runs.has(meta.runId)) throw new StorageError(`run ${meta.runId} already exists`)
    if (!epochMsSchema.safeParse(announcedMs).success) {
      // Replay and verify refuse such times; storing them would lose the run's acks later.
      throw new StorageError(`the listener's clock reads ${new Date(announcedMs).toISOString()}, not a real date: set it before announcing runs`)
    }
    const run = newRunState(meta, announcedMs, origin)
    run.creating = true
    this.runs.set(meta.runId, run) // reserve the id at once: a second announcement must not race us
    let log: number | undefined
    try {
      const dir = this.runDir(meta.runId)
      mkdirSync(dir)
      const tmp = join(dir, 'meta.msgpack.tmp')
      const file = openSync(tmp, 'wx')
      try {
        writeAllSync(file, packr.pack({ meta, announcedMs, ...origin }), tmp)
        await fsyncAsync(file)
      } finally {
        closeSync(file)
      }
      renameSync(tmp, join(dir, 'meta.msgpack'))
      log = openSync(join(dir, 'acks.log'), 'a')
      // The log's inode and both directory entries (meta.msgpack and acks.log; the run's directory) at once.
      await Promise.all([fsyncAsync(log), syncDirectory(dir), syncDirectory(join(this.dir, 'runs'))])
    } catch (error) {
      this.runs.delete(meta.runId)
      if (log !== undefined) closeQuietly(log)
      throw new StorageError(`could not store run ${meta.runId}: ${describeSystemError(error)}`)
    }
    run.log = log
    run.creating = false
    // An end (or the writer's disconnect) may have come while the announcement was being stored.
    if (run.pendingEntries.length > 0 || run.retired) this.markDirty(run)
  }

  /**
   * The time to stamp an ack of this run with: never before its announcement or its previous ack, so
   * a clock stepped back cannot make the run's own log look implausible at replay.
   */
  ackStampMs(runId: string, nowMs: number): number {
    const run = this.runs.get(runId)
    if (run === undefined) return nowMs
    return Math.max(nowMs, run.announcedMs, run.spans.at(-1)?.[3] ?? 0)
  }

  /** Accepts an ack in order; durable after the next group commit, announced by a 'recorded' event. */
  appendAck(runId: string, fromSeq: number, toSeq: number, receivedMs: number): void {
    const run = this.runs.get(runId)
    if (run === undefined) throw new Error(`appendAck on unknown run ${runId}`)
    if (!isWritable(run)) throw new Error(`appendAck on run ${runId}, which takes no more acks`)
    receivedMs = this.ackStampMs(runId, receivedMs)
    addSpan(run, fromSeq, toSeq, receivedMs, receivedMs)
    this.emit('accepted', runId, fromSeq, toSeq)
    // Acks arriving while a commit runs extend one pending entry: the log grows per commit, not per ack.
    const last = run.pendingEntries.at(-1)
    if (last?.k === 'ack' && last.toSeq + 1 === fromSeq) {
      last.toSeq = toSeq
      last.lastMs = receivedMs
      run.pendingThroughSeq = toSeq
      this.markDirty(run)
    } else {
      this.queue(run, { k: 'ack', fromSeq, toSeq, firstMs: receivedMs, lastMs: receivedMs }, toSeq)
    }
  }

  /** Logs the run's end; its log is closed once that is durable. */
  endRun(runId: string, reason: EndReason, detail: string | undefined, atMs: number): void {
    const run = this.runs.get(runId)
    if (run === undefined) throw new Error(`endRun on unknown run ${runId}`)
    if (run.end !== undefined) throw new Error(`endRun on run ${runId}, which already ended`)
    run.end = { reason, ...(detail === undefined ? {} : { detail }), atMs }
    run.retired = true
    if (run.failed !== undefined) return
    this.queue(run, { k: 'end', reason, ...(detail === undefined ? {} : { detail }), atMs }, run.lastAckedSeq)
  }

  /**
   * The run's writer is gone: log a 'vanished' end unless it ended or failed, then close its log.
   * Safe to call more than once and while its announcement is still being stored.
   */
  release(runId: string, atMs: number): void {
    const run = this.runs.get(runId)
    if (run === undefined || run.retired) return
    if (run.end === undefined && run.failed === undefined) return this.endRun(runId, 'vanished', undefined, atMs)
    run.retired = true
    this.markDirty(run)
  }

  private queue(run: RunState, entry: LogEntry, throughSeq: number): void {
    run.pendingEntries.push(entry)
    run.pendingThroughSeq = throughSeq
    this.markDirty(run)
  }

  private markDirty(run: RunState): void {
    this.dirty.add(run)
    // commit() clears this.committing in the same tick in which it finds nothing dirty, so a run
    // marked dirty afterwards always starts a new commit.
    if (this.committing === undefined) this.committing = this.commit()
  }

  /**
   * Group commit: while one round is written and fdatasynced, the next one accumulates; a round takes
   * every run with queued entries, so nothing queued waits more than one round.
   */
  private async commit(): Promise<void> {
    try {
      await Promise.resolve() // let acks of the same tick join the first round
      for (;;) {
        const batch = [...this.dirty]
        this.dirty.clear()
        if (batch.length === 0) return
        await inLanes(batch, commitLanes, (run) => this.commitRun(run))
      }
    } finally {
      this.committing = undefined
    }
  }

  private async commitRun(run: RunState): Promise<void> {
    if (run.creating) return // createRun marks it dirty again when its files are in place
    if (run.failed === undefined && run.pendingEntries.length > 0) {
      const entries = run.pendingEntries
      const throughSeq = run.pendingThroughSeq
      run.pendingEntries = []
      const path = join(this.runDir(run.meta.runId), 'acks.log')
      try {
        run.log ??= openSync(path, 'a')
        // write() lands in the page cache (synchronous: one event-loop trip fewer); fdatasync in the threadpool.
        writeAllSync(run.log, Buffer.concat(entries.map(encodeEntry)), path)
        await fdatasyncAsync(run.log)
        run.durableThroughSeq = throughSeq
        this.emit('recorded', run.meta.runId, throughSeq)
      } catch (error) {
        // Never retried: after a failed write or fdatasync the log's durability is unknown.
        run.failed = error as Error
        run.pendingEntries = []
        this.emit('failed', run.meta.runId, error as Error)
      }
    }
    if ((run.retired || run.failed !== undefined) && run.pendingEntries.length === 0 && run.log !== undefined) {
      closeQuietly(run.log)
      delete run.log
    }
  }

  isWritable(runId: string): boolean {
    const run = this.runs.get(runId)
    return run !== undefined && isWritable(run)
  }

  /** Open ack logs (for tests of the descriptor bound). */
  openLogCount(): number {
    let open = 0
    for (const run of this.runs.values()) if (run.log !== undefined) open++
    return open
  }

  /** The runs a verify asks for: by run id, or the latest group for this host and path. */
  query(host: string, requestedPath: string, runId?: string): StoredRun[] {
    if (runId !== undefined) {
      const run = this.runs.get(runId)
      return run === undefined ? [] : [storedRun(run)]
    }
    let latest: RunState | undefined
    for (const run of this.runs.values()) {
      if (run.meta.host !== host || run.meta.requestedPath !== requestedPath) continue
      if (latest === undefined || run.announcedMs > latest.announcedMs) latest = run
    }
    if (latest === undefined) return []
    const groupId = latest.meta.groupId
    return [...this.runs.values()]
      .filter((r) => r.meta.groupId === groupId && r.meta.host === host && r.meta.requestedPath === requestedPath)
      .sort((a, b) => a.meta.method.localeCompare(b.meta.method))
      .slice(0, maxClaims)
      .map(storedRun)
  }

  /**
   * Every run on record for this host and path, newest first, at most maxClaims; live is false here
   * (the listener marks the runs whose writer is connected).
   */
  claims(host: string, requestedPath: string): Claim[] {
    return [...this.runs.values()]
      .filter((r) => r.meta.host === host && r.meta.requestedPath === requestedPath)
      .sort((a, b) => b.announcedMs - a.announcedMs || a.meta.runId.localeCompare(b.meta.runId))
      .slice(0, maxClaims)
      .map((r) => ({
        runId: r.meta.runId,
        groupId: r.meta.groupId,
        method: r.meta.method,
        announcedMs: r.announcedMs,
        ...(r.origin.peer === undefined ? {} : { peer: r.origin.peer }),
        live: false,
        ...(r.end === undefined ? {} : { end: r.end }),
        ackedThroughSeq: r.lastAckedSeq,
      }))
  }

  async close(): Promise<void> {
    while (this.committing !== undefined) await this.committing
    for (const run of this.runs.values()) {
      if (run.log !== undefined) closeQuietly(run.log)
      delete run.log
    }
  }
}

function isWritable(run: RunState): boolean {
  return run.failed === undefined && run.end === undefined && !run.retired
}

/** Runs fn over items with at most lanes calls in flight. */
async function inLanes<T>(items: readonly T[], lanes: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0
  const lane = async (): Promise<void> => {
    while (next < items.length) await fn(items[next++]!)
  }
  await Promise.all(Array.from({ length: Math.min(lanes, items.length) }, lane))
}

const fsyncAsync = promisify(fsync)
const fdatasyncAsync = promisify(fdatasync)

function closeQuietly(fd: number): void {
  try {
    closeSync(fd)
  } catch {
    // a close error after fsync/fdatasync returned changes nothing that was reported
  }
}

/** Writes every byte or throws: a short write (the disk filled) is a failure, not a success. */
function writeAllSync(fd: number, bytes: Buffer, path: string): void {
  const bytesWritten = writeSync(fd, bytes, 0, bytes.length)
  if (bytesWritten !== bytes.length) {
    throw Object.assign(new Error(`short write to ${path}: ${bytesWritten} of ${bytes.length} bytes (disk full?)`), { code: 'ENOSPC' })
  }
}

/** A whole small file, or 'missing' (ENOENT), or 'too-large'; any other error is a refusal. */
async function readBounded(path: string, maxBytes: number): Promise<Buffer | 'missing' | 'too-large'> {
  let file: FileHandle
  try {
    file = await open(path, 'r')
  } catch (error) {
    // ENOTDIR: runs/<id> is a file, not a run's directory.
    if (['ENOENT', 'ENOTDIR'].includes((error as { code?: string }).code ?? '')) return 'missing'
    throw unreadable(path, error)
  }
  try {
    const size = (await file.stat()).size
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

function unreadable(path: string, error: unknown): Error {
  return runtimeError(`could not read ${path}: ${describeSystemError(error)}`, 'the listener refuses to answer from an ack log it cannot read in full')
}

/**
 * Streams a run's ack log into run, chunk by chunk, up to the first entry that does not check out.
 * A missing log is an empty one (the listener died before creating it); any other read error throws.
 */
async function replayLog(path: string, run: RunState): Promise<{ validBytes: number; totalBytes: number; problem: string }> {
  let file: FileHandle
  try {
    file = await open(path, 'r')
  } catch (error) {
    if ((error as { code?: string }).code === 'ENOENT') return { validBytes: 0, totalBytes: 0, problem: 'an empty' }
    throw unreadable(path, error)
  }
  try {
    const totalBytes = (await file.stat()).size
    let pending = Buffer.alloc(0)
    let validBytes = 0
    let position = 0
    const chunk = Buffer.alloc(replayChunkBytes)
    for (;;) {
      // Entries are taken from pending; a partial entry waits for the next chunk.
      let offset = 0
      for (;;) {
        if (pending.length - offset < entryHeaderBytes) break
        const length = pending.readUInt32LE(offset)
        if (length > maxEntryBodyBytes) return { validBytes, totalBytes, problem: 'a damaged' }
        if (pending.length - offset - entryHeaderBytes < length) break
        const body = pending.subarray(offset + entryHeaderBytes, offset + entryHeaderBytes + length)
        if (xxh64(body) !== pending.readBigUInt64LE(offset + 4)) return { validBytes, totalBytes, problem: 'a torn' }
        if (!applyEntry(run, body)) return { validBytes, totalBytes, problem: 'an implausible' }
        offset += entryHeaderBytes + length
        validBytes += entryHeaderBytes + length
      }
      const { bytesRead } = await file.read(chunk, 0, chunk.length, position)
      if (bytesRead === 0) return { validBytes, totalBytes: Math.max(totalBytes, position), problem: 'a torn' }
      position += bytesRead
      pending = Buffer.concat([pending.subarray(offset), chunk.subarray(0, bytesRead)])
    }
  } catch (error) {
    if ((error as { exitCode?: number }).exitCode !== undefined) throw error
    throw unreadable(path, error)
  } finally {
    await file.close().catch(() => undefined)
  }
}

/** Applies one checksummed log entry if it is consistent with what came before; false if not. */
function applyEntry(run: RunState, body: Buffer): boolean {
  let entry: LogEntry
  try {
    entry = logEntrySchema.parse(packr.unpack(body))
  } catch {
    return false
  }
  if (entry.k === 'end') {
    if (run.end !== undefined) return false
    run.end = { reason: entry.reason, ...(entry.detail === undefined ? {} : { detail: entry.detail }), atMs: entry.atMs }
    return true
  }
  const contiguous = entry.fromSeq === run.lastAckedSeq + 1 && entry.toSeq >= entry.fromSeq
  const timely = entry.firstMs <= entry.lastMs && entry.firstMs >= run.announcedMs - clockSkewMs
  const plausible = entry.toSeq <= maxPlausibleSeq(run.announcedMs, entry.lastMs)
  if (run.end !== undefined || !contiguous || !timely || !plausible) return false
  addSpan(run, entry.fromSeq, entry.toSeq, entry.firstMs, entry.lastMs)
  return true
}

function encodeEntry(entry: LogEntry): Buffer {
  const body = packr.pack(entry)
  const framed = Buffer.allocUnsafe(entryHeaderBytes + body.length)
  framed.writeUInt32LE(body.length, 0)
  framed.writeBigUInt64LE(xxh64(body), 4)
  body.copy(framed, entryHeaderBytes)
  return framed
}

function newRunState(meta: RunMeta, announcedMs: number, origin: RunOrigin): RunState {
  return { meta, announcedMs, origin, spans: [], lastAckedSeq: 0, retired: false, pendingEntries: [], pendingThroughSeq: 0, durableThroughSeq: 0 }
}

function addSpan(run: RunState, fromSeq: number, toSeq: number, firstMs: number, lastMs: number): void {
  const last = run.spans.at(-1)
  if (last !== undefined && last[1] + 1 === fromSeq && lastMs - last[2] <= spanWindowMs) {
    last[1] = toSeq
    last[3] = Math.max(last[3], lastMs)
  } else {
    run.spans.push([fromSeq, toSeq, firstMs, lastMs])
  }
  run.lastAckedSeq = Math.max(run.lastAckedSeq, toSeq)
}

function storedRun(run: RunState): StoredRun {
  return {
    meta: run.meta,
    announcedMs: run.announcedMs,
    ...(run.origin.peer === undefined ? {} : { peer: run.origin.peer }),
    ...(run.origin.writer === undefined ? {} : { writer: run.origin.writer }),
    ...(run.end === undefined ? {} : { end: run.end }),
    spans: run.spans.map((s) => [...s] as AckSpan),
  }
}

async function syncDirectory(dir: string): Promise<void> {
  const fd = openSync(dir, 'r')
  try {
    await fsyncAsync(fd)
  } finally {
    closeSync(fd)
  }
}
