/**
 * The listener's durable memory: one directory per run under <dir>/runs/<runId>/ holding
 *   acks.log      append-only entries, made durable by group commit (one fdatasync covers every
 *                 entry queued while the previous fdatasync ran); created and fsynced first
 *   meta.msgpack  the run's metadata, its announcement time and order (announceIndex), the peer
 *                 address it came from, the writer's environment and its campaign tag (absent in
 *                 older directories and for runs outside a campaign); written to a temp file,
 *                 fsynced, renamed into place last, then both directories fsynced. A run exists for
 *                 replay only once meta.msgpack does; a failed announcement removes it first. No
 *                 meta.msgpack and an empty log: an announcement that never completed (skipped);
 *                 meta.msgpack unreadable or invalid, or missing while the log holds acks: damage,
 *                 a refusal (a run left out could turn a FAIL into a PASS).
 *   verdict.msgpack  the verdict a verifier reported after the cut (the latest replaces an earlier
 *                 one): temp file, fsync, rename, directory fsync, before the verifier is told
 *                 verdict-ok. A damaged one is reported at startup (a warning naming the file) and
 *                 the run shows no verdict: the acks, what verdicts are judged from, are unharmed.
 * The log also holds the run's first 'steady' entry (its writer said it is the moment to cut).
 * and <dir>/lock, flock()ed exclusively by the one listener that owns the directory (verify --acks
 * only reads and does not take it).
 *
 * acks.log entry:  [u32 LE body length][u64 LE xxh64 of body][body: msgpack LogEntry]
 * Fault model: the listener can be killed at any moment and its disk can fill. A torn tail is ignored
 * at replay (it was never reported as recorded: "recorded" is sent only after its write returned every
 * byte and its fdatasync returned). Only the last commit can be torn, and a commit writes at most
 * maxCommitBytes of a run's log, so a bad entry followed by more non-zero bytes than that is damage in
 * the middle of the log: a refusal, never the acks after it dropped. Replay streams the log in chunks (a log of
 * any size replays), keeps the valid prefix (entries that check out: checksum, schema, seqs contiguous
 * from 1, plausible for the time since announcement, real times), and turns any read error other than
 * a missing file into a refusal: fewer acks than were recorded would turn a FAIL into a PASS. Ack
 * times are stamped monotonic per run (never before the announcement or the previous ack), so a clock
 * stepped back cannot make a run's own log look implausible.
 * A short write, ENOSPC or a failed fdatasync stops that run's acks for good (never retried).
 *
 * Order: runs are ordered by announceIndex (one more than the highest on record, at announcement),
 * never by the listener's clock, which may step back; meta files without it (older listeners) come
 * before every run that has one, ordered by announcement time.
 * File descriptors: a run's log is opened (O_APPEND), written, fdatasynced and closed within each
 * commit, so at most commitLanes logs are open at once however many runs are live.
 * Files are opened with O_NONBLOCK and must be regular files: a FIFO or device planted in the
 * directory cannot hang startup.
 * Event loop and threadpool: the listener's main thread may be saturated by acks, and every async fs
 * call costs one trip through the event loop. So the quick metadata and page-cache calls (mkdir, open,
 * write, rename, close) are synchronous, and only the syncs go to the libuv threadpool (4 threads):
 * an announcement costs three trips (fsync the log; fsync the metadata; fsync the run directory and
 * runs/ at once), and group commit keeps at most commitLanes fdatasyncs in the threadpool, so an announcement
 * always finds a thread.
 *
 * In memory a run's acks are spans, not one entry per seq (span-table.ts, 24 bytes a span): consecutive
 * seqs received within spanWindowMs of each other share a span, so the time window of any lost seq is
 * known to that precision while a run of hours stays small. Past maxSpans (maxStoredSpans, a week)
 * neighbouring spans are merged pairwise: the seqs stay exact, the merged windows coarser. A verifier
 * gets a long run's spans page by page (spanPage), never all in one reply.
 */
import { xxh64 } from '../record/checksum.js'
import { EventEmitter } from 'node:events'
import { closeSync, constants as fsConstants, fdatasync, fsync, mkdirSync, openSync, renameSync, rmdirSync, unlinkSync, writeSync } from 'node:fs'
import { open, readdir, stat, type FileHandle } from 'node:fs/promises'
import { promisify } from 'node:util'
import { join } from 'node:path'
import { holdExclusiveLock } from '../locks.js'
import { type FileLock } from '../native/index.js'
import { syncDirectory, syncDirectoryAsync } from '../directory-sync.js'
import { performance } from 'node:perf_hooks'
import { Packr } from 'msgpackr'
import { z } from 'zod'
import type { RunMeta } from '../record/format.js'
import { runIdSchema, runMetaSchema } from '../record/format.js'
import {
  campaignTagSchema,
  endReasons,
  epochMsSchema,
  maxClaims,
  maxPlausibleSeq,
  maxStoredSpans,
  storedVerdictSchema,
  writerEnvSchema,
  type CampaignTag,
  type Claim,
  type RunSummary,
  type StoredRun,
  type StoredVerdict,
  type WriterEnv,
} from '../protocol/messages.js'
import { describeSystemError, runtimeError, usageError } from '../errors.js'
import { SpanTable } from './span-table.js'

export { spanWindowMs } from './span-table.js'
const entryHeaderBytes = 12
/** No entry the listener writes comes near this (an end's detail is at most 4 KiB); a longer length is damage. */
const maxEntryBodyBytes = 64 * 1024
/** Replay reads the log in chunks of this size. */
const replayChunkBytes = 1024 * 1024
/** One commit writes at most this much of one run's log; entries beyond wait for the next commit. */
export const maxCommitBytes = 64 * 1024
/** The most a crash can leave torn at the end of a log: one commit's bytes (a commit writes at least one entry). */
const maxTornBytes = Math.max(maxCommitBytes, entryHeaderBytes + maxEntryBodyBytes)
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
  z.object({ k: z.literal('end'), reason: z.enum([...endReasons, 'vanished']), detail: z.string().max(4096).optional(), atMs: epochMsSchema }),
  /** The writer said it has run long enough to be cut (first one only). */
  z.object({ k: z.literal('steady'), atMs: epochMsSchema }),
])
type LogEntry = z.infer<typeof logEntrySchema>

const metaFileSchema = z.object({
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
const verdictFileSchema = z.object({ runId: runIdSchema, result: storedVerdictSchema })
/** A verdict with a fingerprint is tens of KiB at most; anything over this is damage. */
const maxVerdictFileBytes = 1024 * 1024

type EndReason = (typeof endReasons)[number] | 'vanished'

/** Who announced a run: the peer address the listener saw and the writer's environment. */
export interface RunOrigin {
  readonly peer?: string
  readonly writer?: WriterEnv
  /** The listener required a token and the writer presented it: a stranger cannot have announced the run. */
  readonly authenticated?: boolean
  /** The campaign cycle the writer tagged the run with. */
  readonly campaign?: CampaignTag
}

interface RunState {
  readonly meta: RunMeta
  readonly announcedMs: number
  /** Announcement order; undefined for runs stored by older listeners (they come first). */
  readonly announceIndex: number | undefined
  /** performance.now() at the announcement, for runs announced since this listener started. */
  announcedPerfMs?: number
  readonly origin: RunOrigin
  readonly spans: SpanTable
  end?: { reason: EndReason; detail?: string; atMs: number }
  /** When the writer first said it was steady (null: never). */
  steadyMs: number | null
  /** The latest verdict a verifier reported, stored in verdict.msgpack. */
  verdict: StoredVerdict | null
  /** Highest seq accepted (in memory, maybe not yet durable). */
  lastAckedSeq: number
  /** No more entries will come (ended, writer gone, or read back at startup). */
  retired: boolean
  /** createRun is still making the run's directory and files. */
  creating?: boolean
  /** Set when a write or fdatasync failed: the run takes nothing more, ever. */
  failed?: Error
  /** Entries accepted but not yet written (consecutive acks share one). */
  pendingEntries: LogEntry[]
  durableThroughSeq: number
}

export class StorageError extends Error {}

export interface AckStoreOptions {
  /** Spans kept in memory per run (default and most: maxStoredSpans, what a reply may carry); lower for tests. */
  readonly maxSpans?: number
}

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
  /** The highest announceIndex on record; the next announcement gets one more. */
  private lastAnnounceIndex = 0
  /** Ack logs open right now (only inside a commit or an announcement). */
  private openLogs = 0
  /** Verdict writes under way, per run: one run's verdicts are stored in order. */
  private readonly verdictWrites = new Map<string, Promise<void>>()
  /** The descriptor holding <dir>/lock, for the store's life (the listener's, not verify's). */
  private lock: FileLock | undefined
  readonly warnings: string[] = []

  /** Spans kept per run; beyond it neighbours are merged (see coarsen). */
  readonly maxSpans: number

  private constructor(
    readonly dir: string,
    options: AckStoreOptions = {},
  ) {
    super()
    this.maxSpans = options.maxSpans ?? maxStoredSpans
    if (!Number.isInteger(this.maxSpans) || this.maxSpans < 2 || this.maxSpans > maxStoredSpans) throw new RangeError(`maxSpans must be 2..${maxStoredSpans}`)
  }

  /**
   * Opens (creating if needed) a store directory for a listener and replays every run in it. Takes
   * <dir>/lock first: a second listener on the same directory would keep its own view of the runs
   * (and verify would judge a file against half of them), so it is refused (exit 2).
   */
  static async open(dir: string, options: AckStoreOptions = {}): Promise<AckStore> {
    mkdirSync(join(dir, 'runs'), { recursive: true })
    const lock = lockDirectory(dir)
    try {
      const store = await AckStore.load(dir, options)
      store.lock = lock
      return store
    } catch (error) {
      lock.release()
      throw error
    }
  }

  /**
   * Reads a store directory without changing it (verify --acks); throws ENOENT when it has no runs/,
   * and a runtime PlugcheckError naming the file when a run's files cannot be read.
   */
  static async load(dir: string, options: AckStoreOptions = {}): Promise<AckStore> {
    const store = new AckStore(dir, options)
    for (const runId of (await readdir(join(dir, 'runs'))).sort()) {
      if (!/^[0-9a-f]{16}$/.test(runId)) continue
      await store.replay(runId)
    }
    return store
  }

  private runDir(runId: string): string {
    return join(this.dir, 'runs', runId)
  }

  /**
   * A run directory is one of: a run (meta.msgpack readable and valid), an announcement that never
   * completed (no meta.msgpack and an empty or missing acks.log: skipped with a warning), or damage
   * (meta.msgpack there but unreadable, not a regular file or invalid; or missing while acks.log holds
   * acks): a refusal naming the file. Judging the rest of a group, or an older run of the path,
   * without this one could turn a FAIL into a PASS.
   */
  private async replay(runId: string): Promise<void> {
    const metaPath = join(this.runDir(runId), 'meta.msgpack')
    const logPath = join(this.runDir(runId), 'acks.log')
    const metaBytes = await readBounded(metaPath, maxMetaFileBytes)
    if (metaBytes === 'not-a-directory') {
      this.warnings.push(`run ${runId}: ${this.runDir(runId)} is not a directory, skipped`)
      return
    }
    if (metaBytes === 'missing') {
      const logBytes = await fileSize(logPath)
      if (logBytes === 0) {
        // Created first, meta.msgpack last: the listener died in between, before the writer was told to start.
        this.warnings.push(`run ${runId}: no metadata and an empty ack log (its announcement never completed), skipped`)
        return
      }
      throw damagedMeta(metaPath, `it is missing, but ${logPath} holds ${logBytes} bytes of acks`)
    }
    if (metaBytes === 'not-a-file') throw damagedMeta(metaPath, 'not a regular file')
    if (metaBytes === 'too-large') throw damagedMeta(metaPath, `it is over ${maxMetaFileBytes} bytes, more than any run's metadata`)
    let decoded: unknown
    try {
      decoded = packr.unpack(metaBytes)
    } catch {
      decoded = undefined
    }
    if (decoded === undefined) throw damagedMeta(metaPath, `its ${metaBytes.length} bytes are not valid msgpack`)
    const parsed = metaFileSchema.safeParse(decoded)
    if (!parsed.success) throw damagedMeta(metaPath, describeInvalid(parsed.error))
    const metaFile = parsed.data
    if (metaFile.meta.runId !== runId) throw damagedMeta(metaPath, `it describes run ${metaFile.meta.runId}, not run ${runId} of its directory`)
    const run = newRunState(metaFile.meta, metaFile.announcedMs, metaFile.announceIndex, {
      ...(metaFile.peer === undefined ? {} : { peer: metaFile.peer }),
      ...(metaFile.writer === undefined ? {} : { writer: metaFile.writer }),
      ...(metaFile.authenticated === undefined ? {} : { authenticated: metaFile.authenticated }),
      ...(metaFile.campaign === undefined ? {} : { campaign: metaFile.campaign }),
    })
    run.retired = true
    run.verdict = await this.replayVerdict(runId)
    const { validBytes, totalBytes, problem } = await replayLog(logPath, run, this.maxSpans)
    if (validBytes < totalBytes) {
      this.warnings.push(`run ${runId}: ignored ${totalBytes - validBytes} bytes of ${problem} ack log tail (never reported as recorded)`)
    }
    run.durableThroughSeq = run.lastAckedSeq
    this.runs.set(runId, run)
    this.lastAnnounceIndex = Math.max(this.lastAnnounceIndex, metaFile.announceIndex ?? 0)
  }

  /**
   * The run's verdict.msgpack, if there is one and it checks out. A damaged one (unreadable, invalid,
   * another run's) is reported as a warning naming the file, never dropped in silence; the run then
   * shows no verdict until a verifier reports one again.
   */
  private async replayVerdict(runId: string): Promise<StoredVerdict | null> {
    const path = join(this.runDir(runId), 'verdict.msgpack')
    let bytes: Awaited<ReturnType<typeof readBounded>>
    try {
      bytes = await readBounded(path, maxVerdictFileBytes)
    } catch (error) {
      this.warnings.push(`run ${runId}: ${(error as Error).message}; the run's verdict is not shown (verify it again to store a new one)`)
      return null
    }
    if (bytes === 'missing') return null
    let problem: string
    if (bytes === 'not-a-directory' || bytes === 'not-a-file') problem = 'not a regular file'
    else if (bytes === 'too-large') problem = `it is over ${maxVerdictFileBytes} bytes, more than any verdict`
    else {
      let decoded: unknown
      try {
        decoded = packr.unpack(bytes)
      } catch {
        decoded = undefined
      }
      const parsed = verdictFileSchema.safeParse(decoded)
      if (decoded === undefined) problem = `its ${bytes.length} bytes are not valid msgpack`
      else if (!parsed.success) problem = describeInvalid(parsed.error).replace("a run's metadata", 'a verdict')
      else if (parsed.data.runId !== runId) problem = `it is the verdict of run ${parsed.data.runId}, not of run ${runId}`
      else return parsed.data.result
    }
    this.warnings.push(`run ${runId}: ${path} is damaged (${problem}); the run's verdict is not shown (verify it again to store a new one)`)
    return null
  }

  hasRun(runId: string): boolean {
    return this.runs.has(runId)
  }

  /** True when some run on record belongs to this group (runs of one `write --method a,b`). */
  hasGroup(groupId: string): boolean {
    for (const run of this.runs.values()) if (run.meta.groupId === groupId) return true
    return false
  }

  lastAckedSeq(runId: string): number {
    return this.runs.get(runId)?.lastAckedSeq ?? 0
  }

  /** What the listener needs to judge a new announcement or an ack against a known run. */
  runInfo(runId: string): { meta: RunMeta; announcedMs: number; origin: RunOrigin; ended: boolean; steadyMs: number | null; creating: boolean } | undefined {
    const run = this.runs.get(runId)
    return run === undefined
      ? undefined
      : { meta: run.meta, announcedMs: run.announcedMs, origin: run.origin, ended: run.end !== undefined, steadyMs: run.steadyMs, creating: run.creating === true }
  }

  /**
   * Makes the run durable before the writer is told to start. meta.msgpack is what makes a run exist
   * at replay, so it appears last: the empty log first (created, fsynced), then the metadata (temp
   * file, fsync, rename), then both directories fsynced. If any step fails the announcement is
   * refused and what was created is removed, meta.msgpack first, so a restart cannot bring back a
   * run its writer was told was refused.
   */
  async createRun(meta: RunMeta, announcedMs: number, origin: RunOrigin = {}): Promise<void> {
    if (this.runs.has(meta.runId)) throw new StorageError(`run ${meta.runId} already exists`)
    if (!epochMsSchema.safeParse(announcedMs).success) {
      // Replay and verify refuse such times; storing them would lose the run's acks later.
      throw new StorageError(`the listener's clock reads ${new Date(announcedMs).toISOString()}, not a real date: set it before announcing runs`)
    }
    // The order is taken now, in announcement order, whatever the clock says.
    const announceIndex = ++this.lastAnnounceIndex
    const run = newRunState(meta, announcedMs, announceIndex, origin)
    run.announcedPerfMs = performance.now()
    run.creating = true
    this.runs.set(meta.runId, run) // reserve the id at once: a second announcement must not race us
    const dir = this.runDir(meta.runId)
    const logPath = join(dir, 'acks.log')
    const tmpPath = join(dir, 'meta.msgpack.tmp')
    const metaPath = join(dir, 'meta.msgpack')
    let step: 'start' | 'dir' | 'log' | 'tmp' | 'meta' = 'start'
    try {
      mkdirSync(dir)
      step = 'dir'
      const log = openSync(logPath, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_APPEND, 0o644)
      step = 'log'
      this.openLogs++
      try {
        await fsyncAsync(log)
      } finally {
        closeSync(log)
        this.openLogs--
      }
      const file = openSync(tmpPath, 'wx')
      step = 'tmp'
      try {
        writeAllSync(file, packr.pack({ meta, announcedMs, announceIndex, ...origin }), tmpPath)
        await fsyncAsync(file)
      } finally {
        closeSync(file)
      }
      // From here on meta.msgpack may exist (a rename can fail after taking effect).
      step = 'meta'
      renameSync(tmpPath, metaPath)
      // Both directory entries (meta.msgpack and acks.log; the run's directory) at once.
      await Promise.all([syncDirectoryAsync(dir), syncDirectoryAsync(join(this.dir, 'runs'))])
    } catch (error) {
      this.runs.delete(meta.runId)
      removeCreated(step, { dir, logPath, tmpPath, metaPath })
      throw new StorageError(`could not store run ${meta.runId}: ${describeSystemError(error)}`)
    }
    run.creating = false
    // Acks or an end may have come while the announcement was being stored.
    if (run.pendingEntries.length > 0) this.markDirty(run)
  }

  /**
   * The time to stamp an ack of this run with: its announcement time plus the time elapsed since, by
   * the monotonic clock. A wall clock stepped back or forward mid-run neither freezes the stamps (which
   * would make acks look implausibly fast and refused) nor makes the run's own log implausible at replay.
   */
  ackStampMs(runId: string, nowMs: number): number {
    const run = this.runs.get(runId)
    if (run === undefined) return nowMs
    const elapsedMs = run.announcedPerfMs === undefined ? nowMs - run.announcedMs : performance.now() - run.announcedPerfMs
    return Math.max(Math.round(run.announcedMs + elapsedMs), run.spans.lastAckMs ?? 0)
  }

  /** Accepts an ack in order; durable after the next group commit, announced by a 'recorded' event. */
  appendAck(runId: string, fromSeq: number, toSeq: number, receivedMs: number): void {
    const run = this.runs.get(runId)
    if (run === undefined) throw new Error(`appendAck on unknown run ${runId}`)
    if (!isWritable(run)) throw new Error(`appendAck on run ${runId}, which takes no more acks`)
    receivedMs = this.ackStampMs(runId, receivedMs)
    addSpan(run, fromSeq, toSeq, receivedMs, receivedMs, this.maxSpans)
    this.emit('accepted', runId, fromSeq, toSeq)
    // Acks arriving while a commit runs extend one pending entry: the log grows per commit, not per ack.
    const last = run.pendingEntries.at(-1)
    if (last?.k === 'ack' && last.toSeq + 1 === fromSeq) {
      last.toSeq = toSeq
      last.lastMs = receivedMs
      this.markDirty(run)
    } else {
      this.queue(run, { k: 'ack', fromSeq, toSeq, firstMs: receivedMs, lastMs: receivedMs })
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
    this.queue(run, { k: 'end', reason, ...(detail === undefined ? {} : { detail }), atMs })
  }

  /**
   * The writer says it has run long enough to be cut: the first time is logged (durable with the
   * next group commit); later ones change nothing. False if the run already had its steady moment.
   */
  recordSteady(runId: string, atMs: number): boolean {
    const run = this.runs.get(runId)
    if (run === undefined) throw new Error(`recordSteady on unknown run ${runId}`)
    if (!isWritable(run)) throw new Error(`recordSteady on run ${runId}, which takes no more entries`)
    if (run.steadyMs !== null) return false
    run.steadyMs = atMs
    this.queue(run, { k: 'steady', atMs })
    return true
  }

  /**
   * Stores the verdict a verifier reported for the run, replacing an earlier one: verdict.msgpack
   * written to a temporary file, fsynced, renamed into place and the run's directory fsynced, all
   * before the promise resolves (the verifier is told verdict-ok only then). Verdicts of one run are
   * stored one after the other.
   */
  recordVerdict(runId: string, result: StoredVerdict): Promise<void> {
    const run = this.runs.get(runId)
    if (run === undefined || run.creating === true) return Promise.reject(new Error(`recordVerdict on unknown run ${runId}`))
    const previous = this.verdictWrites.get(runId) ?? Promise.resolve()
    const write = previous.then(async () => {
      const dir = this.runDir(runId)
      const tmpPath = join(dir, 'verdict.msgpack.tmp')
      const path = join(dir, 'verdict.msgpack')
      try {
        const file = openSync(tmpPath, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_TRUNC, 0o644)
        try {
          writeAllSync(file, packr.pack({ runId, result }), tmpPath)
          await fsyncAsync(file)
        } finally {
          closeSync(file)
        }
        renameSync(tmpPath, path)
        await syncDirectoryAsync(dir)
      } catch (error) {
        throw new StorageError(`could not store the verdict of run ${runId}: ${describeSystemError(error)}`)
      }
      run.verdict = result
    })
    const settled = write.catch(() => undefined)
    this.verdictWrites.set(runId, settled)
    void settled.then(() => {
      if (this.verdictWrites.get(runId) === settled) this.verdictWrites.delete(runId)
    })
    return write
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
  }

  private queue(run: RunState, entry: LogEntry): void {
    run.pendingEntries.push(entry)
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
    if (run.failed !== undefined || run.pendingEntries.length === 0) return
    // At most maxCommitBytes (and at least one entry) per commit: only this commit's bytes can be torn
    // by a crash, and replay tells a torn tail from damage by that bound. The rest waits for the next round.
    const batch: Buffer[] = []
    let batchBytes = 0
    let taken = 0
    let throughSeq = run.durableThroughSeq
    for (const entry of run.pendingEntries) {
      const encoded = frameLogEntry(entry)
      if (taken > 0 && batchBytes + encoded.length > maxCommitBytes) break
      batch.push(encoded)
      batchBytes += encoded.length
      taken++
      if (entry.k === 'ack') throughSeq = entry.toSeq
    }
    // An ack arriving during the write extends the last entry left here, never one being written.
    run.pendingEntries = run.pendingEntries.slice(taken)
    if (run.pendingEntries.length > 0) this.markDirty(run)
    const path = join(this.runDir(run.meta.runId), 'acks.log')
    // Opened and closed within the commit: live runs hold no descriptor between commits. No O_CREAT:
    // the log was created with the run, and a log that vanished since is a failure, not a fresh start.
    let log: number | undefined
    try {
      log = openSync(path, fsConstants.O_WRONLY | fsConstants.O_APPEND | fsConstants.O_NONBLOCK)
      this.openLogs++
      // write() lands in the page cache (synchronous: one event-loop trip fewer); fdatasync in the threadpool.
      writeAllSync(log, Buffer.concat(batch), path)
      await fdatasyncAsync(log)
    } catch (error) {
      // Never retried: after a failed write or fdatasync the log's durability is unknown.
      run.failed = error as Error
      run.pendingEntries = []
      this.emit('failed', run.meta.runId, error as Error)
      return
    } finally {
      if (log !== undefined) {
        closeQuietly(log)
        this.openLogs--
      }
    }
    run.durableThroughSeq = throughSeq
    this.emit('recorded', run.meta.runId, throughSeq)
  }

  isWritable(runId: string): boolean {
    const run = this.runs.get(runId)
    return run !== undefined && isWritable(run)
  }

  /** Ack logs open right now (for tests of the descriptor bound). */
  openLogCount(): number {
    return this.openLogs
  }

  /**
   * The runs a verify asks for: by run id, or the latest group for this host and path. A run with more
   * than inlineSpansMax spans comes without them (spanPage reads them).
   */
  query(host: string, requestedPath: string, runId?: string, options: { inlineSpansMax?: number } = {}): StoredRun[] {
    if (runId !== undefined) {
      const run = this.runs.get(runId)
      return run === undefined ? [] : [storedRun(run, options.inlineSpansMax)]
    }
    let latest: RunState | undefined
    for (const run of this.runs.values()) {
      if (run.meta.host !== host || run.meta.requestedPath !== requestedPath) continue
      if (latest === undefined || announceOrder(run, latest) > 0) latest = run
    }
    if (latest === undefined) return []
    const groupId = latest.meta.groupId
    return [...this.runs.values()]
      .filter((r) => r.meta.groupId === groupId && r.meta.host === host && r.meta.requestedPath === requestedPath)
      .sort((a, b) => a.meta.method.localeCompare(b.meta.method))
      .slice(0, maxClaims)
      .map((r) => storedRun(r, options.inlineSpansMax))
  }

  /** Spans the run holds in memory (0 for a run not on record). */
  spanCount(runId: string): number {
    return this.runs.get(runId)?.spans.length ?? 0
  }

  /**
   * A span-page of the run: the spans holding seqs afterSeq+1..throughSeq, at most maxCount (cut to
   * that range); undefined for a run not on record or throughSeq past its last acknowledged seq.
   */
  spanPage(runId: string, afterSeq: number, throughSeq: number, maxCount: number): Buffer | undefined {
    const run = this.runs.get(runId)
    if (run === undefined || run.creating === true || throughSeq > run.spans.throughSeq) return undefined
    return run.spans.page(afterSeq, throughSeq, maxCount)
  }

  /**
   * Every run on record for this host and path, newest first, at most maxClaims; live is false here
   * (the listener marks the runs whose writer is connected).
   */
  claims(host: string, requestedPath: string): Claim[] {
    return [...this.runs.values()]
      .filter((r) => r.meta.host === host && r.meta.requestedPath === requestedPath)
      .sort((a, b) => announceOrder(b, a))
      .slice(0, maxClaims)
      .map((r) => ({
        runId: r.meta.runId,
        groupId: r.meta.groupId,
        method: r.meta.method,
        announcedMs: r.announcedMs,
        ...(r.origin.peer === undefined ? {} : { peer: r.origin.peer }),
        ...(r.origin.authenticated === undefined ? {} : { authenticated: r.origin.authenticated }),
        live: false,
        ...(r.end === undefined ? {} : { end: r.end }),
        ackedThroughSeq: r.lastAckedSeq,
      }))
  }

  /**
   * One line per run, newest first (announcement order), only the campaign's runs when one is named;
   * live is false here (the listener marks the runs whose writer is connected).
   */
  summaries(campaign?: string): RunSummary[] {
    return this.newestFirst(campaign).map(summaryOf)
  }

  /** Every run with its summary and its stored acks, newest first (for the report). */
  runRecords(): Array<{ summary: RunSummary; run: StoredRun }> {
    return this.newestFirst().map((r) => ({ summary: summaryOf(r), run: storedRun(r) }))
  }

  private newestFirst(campaign?: string): RunState[] {
    return [...this.runs.values()]
      .filter((r) => r.creating !== true && (campaign === undefined || r.origin.campaign?.name === campaign))
      .sort((a, b) => announceOrder(b, a))
  }

  async close(): Promise<void> {
    while (this.verdictWrites.size > 0) await Promise.all(this.verdictWrites.values())
    while (this.committing !== undefined) await this.committing
    this.lock?.release()
    this.lock = undefined
  }
}

/**
 * Which of two runs was announced first (negative: a before b). announceIndex when both have one; a
 * run without one was stored by an older listener, before any run that has one; between two such
 * runs, their announcement times.
 */
function announceOrder(a: RunState, b: RunState): number {
  if (a.announceIndex !== undefined && b.announceIndex !== undefined) return a.announceIndex - b.announceIndex
  if (a.announceIndex !== undefined) return 1
  if (b.announceIndex !== undefined) return -1
  return a.announcedMs - b.announcedMs || a.meta.runId.localeCompare(b.meta.runId)
}

/**
 * Takes <dir>/lock (exclusive) and returns it, to hold for the listener's life; the OS releases it
 * when the process dies, however it dies.
 */
function lockDirectory(dir: string): FileLock {
  const path = join(dir, 'lock')
  return holdExclusiveLock(path, true, () =>
    usageError(
      `another listener is already using ${dir} (it holds ${path})`,
      'stop that listener, or give this one a --dir of its own; verify --acks can read the directory meanwhile',
    ),
  )!
}

/**
 * Undoes a failed announcement, best effort: meta.msgpack first (it alone makes the run exist at
 * replay), made durable, then the rest.
 */
function removeCreated(step: 'start' | 'dir' | 'log' | 'tmp' | 'meta', paths: { dir: string; logPath: string; tmpPath: string; metaPath: string }): void {
  const attempt = (fn: () => void): void => {
    try {
      fn()
    } catch {
      // best effort: what is left without meta.msgpack is skipped at replay
    }
  }
  if (step === 'meta') {
    attempt(() => unlinkSync(paths.metaPath))
    attempt(() => syncDirectory(paths.dir))
  }
  if (step === 'tmp' || step === 'meta') attempt(() => unlinkSync(paths.tmpPath))
  if (step !== 'start' && step !== 'dir') attempt(() => unlinkSync(paths.logPath))
  if (step !== 'start') attempt(() => rmdirSync(paths.dir))
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

/** Opens for reading without blocking: a FIFO planted in the directory must not hang the listener. */
const readFlags = fsConstants.O_RDONLY | fsConstants.O_NONBLOCK

/**
 * A whole small file, or 'missing' (ENOENT), 'not-a-directory' (ENOTDIR: its parent is a file),
 * 'not-a-file' or 'too-large'; any other error is a refusal.
 */
async function readBounded(path: string, maxBytes: number): Promise<Buffer | 'missing' | 'not-a-directory' | 'not-a-file' | 'too-large'> {
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

/** The size of a file that may be missing (0); a file that is not a regular one, or cannot be stat()ed, is a refusal. */
async function fileSize(path: string): Promise<number> {
  let stats
  try {
    stats = await stat(path)
  } catch (error) {
    if ((error as { code?: string }).code === 'ENOENT') return 0
    throw unreadable(path, error)
  }
  if (!stats.isFile()) throw unreadable(path, new Error('not a regular file'))
  return stats.size
}

/** A run's metadata that exists (or must exist) but cannot be used: a refusal, never a run left out. */
function damagedMeta(path: string, what: string): Error {
  return runtimeError(
    `could not read ${path}: ${what}`,
    "a run left out could turn a FAIL into a PASS, so nothing is answered without it; restore the file, or move the run's directory out of runs/ if the run does not matter",
  )
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
  return runtimeError(`could not read ${path}: ${describeSystemError(error)}`, 'the listener refuses to answer from an ack log it cannot read in full')
}

/**
 * Streams a run's ack log into run, chunk by chunk, up to the first entry that does not check out.
 * A missing log is an empty one (the listener died before creating it); any other read error throws.
 */
async function replayLog(path: string, run: RunState, maxSpans: number): Promise<{ validBytes: number; totalBytes: number; problem: string }> {
  let file: FileHandle
  try {
    file = await open(path, readFlags)
  } catch (error) {
    if ((error as { code?: string }).code === 'ENOENT') return { validBytes: 0, totalBytes: 0, problem: 'an empty' }
    throw unreadable(path, error)
  }
  try {
    const stats = await file.stat()
    // A FIFO or a device is not a log: refused like any log that cannot be read in full.
    if (!stats.isFile()) throw unreadable(path, new Error('not a regular file'))
    const totalBytes = stats.size
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
        if (length > maxEntryBodyBytes) return await tornTail(file, path, validBytes, totalBytes, 'a damaged')
        if (pending.length - offset - entryHeaderBytes < length) break
        const body = pending.subarray(offset + entryHeaderBytes, offset + entryHeaderBytes + length)
        if (xxh64(body) !== pending.readBigUInt64LE(offset + 4)) return await tornTail(file, path, validBytes, totalBytes, 'a torn')
        if (!applyEntry(run, body, maxSpans)) return await tornTail(file, path, validBytes, totalBytes, 'an implausible')
        offset += entryHeaderBytes + length
        validBytes += entryHeaderBytes + length
      }
      const { bytesRead } = await file.read(chunk, 0, chunk.length, position)
      if (bytesRead === 0) return await tornTail(file, path, validBytes, Math.max(totalBytes, position), 'a torn')
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

const badEntry: Record<string, string> = {
  'a torn': 'does not match its checksum',
  'a damaged': 'has a length no entry has',
  'an implausible': 'does not follow from the entries before it',
}

/**
 * What follows the valid prefix of a log, from its first bad entry on. Only the last commit's bytes
 * can be torn (each commit is written after the previous one's fdatasync returned, and writes at most
 * maxTornBytes), so the rest is a torn tail when its non-zero bytes end within maxTornBytes of the bad
 * entry (zeros after them: a size that reached the disk before the data, a sparse or preallocated
 * tail). Anything longer is damage in the middle of the log: a refusal, never the acks after it
 * dropped.
 */
async function tornTail(file: FileHandle, path: string, validBytes: number, totalBytes: number, problem: string): Promise<{ validBytes: number; totalBytes: number; problem: string }> {
  const chunk = Buffer.alloc(replayChunkBytes)
  const zeros = Buffer.alloc(replayChunkBytes)
  let position = validBytes
  for (;;) {
    const { bytesRead } = await file.read(chunk, 0, chunk.length, position)
    if (bytesRead === 0) return { validBytes, totalBytes: Math.max(totalBytes, position), problem }
    const read = chunk.subarray(0, bytesRead)
    // Holes and zeros compare in one memcmp; only a chunk with data is searched byte by byte.
    if (!read.equals(zeros.subarray(0, bytesRead))) {
      let last = bytesRead - 1
      while (read[last] === 0) last--
      const extent = position + last + 1 - validBytes
      if (extent > maxTornBytes) {
        throw runtimeError(
          `could not read ${path}: damaged in the middle: the entry at byte ${validBytes} ${badEntry[problem] ?? 'is damaged'}, and at least ${extent} bytes of data follow, more than the last commit could have torn`,
          'the listener refuses to answer from an ack log it cannot read in full (acks after the damage would be lost, turning a FAIL into a PASS)',
        )
      }
    }
    position += bytesRead
  }
}

/** Applies one checksummed log entry if it is consistent with what came before; false if not. */
function applyEntry(run: RunState, body: Buffer, maxSpans: number): boolean {
  let entry: LogEntry
  try {
    entry = logEntrySchema.parse(packr.unpack(body))
  } catch {
    return false
  }
  if (entry.k === 'steady') {
    if (run.end !== undefined || run.steadyMs !== null) return false
    run.steadyMs = entry.atMs
    return true
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
  addSpan(run, entry.fromSeq, entry.toSeq, entry.firstMs, entry.lastMs, maxSpans)
  return true
}

/** One acks.log entry as written: length, xxh64, msgpack body. Exported for tests that craft logs. */
export function frameLogEntry(entry: object): Buffer {
  const body = packr.pack(entry)
  const framed = Buffer.allocUnsafe(entryHeaderBytes + body.length)
  framed.writeUInt32LE(body.length, 0)
  framed.writeBigUInt64LE(xxh64(body), 4)
  body.copy(framed, entryHeaderBytes)
  return framed
}

function newRunState(meta: RunMeta, announcedMs: number, announceIndex: number | undefined, origin: RunOrigin): RunState {
  return { meta, announcedMs, announceIndex, origin, spans: new SpanTable(), steadyMs: null, verdict: null, lastAckedSeq: 0, retired: false, pendingEntries: [], durableThroughSeq: 0 }
}

function summaryOf(run: RunState): RunSummary {
  return {
    runId: run.meta.runId,
    groupId: run.meta.groupId,
    host: run.meta.host,
    path: run.meta.requestedPath,
    method: run.meta.method,
    announcedMs: run.announcedMs,
    ...(run.origin.peer === undefined ? {} : { peer: run.origin.peer }),
    live: false,
    ...(run.end === undefined ? {} : { end: run.end }),
    ackedThroughSeq: run.lastAckedSeq,
    steadyMs: run.steadyMs,
    verdict: run.verdict,
    campaign: run.origin.campaign ?? null,
  }
}

function addSpan(run: RunState, fromSeq: number, toSeq: number, firstMs: number, lastMs: number, maxSpans: number): void {
  run.spans.add(fromSeq, toSeq, firstMs, lastMs, maxSpans)
  run.lastAckedSeq = Math.max(run.lastAckedSeq, toSeq)
}

/**
 * The run as a runs reply carries it: its spans when there are at most inlineSpansMax of them, else
 * none, and ackedThroughSeq says how far they go (a verifier reads them page by page: spanPage).
 */
function storedRun(run: RunState, inlineSpansMax = Number.POSITIVE_INFINITY): StoredRun {
  return {
    meta: run.meta,
    announcedMs: run.announcedMs,
    ...(run.origin.peer === undefined ? {} : { peer: run.origin.peer }),
    ...(run.origin.writer === undefined ? {} : { writer: run.origin.writer }),
    ...(run.origin.authenticated === undefined ? {} : { authenticated: run.origin.authenticated }),
    ...(run.end === undefined ? {} : { end: run.end }),
    spans: run.spans.length <= inlineSpansMax ? run.spans.toArray() : [],
    ackedThroughSeq: run.spans.throughSeq,
  }
}
