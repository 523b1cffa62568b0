/**
 * The listener's durable memory: one directory per run under <dir>/runs/<runId>/ holding
 *   acks.log      the run's ack log (format and reader: ack-log.ts): a header naming the run, written
 *                 and fsynced first, then one checksummed entry per group commit (one fdatasync covers
 *                 every ack, steady and end queued while the previous fdatasync ran)
 *   meta.msgpack  the run's metadata, its announcement time and order (announceIndex), the peer
 *                 address it came from, the writer's environment and its campaign tag (absent in
 *                 older directories and for runs outside a campaign), sealed with its checksum
 *                 (sealed-file.ts); written to a temp file, fsynced, renamed into place last, then
 *                 both directories fsynced. A run exists for replay only once meta.msgpack does; a
 *                 failed announcement removes it first. No meta.msgpack and an empty log: an
 *                 announcement that never completed (skipped); meta.msgpack unreadable, not matching
 *                 its checksum or invalid, or missing while the log holds acks: damage, a refusal (a run
 *                 left out, or judged by a damaged record size or slot count, could turn a PASS into
 *                 a FAIL or a FAIL into a PASS). Files of older listeners have no checksum: they are
 *                 read as they are, checked against the schema only.
 *   verdict.msgpack  the verdict a verifier reported after the cut (the latest replaces an earlier
 *                 one), sealed like meta.msgpack: temp file, fsync, rename, directory fsync, before the
 *                 verifier is told verdict-ok. A damaged one (its checksum, its schema, or counts that
 *                 disagree with its verdict or with the run's acks: verdict-rules.ts) is reported at
 *                 startup (a warning naming the file) and the run shows no verdict: the acks, what
 *                 verdicts are judged from, are unharmed. But a sealed one that counted more acks than
 *                 the log holds proves the log lost recorded acks: a refusal naming the log.
 * The log also holds the run's first 'steady' (its writer said it is the moment to cut) and its end.
 * and <dir>/lock, flock()ed exclusively by the one listener that owns the directory (verify --acks
 * only reads and does not take it).
 *
 * Fault model: the listener can be killed, or its machine lose power, at any moment; its disk can fill
 * or damage what it holds. "Recorded" is sent only after a commit's write returned every byte and its
 * fdatasync returned, and each commit is one log entry, so only the last entry can be torn, and it was
 * never reported as recorded: replay ignores it with a warning. Any other bad entry is damage: a
 * refusal naming the file and the byte, never the acks after it dropped (ack-log.ts has the rules).
 * Replay streams the log in chunks (a log of any size replays) and turns any read error other than a
 * missing file into a refusal: fewer acks than were recorded would turn a FAIL into a PASS. Ack
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
import { EventEmitter } from 'node:events'
import { closeSync, constants as fsConstants, fdatasync, fsync, mkdirSync, openSync, renameSync, rmdirSync, unlinkSync, writeSync } from 'node:fs'
import { open, readdir, rename, rm, type FileHandle } from 'node:fs/promises'
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
import { verdictDisagreement } from '../protocol/verdict-rules.js'
import { describeSystemError, runtimeError, usageError } from '../errors.js'
import { frameCommit, logHeader, maxCommitBytes, maxEndDetailBytes, maxItemsPerCommit, replayLog, type LogItem, type LogReplay } from './ack-log.js'
import { seal, unseal, type SealedKind } from './sealed-file.js'
import { SpanTable } from './span-table.js'

export { frameCommit, frameLogEntry, logHeader } from './ack-log.js'
export { spanWindowMs } from './span-table.js'
/** meta.msgpack is a few KiB (a fingerprint included); anything over this is damage. */
const maxMetaFileBytes = 1024 * 1024
/** Runs whose write+fdatasync may be in the threadpool at once (it has 4 threads). */
export const commitLanes = 2
/** A run's acks may be stamped up to this long before its announcement (clock steps). */
const clockSkewMs = 60_000
const packr = new Packr({ useRecords: false, int64AsType: 'number', mapsAsObjects: true })

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
  /** Items accepted but not yet written (consecutive acks share one). */
  pendingEntries: LogItem[]
  durableThroughSeq: number
  /** Commits in the run's log (written by this listener or replayed); the next one is numbered one more. */
  commits: number
  /** Bytes of the run's files (acks.log, meta.msgpack, verdict.msgpack), for usage(). */
  bytesOnDisk: number
  /** Of those, verdict.msgpack's (replaced by each new verdict). */
  verdictBytes: number
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
      await removePrunedLeftovers(dir)
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
   * acks; or sealed while acks.log lacks the header written before it): a refusal naming the file.
   * Judging the rest of a group, or an older run of the path, without this one could turn a FAIL into a PASS.
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
      const { items, totalBytes } = await itemsInLog(logPath, runId)
      if (items === 0) {
        // Created first (empty, or its header alone), meta.msgpack last: the listener died in between,
        // before the writer was told to start.
        this.warnings.push(`run ${runId}: no metadata and an empty ack log (its announcement never completed), skipped`)
        return
      }
      throw damagedMeta(metaPath, `it is missing, but ${logPath} holds ${totalBytes} bytes of acks`)
    }
    if (metaBytes === 'not-a-file') throw damagedMeta(metaPath, 'not a regular file')
    if (metaBytes === 'too-large') throw damagedMeta(metaPath, `it is over ${maxMetaFileBytes} bytes, more than any run's metadata`)
    const decoded = unsealed('meta', metaBytes)
    if ('problem' in decoded) throw damagedMeta(metaPath, decoded.problem)
    const parsed = metaFileSchema.safeParse(decoded.value)
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
    const replayed = await replayLog(logPath, runId, (item) => applyItem(run, item, this.maxSpans))
    // A sealed meta.msgpack was written by this version, after the log's header was fsynced: no crash
    // leaves it without that header. (Older listeners created an empty log: a legacy run may have one.)
    if (decoded.sealed && replayed.format !== 2) throw damagedLog(logPath, logWithoutHeader(replayed))
    if (replayed.tornTail !== null) this.warnings.push(tornTailWarning(runId, logPath, replayed.tornTail))
    run.commits = replayed.commits
    run.durableThroughSeq = run.lastAckedSeq
    run.bytesOnDisk = metaBytes.length + replayed.totalBytes
    // After the log: a verdict must agree with the acks it judged.
    run.verdict = await this.replayVerdict(run)
    this.runs.set(runId, run)
    this.countRun(run, 1)
    this.lastAnnounceIndex = Math.max(this.lastAnnounceIndex, metaFile.announceIndex ?? 0)
  }

  /**
   * The run's verdict.msgpack, if there is one and it checks out. A damaged one (unreadable, invalid,
   * another run's) is reported as a warning naming the file, never dropped in silence; the run then
   * shows no verdict until a verifier reports one again. A sealed one that counted more acks than the
   * log holds proves the log lost recorded acks: a refusal naming the log.
   */
  private async replayVerdict(run: RunState): Promise<StoredVerdict | null> {
    const runId = run.meta.runId
    const path = join(this.runDir(runId), 'verdict.msgpack')
    let bytes: Awaited<ReturnType<typeof readBounded>>
    try {
      bytes = await readBounded(path, maxVerdictFileBytes)
    } catch (error) {
      this.warnings.push(`run ${runId}: ${(error as Error).message}; the run's verdict is not shown (verify it again to store a new one)`)
      return null
    }
    if (bytes === 'missing') return null
    if (Buffer.isBuffer(bytes)) {
      run.verdictBytes = bytes.length
      run.bytesOnDisk += bytes.length
    }
    let problem: string
    if (bytes === 'not-a-directory' || bytes === 'not-a-file') problem = 'not a regular file'
    else if (bytes === 'too-large') problem = `it is over ${maxVerdictFileBytes} bytes, more than any verdict`
    else {
      const decoded = unsealed('verdict', bytes)
      const parsed = verdictFileSchema.safeParse('value' in decoded ? decoded.value : undefined)
      if ('problem' in decoded) problem = decoded.problem
      else if (!parsed.success) problem = describeInvalid(parsed.error).replace("a run's metadata", 'a verdict')
      else if (parsed.data.runId !== runId) problem = `it is the verdict of run ${parsed.data.runId}, not of run ${runId}`
      else if (decoded.sealed && parsed.data.result.acked > run.lastAckedSeq) {
        // Its checksum vouches for it: the acks it counted were in the log when it was judged, so the
        // log lost them since (a torn tail here is not the commit a crash cut short).
        throw damagedLog(
          join(this.runDir(runId), 'acks.log'),
          `it holds ${run.lastAckedSeq} acknowledged records, but the run's verdict stored after them (${path}, checksummed) counted ${parsed.data.result.acked}: recorded acks are missing from the log`,
        )
      } else {
        // A replayed run takes no more acks, and a verdict was stored only once its acks were final.
        const disagreement = verdictDisagreement(parsed.data.result, run.meta.method, run.lastAckedSeq, true)
        if (disagreement === undefined) return parsed.data.result
        problem = `the verdict ${disagreement}`
      }
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
    this.countRun(run, 1) // counted at once too: announcements under way count against the bounds
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
        // The header names the run (a log copied into another run's directory is refused) and the format.
        const header = logHeader(meta.runId)
        writeAllSync(log, header, logPath)
        this.countBytes(run, header.length)
        await fsyncAsync(log)
      } finally {
        closeSync(log)
        this.openLogs--
      }
      const file = openSync(tmpPath, 'wx')
      step = 'tmp'
      try {
        const sealed = seal('meta', packr.pack({ meta, announcedMs, announceIndex, ...origin }))
        writeAllSync(file, sealed, tmpPath)
        this.countBytes(run, sealed.length)
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
      this.countRun(run, -1)
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
    return Math.max(Math.round(run.announcedMs + elapsedMs), run.spans.lastAckMs ?? 0, run.announcedMs)
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
    // Stamped like its acks: a listener clock stepped (to 1970, or back) mid-run cannot write an end its replay refuses.
    atMs = this.ackStampMs(runId, atMs)
    // Cut so that an end alone fits a commit (maxCommitBytes); kept in memory as it is logged.
    if (detail !== undefined) detail = cutToBytes(detail, maxEndDetailBytes)
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
    atMs = this.ackStampMs(runId, atMs) // as endRun
    run.steadyMs = atMs
    this.queue(run, { k: 'steady', atMs })
    return true
  }

  /**
   * Stores the verdict a verifier reported for the run, replacing an earlier one: verdict.msgpack
   * written to a temporary file, fsynced, renamed into place and the run's directory fsynced, all
   * before the promise resolves (the verifier is told verdict-ok only then). Verdicts of one run are
   * stored one after the other. A not-judged verdict never replaces a judged one (pass, fail,
   * inconclusive): it judged no record (the file since holds a newer run, say), and a stored FAIL
   * must stay shown.
   */
  recordVerdict(runId: string, result: StoredVerdict): Promise<void> {
    const run = this.runs.get(runId)
    if (run === undefined || run.creating === true) return Promise.reject(new Error(`recordVerdict on unknown run ${runId}`))
    const previous = this.verdictWrites.get(runId) ?? Promise.resolve()
    const write = previous.then(async () => {
      if (result.verdict === 'not-judged' && run.verdict !== null && run.verdict.verdict !== 'not-judged') return
      const dir = this.runDir(runId)
      const tmpPath = join(dir, 'verdict.msgpack.tmp')
      const path = join(dir, 'verdict.msgpack')
      try {
        const file = openSync(tmpPath, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_TRUNC, 0o644)
        const sealed = seal('verdict', packr.pack({ runId, result }))
        try {
          writeAllSync(file, sealed, tmpPath)
          await fsyncAsync(file)
        } finally {
          closeSync(file)
        }
        renameSync(tmpPath, path)
        this.countBytes(run, sealed.length - run.verdictBytes)
        run.verdictBytes = sealed.length
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

  private queue(run: RunState, entry: LogItem): void {
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
    // One commit is one log entry (numbered, checksummed): a crash can tear only the entry being
    // written, so replay can take any other bad entry for the damage it is. The items that fit in
    // maxCommitBytes (which bounds a torn tail at replay), at most maxItemsPerCommit (in practice: ack,
    // steady, ack, end); the rest waits for the next round.
    const commit = run.commits + 1
    const { items, entry } = framedCommit(commit, run.pendingEntries)
    let throughSeq = run.durableThroughSeq
    for (const item of items) if (item.k === 'ack') throughSeq = item.toSeq
    run.commits = commit
    // An ack arriving during the write extends the last item left here, never one being written.
    run.pendingEntries = run.pendingEntries.slice(items.length)
    if (run.pendingEntries.length > 0) this.markDirty(run)
    const path = join(this.runDir(run.meta.runId), 'acks.log')
    // Opened and closed within the commit: live runs hold no descriptor between commits. No O_CREAT:
    // the log was created with the run, and a log that vanished since is a failure, not a fresh start.
    let log: number | undefined
    try {
      log = openSync(path, fsConstants.O_WRONLY | fsConstants.O_APPEND | fsConstants.O_NONBLOCK)
      this.openLogs++
      // write() lands in the page cache (synchronous: one event-loop trip fewer); fdatasync in the threadpool.
      writeAllSync(log, entry, path)
      this.countBytes(run, entry.length)
      await fdatasyncAsync(log)
    } catch (error) {
      // Never retried: after a failed write or fdatasync the log's durability is unknown.
      run.failed = error as Error
      run.pendingEntries = []
      // The acks of this commit and those queued after it were never recorded (the writer is told it
      // failed): the run answers with the acks it recorded, so a verdict counts only those, as a
      // restart's replay of the log will.
      run.spans.truncate(run.durableThroughSeq)
      run.lastAckedSeq = run.durableThroughSeq
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

  // --- usage and prune (retention and quotas: quotas.ts, prune.ts) --------------------------------
  // Kept together so the store's rewrite can take them over as they are: usage() is counted as runs
  // are reserved and files written (never by walking the runs), prune() removes ended runs durably.

  private readonly usageTotal = { runs: 0, bytes: 0 }
  private readonly usageByPeer = new Map<string, { runs: number; bytes: number }>()

  /**
   * Runs and bytes on record, in total and per peer address (as the listener saw it; 'unknown' for
   * runs of older listeners). Announcements under way count. byPeer is a view: read it at once, do not keep it.
   */
  usage(): StoreUsage {
    return { total: { ...this.usageTotal }, byPeer: this.usageByPeer }
  }

  private peerUsage(run: RunState): { runs: number; bytes: number } {
    const peer = run.origin.peer ?? unknownPeer
    let entry = this.usageByPeer.get(peer)
    if (entry === undefined) this.usageByPeer.set(peer, (entry = { runs: 0, bytes: 0 }))
    return entry
  }

  /** Adds (sign 1) or removes (sign -1) a run and its bytes from the tallies. */
  private countRun(run: RunState, sign: 1 | -1): void {
    const peer = this.peerUsage(run)
    for (const tally of [this.usageTotal, peer]) {
      tally.runs += sign
      tally.bytes += sign * run.bytesOnDisk
    }
    if (peer.runs === 0) this.usageByPeer.delete(run.origin.peer ?? unknownPeer)
  }

  private countBytes(run: RunState, bytes: number): void {
    run.bytesOnDisk += bytes
    this.usageTotal.bytes += bytes
    this.peerUsage(run).bytes += bytes
  }

  /** What pruning the run would free, or why it may not be pruned. */
  pruneCandidate(runId: string): { bytes: number } | { refused: string } {
    const run = this.runs.get(runId)
    if (run === undefined || run.creating === true) return { refused: `run ${runId} is not on record` }
    if (run.end === undefined) return { refused: `run ${runId} has not ended (its writer may be live, or vanished with no end logged)` }
    if (!run.retired || run.pendingEntries.length > 0 || this.dirty.has(run)) return { refused: `run ${runId} still has entries to write` }
    if (this.verdictWrites.has(runId)) return { refused: `run ${runId} has a verdict being stored` }
    return { bytes: run.bytesOnDisk }
  }

  /**
   * Removes ended runs for good, all or none refused (a live or unended run is never removed). Each
   * run's directory is first renamed to runs/.pruned-<id> and runs/ fsynced: a crash before that
   * leaves the run whole, after it a directory replay skips and open() deletes. Only then is the run
   * forgotten and its directory deleted. Never a run with some files gone, which replay calls damage.
   */
  async prune(runIds: readonly string[]): Promise<void> {
    const refusals = runIds.map((id) => this.pruneCandidate(id)).filter((c): c is { refused: string } => 'refused' in c)
    if (refusals.length > 0) throw new StorageError(`not pruned: ${refusals.map((r) => r.refused).join('; ')}`)
    const runsDir = join(this.dir, 'runs')
    const moved: string[] = []
    try {
      for (const runId of new Set(runIds)) {
        await rename(this.runDir(runId), join(runsDir, `${prunedPrefix}${runId}`))
        moved.push(runId)
      }
    } finally {
      // Whatever was renamed is gone from replay's view: forget it here too, durably.
      for (const runId of moved) {
        const run = this.runs.get(runId)!
        this.runs.delete(runId)
        this.countRun(run, -1)
      }
      if (moved.length > 0) await syncDirectoryAsync(runsDir)
    }
    for (const runId of moved) await rm(join(runsDir, `${prunedPrefix}${runId}`), { recursive: true, force: true })
  }
}

export interface StoreUsage {
  readonly total: { readonly runs: number; readonly bytes: number }
  readonly byPeer: ReadonlyMap<string, { readonly runs: number; readonly bytes: number }>
}

/** The peer key of runs stored without a peer address (older listeners). */
const unknownPeer = 'unknown'
/** A run directory being pruned: replay skips it (not a run id), open() deletes it. */
const prunedPrefix = '.pruned-'

/** Deletes run directories a crash left mid-prune (renamed, so already gone from every run's view). */
async function removePrunedLeftovers(dir: string): Promise<void> {
  const runsDir = join(dir, 'runs')
  for (const name of await readdir(runsDir)) {
    if (name.startsWith(prunedPrefix)) await rm(join(runsDir, name), { recursive: true, force: true })
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

/**
 * Commit n of the first queued items that fit in maxCommitBytes (at most maxItemsPerCommit; the first
 * always fits: an ack or steady is tens of bytes, an end's detail is cut to fit).
 */
function framedCommit(n: number, pending: readonly LogItem[]): { items: LogItem[]; entry: Buffer } {
  let items = pending.slice(0, 1)
  let entry = frameCommit(n, items)
  for (let count = 2; count <= Math.min(pending.length, maxItemsPerCommit); count++) {
    const more = frameCommit(n, pending.slice(0, count))
    if (more.length > maxCommitBytes) break
    items = pending.slice(0, count)
    entry = more
  }
  if (entry.length > maxCommitBytes) throw new Error(`commit ${n} is ${entry.length} bytes, over the commit bound of ${maxCommitBytes}`)
  return { items, entry }
}

/** text cut to at most maxBytes of UTF-8, whole characters only, marked as cut with '…'. */
function cutToBytes(text: string, maxBytes: number): string {
  if (Buffer.byteLength(text) <= maxBytes) return text
  let kept = ''
  let bytes = Buffer.byteLength('…')
  for (const char of text) {
    bytes += Buffer.byteLength(char)
    if (bytes > maxBytes) break
    kept += char
  }
  return `${kept}…`
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

/** A run's metadata that exists (or must exist) but cannot be used: a refusal, never a run left out. */
function damagedMeta(path: string, what: string): Error {
  return runtimeError(
    `could not read ${path}: ${what}`,
    "a run left out could turn a FAIL into a PASS, so nothing is answered without it; restore the file, or move the run's directory out of runs/ if the run does not matter",
  )
}

/** A run's ack log that must hold more than it does: a refusal, never a run judged with fewer acks. */
function damagedLog(path: string, what: string): Error {
  return runtimeError(
    `could not read ${path}: ${what}`,
    "the listener refuses to answer from a damaged ack log (a run judged with fewer acks than were recorded could turn a FAIL into a PASS); restore the file, or move the run's directory out of runs/ if the run does not matter",
  )
}

/** Why a log of a run whose meta.msgpack is sealed (this version's) is damage: it lacks the header written before that file. */
function logWithoutHeader(replayed: LogReplay): string {
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
  return runtimeError(`could not read ${path}: ${describeSystemError(error)}`, 'the listener refuses to answer from an ack log it cannot read in full')
}

/** Applies one replayed log item if it can follow what came before; else what makes it impossible (damage). */
function applyItem(run: RunState, item: LogItem, maxSpans: number): string | undefined {
  if (item.k === 'steady') {
    if (run.end !== undefined) return "says steady after the run's end"
    if (run.steadyMs !== null) return 'says steady a second time'
    run.steadyMs = item.atMs
    return undefined
  }
  if (item.k === 'end') {
    if (run.end !== undefined) return 'ends the run a second time'
    run.end = { reason: item.reason, ...(item.detail === undefined ? {} : { detail: item.detail }), atMs: item.atMs }
    return undefined
  }
  const seqs = `seqs ${item.fromSeq}-${item.toSeq}`
  if (run.end !== undefined) return `acknowledges ${seqs} after the run's end`
  if (item.fromSeq !== run.lastAckedSeq + 1 || item.toSeq < item.fromSeq) {
    return `acknowledges ${seqs} after seq ${run.lastAckedSeq} (not contiguous: an entry duplicated, out of order or missing)`
  }
  if (item.firstMs > item.lastMs || item.firstMs < run.announcedMs - clockSkewMs) {
    return `acknowledges ${seqs} at ${new Date(item.firstMs).toISOString()}-${new Date(item.lastMs).toISOString()}, not after the run's announcement at ${new Date(run.announcedMs).toISOString()}`
  }
  if (item.toSeq > maxPlausibleSeq(run.announcedMs, item.lastMs)) return `acknowledges seq ${item.toSeq} by ${new Date(item.lastMs).toISOString()}, more than a writer can have written by then`
  addSpan(run, item.fromSeq, item.toSeq, item.firstMs, item.lastMs, maxSpans)
  return undefined
}

/** How many items a log holds, for a run directory without metadata (any damage in the log is a refusal too). */
async function itemsInLog(path: string, runId: string): Promise<{ items: number; totalBytes: number }> {
  let items = 0
  const { totalBytes } = await replayLog(path, runId, () => void items++)
  return { items, totalBytes }
}

/** The warning for a torn tail: what was ignored, where, and why that is safe (and when it would not be). */
function tornTailWarning(runId: string, path: string, tail: NonNullable<LogReplay['tornTail']>): string {
  return (
    `run ${runId}: ignored ${tail.bytes} bytes of a torn ack log tail at byte ${tail.atByte} of ${path} (${tail.what}): ` +
    'the last commit, cut short by a crash, was never reported as recorded (if the listener did not crash, its last entry is damaged)'
  )
}

/** A file's body (sealed-file.ts) decoded from msgpack, or what is wrong with it. */
function unsealed(kind: SealedKind, bytes: Buffer): { readonly value: unknown; readonly sealed: boolean } | { readonly problem: string } {
  const file = unseal(kind, bytes)
  if (file.kind === 'damaged') return { problem: `${file.problem} (damaged)` }
  try {
    return { value: packr.unpack(file.body), sealed: file.kind === 'sealed' }
  } catch {
    return { problem: `its ${bytes.length} bytes are not valid msgpack` }
  }
}

function newRunState(meta: RunMeta, announcedMs: number, announceIndex: number | undefined, origin: RunOrigin): RunState {
  return { meta, announcedMs, announceIndex, origin, spans: new SpanTable(), steadyMs: null, verdict: null, lastAckedSeq: 0, retired: false, pendingEntries: [], durableThroughSeq: 0, commits: 0, bytesOnDisk: 0, verdictBytes: 0 }
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
    ...(run.spans.lastAckMs === undefined ? {} : { lastAckMs: run.spans.lastAckMs }),
    verified: run.verdict !== null,
  }
}
