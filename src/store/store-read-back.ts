/**
 * A run's spans out of memory and back (the read-back cache); run-state.ts says how they are made.
 *
 * In the listener, memory per run
 * is bounded whatever its length: a run read from runs/ at start, a run retired and folded, and a live
 * run past residentSpansMax spans keep a summary only (SpanSummary: the count and last two spans,
 * which go on taking a live run's spans exactly); its spans are read back for a query (queryAsync,
 * spanPageAsync) from its log, 64 KiB at a time, up to where its folded bytes end, then from its
 * commits still in the journal; the copy is cached within a span budget (cachedSpansMax) and brought
 * up to date from where it ended before each use, while its log's stamp (logStamp: inode, size, mtime,
 * ctime) is the one it was read at or this listener's fold left (else it is read whole again: damage
 * in bytes read before is found). Read-backs go at most readBacksAtOnce at a time, each counted
 * against that budget while under way; a start without a catalog keeps each replayed run's summary
 * only at once (cacheAtStart). A retired run drops its writer's fingerprint once
 * folded (see evict).
 */
import { join } from 'node:path'
import type { WriterEnv } from '../protocol/messages.js'
import { logHeader } from './ack-log.js'
import { readFramesBetween, replayLog } from './ack-log-reader.js'
import { damagedSegment } from './journal.js'
import { SpanSummary } from './span-table.js'
import type { MinHeap } from './min-heap.js'
import { damagedLog, damagedMeta, logStamp, maxMetaFileBytes, readBounded } from './run-files.js'
import { type RunState, announceOrder, applyCommitFrame, applyItem, newRunState, noSpans } from './run-state.js'
import { StoreReplay } from './store-replay.js'
import { queryChunkBytes } from './store-state.js'

/** A run's spans read back for queries: the run replayed from its log and the journal through copy.appliedBytes (none when only its writer was read), and its writer from meta.msgpack. */
interface ReadBack {
  /** The run it was read for (a run id pruned and announced again is another run: its entry is never served for it). */
  readonly of: RunState
  readonly copy: RunState | undefined
  readonly writer: WriterEnv | undefined
}

/**
 * Read-backs of runs under way at once, in all (others wait their turn, first come first served):
 * each builds a whole copy of its run before the cache takes it, so spans in memory are the cache
 * plus at most this many runs, however many queries ask at once.
 */
const readBacksAtOnce = 2

/** The store with its runs' spans out of memory and read back for queries, within the cache's bounds. */
export abstract class StoreReadBack extends StoreReplay {
  /** Spans and writers of evicted runs read back for queries, least recently used first. */
  protected readonly readBack = new Map<string, ReadBack>()
  private readonly readingBack = new Map<RunState, Promise<ReadBack>>()
  /**
   * Spans each read-back entry was counted with, and their sum: kept as entries come and go (summed
   * over the whole cache at each one, the background check of 100,000 runs cost ~1 ms a run, growing).
   */
  private readonly readBackCounted = new Map<string, number>()
  private readBackSpans = 0
  /**
   * During the listener's start only: the runs whose spans the read-back cache holds, oldest first.
   * Runs are replayed in directory order; this keeps the newest that fit (see cacheAtStart).
   */
  protected startCache: MinHeap<RunState> | undefined
  /** Read-backs under way (at most readBacksAtOnce), the queries waiting for one in order, and the spans they may bring. */
  private readBacksRunning = 0
  private readonly readBackQueue: Array<() => void> = []
  private readingSpans = 0
  /** Only the listener's store evicts (verify --acks and report read a directory once). */
  protected evicting = false

  /**
   * Bounded memory per run: a retired run wholly in runs/ (nothing queued, nothing in the journal)
   * keeps its summary only; its spans and its writer's fingerprint are read back from its files when a
   * query asks (queryAsync, spanPageAsync). Its spans are what its log replays (they are made from the
   * logged items), so a reply is the same before and after they leave memory, and after a restart.
   */
  protected evict(run: RunState): void {
    if (!this.evicting || !run.retired || run.failed !== undefined || run.creating === true || run.pendingEntries.length > 0) return
    // Every commit given is durable and applied (none in a round being written): the table is the whole log's.
    if (run.evicted === undefined && run.appliedBytes === run.logBytes) {
      const spans = run.spans
      this.evictSpans(run)
      // Kept in the read-back cache while it has room (newest runs first): the first
      // query after a restart, the verify after a cut, needs no second read of a long log.
      const entry = { of: run, copy: { ...run, evicted: undefined, spans, pendingEntries: [] }, writer: run.origin.writer }
      if (this.startCache === undefined) this.cacheSpans(run.meta.runId, entry, true)
      else this.cacheAtStart(run, entry)
    }
    const writer = run.origin.writer
    if (writer !== undefined && run.writerTrimmed !== true) {
      run.origin = { ...run.origin, writer: { bootId: writer.bootId, fingerprint: null } }
      run.writerTrimmed = true
    }
  }

  /** A run just replayed at start, wholly in runs/: its summary only, its spans cached while the newest runs leave room. */
  protected summarizeReplayed(runId: string): void {
    const run = this.runs.get(runId)
    // Skipped (no metadata and an empty log, not a directory): nothing held.
    if (run === undefined || run.evicted !== undefined) return
    const spans = run.spans
    this.evictSpans(run)
    this.cacheAtStart(run, { of: run, copy: { ...run, evicted: undefined, spans, pendingEntries: [] }, writer: run.origin.writer })
  }

  /**
   * At start, runs come in directory order: a run's spans go in the cache if they fit once older runs
   * cached are dropped (oldest first), never dropping a newer one for it. So the cache ends holding
   * the newest runs that fit, as if filled newest first, while only it and the run replayed are held.
   */
  private cacheAtStart(run: RunState, entry: ReadBack): void {
    const cached = this.startCache!
    const spans = entry.copy?.spans.length ?? 0
    const older: RunState[] = []
    let freed = 0
    const full = (): boolean =>
      this.readBackSpans - freed + spans > this.cachedSpansMax || this.readBack.size - older.length >= this.cachedRunsMax
    while (full() && cached.size > 0 && announceOrder(cached.peek()!, run) < 0) {
      const oldest = cached.pop()!
      freed += this.readBackCounted.get(oldest.meta.runId) ?? 0
      older.push(oldest)
    }
    if (full()) {
      for (const kept of older) cached.push(kept)
      return
    }
    for (const dropped of older) this.uncache(dropped.meta.runId)
    this.cacheSpans(run.meta.runId, entry, true)
    cached.push(run)
  }

  /**
   * The start is over: the cache's entries ordered oldest run first (the least recently used, dropped
   * first), so the newest runs, those a verify after a cut asks for, stay longest.
   */
  protected endStartCache(): void {
    const cached = this.startCache
    this.startCache = undefined
    for (let run = cached?.pop(); run !== undefined; run = cached?.pop()) {
      const entry = this.readBack.get(run.meta.runId)
      if (entry === undefined) continue
      this.readBack.delete(run.meta.runId)
      this.readBack.set(run.meta.runId, entry)
    }
  }

  /** The run's spans leave memory: its summary stays (and takes a live run's next spans), the table is read back for a query. */
  protected evictSpans(run: RunState): void {
    run.evicted = { spanCount: run.spans.length, lastAckMs: run.spans.lastAckMs, summary: SpanSummary.of(run.spans) }
    run.spans = noSpans
  }

  /**
   * The run as a query sees it: its spans (and writer) read back if evicted, through every commit
   * durable when the query asked (a cached copy of a live run is brought up to date first, from where
   * it ended: never served stale, never read whole again).
   */
  protected async resident(run: RunState): Promise<RunState> {
    if (run.evicted === undefined && run.writerTrimmed !== true) return run
    const runId = run.meta.runId
    const throughBytes = run.appliedBytes
    // A trimmed writer was there when it was trimmed: an entry without one has not read it yet.
    const current = (entry: ReadBack | undefined): entry is ReadBack =>
      entry !== undefined &&
      (run.evicted === undefined || (entry.copy !== undefined && entry.copy.appliedBytes >= throughBytes)) &&
      (run.writerTrimmed !== true || entry.writer !== undefined)
    let entry = this.cachedFor(run)
    // A copy of a log changed since it was read (by anything but the fold) is not served: read again, damage is found.
    if (entry?.copy !== undefined && run.evicted !== undefined && (await logStamp(join(this.runDir(runId), 'acks.log'))) !== run.logSeen) {
      this.uncache(runId)
      entry = undefined
    }
    // At most twice: a read under way may have started before the query (its copy then ends earlier).
    for (let pass = 0; !current(entry) && pass < 3; pass++) {
      let reading = this.readingBack.get(run)
      if (reading === undefined) {
        reading = this.readBackInTurn(run).finally(() => this.readingBack.delete(run))
        this.readingBack.set(run, reading)
      }
      entry = await reading
      this.cacheSpans(runId, entry)
    }
    if (!current(entry)) throw new Error(`run ${runId}: its spans read back do not reach byte ${throughBytes} of its log`)
    this.cacheSpans(runId, entry)
    return {
      ...run,
      spans: run.evicted === undefined ? run.spans : entry.copy!.spans,
      origin: entry.writer === undefined ? run.origin : { ...run.origin, writer: entry.writer },
    }
  }

  /**
   * readBackRun in its turn (at most readBacksAtOnce at once, first come first served). The run's
   * span count is counted against the cache while it is read (least recently used entries dropped to
   * make room). A slot is held only while one run's files are read, never while waiting for another:
   * a query of a group waits for each member's turn in order, and never deadlocks.
   */
  private async readBackInTurn(run: RunState): Promise<ReadBack> {
    await this.readBackSlot()
    const runId = run.meta.runId
    // Taken once its turn came: a copy waiting out of the cache would be held uncounted.
    const cached = this.cachedFor(run)
    this.uncache(runId) // its copy is being brought up to date in place: no query reads it half done
    const reservedSpans = run.evicted === undefined ? 0 : Math.min(run.evicted.spanCount ?? this.maxSpans, this.maxSpans)
    this.readingSpans += reservedSpans
    this.trimCache(undefined)
    try {
      return await this.readBackRun(run, cached)
    } finally {
      this.readingSpans -= reservedSpans
      this.releaseReadBackSlot()
    }
  }

  private async readBackSlot(): Promise<void> {
    if (this.readBacksRunning < readBacksAtOnce) {
      this.readBacksRunning++
      return
    }
    await new Promise<void>((resolve) => this.readBackQueue.push(resolve))
  }

  /** The slot goes to the first query waiting (none can take it before it), else is free. */
  private releaseReadBackSlot(): void {
    const next = this.readBackQueue.shift()
    if (next === undefined) this.readBacksRunning--
    else next()
  }

  /**
   * A run's spans read back (or just replayed) kept as the most recently used, the least recently used
   * dropped past cachedSpansMax (read-backs under way counted in it). One run larger than the cache
   * stays alone while no other read-back is under way (its pages need no read each).
   */
  protected cacheSpans(runId: string, entry: ReadBack, onlyIfRoom = false): void {
    // Read for a run no longer on record (pruned while it was read, its id maybe announced again): not kept.
    if (this.runs.get(runId) !== entry.of) return
    const spans = entry.copy?.spans.length ?? 0
    if (
      onlyIfRoom &&
      (this.readBackSpans + this.readingSpans + spans > this.cachedSpansMax ||
        (this.readBack.size >= this.cachedRunsMax && !this.readBack.has(runId)))
    )
      return
    this.uncache(runId)
    // Larger than what the read-backs under way leave: not kept (only the query that asked holds it).
    if (this.readingSpans > 0 && this.readingSpans + spans > this.cachedSpansMax) return
    this.readBack.set(runId, entry)
    this.readBackCounted.set(runId, spans)
    this.readBackSpans += spans
    this.trimCache(runId)
  }

  /** Least recently used entries dropped until the cache and the read-backs under way fit cachedSpansMax, and the cache cachedRunsMax (keep stays). */
  private trimCache(keep: string | undefined): void {
    for (const id of this.readBack.keys()) {
      if ((this.readBackSpans + this.readingSpans <= this.cachedSpansMax && this.readBack.size <= this.cachedRunsMax) || id === keep) break
      this.uncache(id)
    }
  }

  /** The run's entry in the read-back cache: none when the entry was read for another run of the same id. */
  protected cachedFor(run: RunState): ReadBack | undefined {
    const entry = this.readBack.get(run.meta.runId)
    return entry?.of === run ? entry : undefined
  }

  /** A run's spans out of the read-back cache, taken back from its count as they were counted. */
  protected uncache(runId: string): void {
    this.readBackSpans -= this.readBackCounted.get(runId) ?? 0
    this.readBackCounted.delete(runId)
    this.readBack.delete(runId)
  }

  /**
   * A run's spans read back: its log streamed (in small chunks, yielding between them: a long run never
   * holds the event loop) up to where its folded bytes end, then its commits still in the journal
   * (segments not folded yet, in log order, checked contiguous), all parsed and applied by the rules
   * of a replay; from where a cached copy ended when there is one. Its writer from meta.msgpack. Both
   * checked again: a file damaged since start refuses the query naming it (damage is named at query
   * time too, never fewer acks).
   */
  private async readBackRun(run: RunState, cached: ReadBack | undefined): Promise<ReadBack> {
    const runId = run.meta.runId
    const logPath = join(this.runDir(runId), 'acks.log')
    let copy = cached?.copy
    if (run.evicted !== undefined) {
      // Taken at once (no await before): the journal's commits of the run and what is durable of it now.
      const journaled = this.journaledCommits(run)
      const through = { bytes: run.appliedBytes, seq: run.durableThroughSeq }
      try {
        copy = await this.readBackLog(run, copy, logPath, { ...journaled, logEnd: journaled.logEnd ?? through.bytes })
        for (const { at, frame } of journaled.frames) {
          if (at < copy.appliedBytes) continue
          const problem =
            at === copy.appliedBytes
              ? applyCommitFrame(copy, frame, this.maxSpans)
              : `is at byte ${at}, where the run's commits ended at byte ${copy.appliedBytes}`
          if (problem !== undefined) throw damagedSegment(this.journalPathOf(runId), 0, `a commit of run ${runId} ${problem}`)
        }
      } catch (error) {
        this.uncache(runId)
        throw error
      }
      if (copy.appliedBytes !== through.bytes || copy.lastAckedSeq !== through.seq) {
        throw damagedLog(
          logPath,
          `it no longer holds what the listener recorded (acks through seq ${copy.lastAckedSeq} in ${copy.appliedBytes} bytes, where ${through.seq} in ${through.bytes} were recorded)`,
        )
      }
      if (run.retired) run.evicted.spanCount ??= copy.spans.length
    }
    let writer = cached?.writer
    if (run.writerTrimmed === true && writer === undefined) writer = await this.writerOf(runId)
    return { of: run, copy, writer }
  }

  /** The run's writer (with its fingerprint) read back from its meta.msgpack, checked again. */
  protected async writerOf(runId: string): Promise<WriterEnv | undefined> {
    const metaPath = join(this.runDir(runId), 'meta.msgpack')
    const bytes = await readBounded(metaPath, maxMetaFileBytes)
    if (!Buffer.isBuffer(bytes)) throw damagedMeta(metaPath, `it is ${bytes} now, read at start`)
    return this.metaOf(bytes, metaPath, runId).writer
  }

  /** The run's log read into a copy up to where the journal's commits of it start (all of it when none are there). */
  private async readBackLog(
    run: RunState,
    cached: RunState | undefined,
    logPath: string,
    journaled: { logEnd: number; announced: boolean },
  ): Promise<RunState> {
    const runId = run.meta.runId
    const logEnd = journaled.logEnd
    // The copy's bytes are read on from where it ended only while the log is as last seen (or not written yet).
    const stamp = journaled.announced ? undefined : await logStamp(logPath)
    if (cached !== undefined && (journaled.announced || (stamp !== undefined && stamp === run.logSeen))) {
      if (cached.appliedBytes < logEnd)
        await readFramesBetween(
          logPath,
          cached.appliedBytes,
          logEnd,
          (frame) => applyCommitFrame(cached, frame, this.maxSpans),
          queryChunkBytes,
        )
      return cached
    }
    const copy = newRunState(run.meta, run.announcedMs, run.announceIndex, run.origin)
    copy.retired = true
    // Announced in a segment not folded yet: its log is not written; it starts with its header.
    if (journaled.announced) {
      copy.appliedBytes = logHeader(runId).length
      return copy
    }
    const replayed = await replayLog(logPath, runId, (item) => applyItem(copy, item, this.maxSpans), logEnd, queryChunkBytes)
    // Read whole again (its stamp changed): a bad last entry there was recorded, not torn by a crash.
    if (replayed.tornTail !== null && replayed.tornTail.atByte < logEnd)
      throw damagedLog(logPath, `damaged at byte ${replayed.tornTail.atByte}: ${replayed.tornTail.what}, in bytes the listener recorded`)
    if (replayed.validBytes !== logEnd || replayed.tornTail !== null) {
      throw damagedLog(
        logPath,
        `it no longer holds what it held (whole entries end at byte ${replayed.validBytes}, where ${logEnd} bytes were recorded)`,
      )
    }
    copy.commits = replayed.commits
    copy.appliedBytes = replayed.validBytes
    if (stamp !== undefined) run.logSeen = stamp
    return copy
  }

  /**
   * The run's commits in the journal segments not folded yet (oldest first, each with its log offset),
   * where its log's folded bytes end (the first one's offset), and whether it was announced there.
   */
  private journaledCommits(run: RunState): {
    logEnd: number | undefined
    announced: boolean
    frames: Array<{ at: number; frame: Buffer }>
  } {
    let logEnd: number | undefined
    let announced = false
    const frames: Array<{ at: number; frame: Buffer }> = []
    for (const segment of [...this.unfolded, ...(this.segment === undefined ? [] : [this.segment])]) {
      const fold = segment.fold.get(run.meta.runId)
      if (fold === undefined) continue
      if (logEnd === undefined) {
        logEnd = fold.at
        announced = fold.meta !== undefined
      }
      let at = fold.at
      for (const frame of fold.frames) {
        frames.push({ at, frame })
        at += frame.length
      }
    }
    return { logEnd, announced, frames }
  }

  /** The journal segment a run's commits are read from (for a message). */
  private journalPathOf(runId: string): string {
    return (
      [...this.unfolded, ...(this.segment === undefined ? [] : [this.segment])].find((segment) => segment.fold.has(runId))?.path ??
      join(this.dir, 'journal')
    )
  }
}
