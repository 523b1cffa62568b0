/**
 * The listener's durable memory: one directory per run under <dir>/runs/<runId>/ holding
 *   meta.msgpack  the run's metadata, written to a temp file, fsynced, renamed, directory fsynced
 *   acks.log      append-only entries, made durable by group commit (one fdatasync covers every
 *                 entry queued while the previous fdatasync ran)
 *
 * acks.log entry:  [u32 LE body length][u64 LE xxh64 of body][body: msgpack LogEntry]
 * Fault model: the listener can be killed at any moment. A torn or damaged tail entry is ignored at
 * replay (it was never reported as recorded: "recorded" is sent only after its fdatasync returned).
 *
 * In memory a run's acks are spans, not one entry per seq: consecutive seqs received within
 * spanWindowMs of each other share a span, so the time window of any lost seq is known to that
 * precision while a run of hours stays small.
 */
import { xxh64 } from '@node-rs/xxhash'
import { EventEmitter } from 'node:events'
import { mkdir, open, readFile, readdir, rename, type FileHandle } from 'node:fs/promises'
import { join } from 'node:path'
import { Packr } from 'msgpackr'
import { z } from 'zod'
import type { RunMeta } from '../record/format.js'
import { runMetaSchema } from '../record/format.js'
import type { AckSpan, StoredRun } from '../protocol/messages.js'

export const spanWindowMs = 100
const entryHeaderBytes = 12
const packr = new Packr({ useRecords: false, int64AsType: 'number', mapsAsObjects: true })

const logEntrySchema = z.discriminatedUnion('k', [
  z.object({ k: z.literal('ack'), fromSeq: z.number().int().positive(), toSeq: z.number().int().positive(), firstMs: z.number(), lastMs: z.number() }),
  z.object({ k: z.literal('end'), reason: z.enum(['duration', 'interrupted', 'error', 'vanished']), detail: z.string().optional(), atMs: z.number() }),
])
type LogEntry = z.infer<typeof logEntrySchema>

const metaFileSchema = z.object({ meta: runMetaSchema, announcedMs: z.number() })

interface RunState {
  readonly meta: RunMeta
  readonly announcedMs: number
  readonly spans: AckSpan[]
  end?: { reason: 'duration' | 'interrupted' | 'error' | 'vanished'; detail?: string; atMs: number }
  /** Highest seq accepted (in memory, maybe not yet durable). */
  lastAckedSeq: number
  log?: FileHandle
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
  private committing = false
  readonly warnings: string[] = []

  private constructor(readonly dir: string) {
    super()
  }

  /** Opens (creating if needed) a store directory and replays every run in it. */
  static async open(dir: string): Promise<AckStore> {
    await mkdir(join(dir, 'runs'), { recursive: true })
    return AckStore.load(dir)
  }

  /** Reads a store directory without changing it (verify --acks); throws ENOENT when it has no runs/. */
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
    let metaFile: z.infer<typeof metaFileSchema>
    try {
      metaFile = metaFileSchema.parse(packr.unpack(await readFile(join(this.runDir(runId), 'meta.msgpack'))))
    } catch (error) {
      this.warnings.push(`run ${runId}: unreadable metadata, skipped (${(error as Error).message.split('\n')[0]})`)
      return
    }
    const run = newRunState(metaFile.meta, metaFile.announcedMs)
    let bytes: Buffer
    try {
      bytes = await readFile(join(this.runDir(runId), 'acks.log'))
    } catch {
      bytes = Buffer.alloc(0)
    }
    let offset = 0
    while (offset + entryHeaderBytes <= bytes.length) {
      const length = bytes.readUInt32LE(offset)
      const end = offset + entryHeaderBytes + length
      if (end > bytes.length) break
      const body = bytes.subarray(offset + entryHeaderBytes, end)
      if (xxh64(body) !== bytes.readBigUInt64LE(offset + 4)) break
      let entry: LogEntry
      try {
        entry = logEntrySchema.parse(packr.unpack(body))
      } catch {
        break
      }
      if (entry.k === 'ack') addSpan(run, entry.fromSeq, entry.toSeq, entry.firstMs, entry.lastMs)
      else run.end = { reason: entry.reason, ...(entry.detail === undefined ? {} : { detail: entry.detail }), atMs: entry.atMs }
      offset = end
    }
    if (offset < bytes.length) {
      this.warnings.push(`run ${runId}: ignored ${bytes.length - offset} bytes of a torn ack log tail (never reported as recorded)`)
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

  /** Makes the run's metadata durable before the writer is told to start. */
  async createRun(meta: RunMeta, announcedMs: number): Promise<void> {
    if (this.runs.has(meta.runId)) throw new StorageError(`run ${meta.runId} already exists`)
    const run = newRunState(meta, announcedMs)
    this.runs.set(meta.runId, run) // reserve the id at once: a second announcement must not race us
    try {
      const dir = this.runDir(meta.runId)
      await mkdir(dir, { recursive: false })
      const tmp = join(dir, 'meta.msgpack.tmp')
      const file = await open(tmp, 'wx')
      try {
        await file.writeFile(packr.pack({ meta, announcedMs }))
        await file.sync()
      } finally {
        await file.close()
      }
      await rename(tmp, join(dir, 'meta.msgpack'))
      run.log = await open(join(dir, 'acks.log'), 'a')
      await run.log.sync()
      await syncDirectory(dir)
      await syncDirectory(join(this.dir, 'runs'))
    } catch (error) {
      this.runs.delete(meta.runId)
      await run.log?.close().catch(() => undefined)
      throw new StorageError(`could not store run ${meta.runId}: ${(error as Error).message}`)
    }
  }

  /** Accepts an ack in order; durable after the next group commit, announced by a 'recorded' event. */
  appendAck(runId: string, fromSeq: number, toSeq: number, receivedMs: number): void {
    const run = this.runs.get(runId)
    if (run === undefined) throw new Error(`appendAck on unknown run ${runId}`)
    addSpan(run, fromSeq, toSeq, receivedMs, receivedMs)
    this.emit('accepted', runId, fromSeq, toSeq)
    // Acks arriving while a commit runs extend one pending entry: the log grows per commit, not per ack.
    const last = run.pendingEntries.at(-1)
    if (last?.k === 'ack' && last.toSeq + 1 === fromSeq) {
      last.toSeq = toSeq
      last.lastMs = receivedMs
      run.pendingThroughSeq = toSeq
      this.startCommit()
    } else {
      this.queue(run, { k: 'ack', fromSeq, toSeq, firstMs: receivedMs, lastMs: receivedMs }, toSeq)
    }
  }

  endRun(runId: string, reason: 'duration' | 'interrupted' | 'error' | 'vanished', detail: string | undefined, atMs: number): void {
    const run = this.runs.get(runId)
    if (run === undefined) throw new Error(`endRun on unknown run ${runId}`)
    run.end = { reason, ...(detail === undefined ? {} : { detail }), atMs }
    this.queue(run, { k: 'end', reason, ...(detail === undefined ? {} : { detail }), atMs }, run.lastAckedSeq)
  }

  private queue(run: RunState, entry: LogEntry, throughSeq: number): void {
    run.pendingEntries.push(entry)
    run.pendingThroughSeq = throughSeq
    this.startCommit()
  }

  private startCommit(): void {
    if (!this.committing) void this.commit()
  }

  /** Group commit: while one batch is being written and fdatasynced, the next one accumulates. */
  private async commit(): Promise<void> {
    if (this.committing) return
    this.committing = true
    try {
      for (;;) {
        const batch = [...this.runs.values()].filter((r) => r.pendingEntries.length > 0 && r.log !== undefined)
        if (batch.length === 0) break
        await Promise.all(
          batch.map(async (run) => {
            const bytes = Buffer.concat(run.pendingEntries.map(encodeEntry))
            const throughSeq = run.pendingThroughSeq
            run.pendingEntries = []
            try {
              await run.log!.write(bytes)
              await run.log!.datasync()
              run.durableThroughSeq = throughSeq
              this.emit('recorded', run.meta.runId, throughSeq)
            } catch (error) {
              // Never retried: after a failed fdatasync the log's durability is unknown; stop taking acks.
              const log = run.log
              delete run.log
              await log?.close().catch(() => undefined)
              this.emit('failed', run.meta.runId, error as Error)
            }
          }),
        )
      }
    } finally {
      this.committing = false
    }
  }

  isWritable(runId: string): boolean {
    return this.runs.get(runId)?.log !== undefined
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
      .filter((r) => r.meta.groupId === groupId)
      .sort((a, b) => a.meta.method.localeCompare(b.meta.method))
      .map(storedRun)
  }

  async close(): Promise<void> {
    while (this.committing) await new Promise((resolve) => setTimeout(resolve, 1))
    for (const run of this.runs.values()) {
      const log = run.log
      delete run.log
      await log?.close()
    }
  }
}

function encodeEntry(entry: LogEntry): Buffer {
  const body = packr.pack(entry)
  const framed = Buffer.allocUnsafe(entryHeaderBytes + body.length)
  framed.writeUInt32LE(body.length, 0)
  framed.writeBigUInt64LE(xxh64(body), 4)
  body.copy(framed, entryHeaderBytes)
  return framed
}

function newRunState(meta: RunMeta, announcedMs: number): RunState {
  return { meta, announcedMs, spans: [], lastAckedSeq: 0, pendingEntries: [], pendingThroughSeq: 0, durableThroughSeq: 0 }
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
    ...(run.end === undefined ? {} : { end: run.end }),
    spans: run.spans.map((s) => [...s] as AckSpan),
  }
}

async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, 'r')
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}
