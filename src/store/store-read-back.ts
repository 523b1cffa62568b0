/**
 * A run's spans out of memory and back (the read-back cache); run-state.ts says how they are made.
 *
 * In the listener, memory per run
 * is bounded whatever its length: a run read from runs/ at start, a run retired and folded, and a live
 * run past maxResidentSpans spans keep a summary only (SpanSummary: the count and last two spans,
 * which go on taking a live run's spans exactly); its spans are read back for a query (queryAsync,
 * spanPageAsync) from its log, 64 KiB at a time, up to where its folded bytes end, then from its
 * commits still in the journal; the copy is cached within a span budget (maxCachedSpans) and brought
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
import { type ReadBack, ReadBackCache } from './read-back-cache.js'
import { damagedLog, damagedMeta, logStamp, maxMetaFileBytes, readBounded } from './run-files.js'
import { type RunState, applyCommitFrame, applyItem, newRunState, noSpans } from './run-state.js'
import { StoreReplay } from './store-replay.js'
import { queryChunkBytes } from './store-state.js'

/** The store with its runs' spans out of memory and read back for queries, within the cache's bounds. */
export abstract class StoreReadBack extends StoreReplay {
  /** Spans and writers of evicted runs read back for queries, within the cache's bounds. */
  protected readonly cache = new ReadBackCache(this.runs, this.maxCachedSpans, this.maxCachedRuns)
  private readonly readingBack = new Map<RunState, Promise<ReadBack>>()
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
      if (this.cache.startCache === undefined) this.cache.cacheSpans(run.meta.runId, entry, true)
      else this.cache.cacheAtStart(run, entry)
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
    this.cache.cacheAtStart(run, { of: run, copy: { ...run, evicted: undefined, spans, pendingEntries: [] }, writer: run.origin.writer })
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
    let entry = this.cache.cachedFor(run)
    // A copy of a log changed since it was read (by anything but the fold) is not served: read again, damage is found.
    if (entry?.copy !== undefined && run.evicted !== undefined && (await logStamp(join(this.runDir(runId), 'acks.log'))) !== run.logSeen) {
      this.cache.uncache(runId)
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
      this.cache.cacheSpans(runId, entry)
    }
    if (!current(entry)) throw new Error(`run ${runId}: its spans read back do not reach byte ${throughBytes} of its log`)
    this.cache.cacheSpans(runId, entry)
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
    await this.cache.readBackSlot()
    const runId = run.meta.runId
    // Taken once its turn came: a copy waiting out of the cache would be held uncounted.
    const cached = this.cache.cachedFor(run)
    this.cache.uncache(runId) // its copy is being brought up to date in place: no query reads it half done
    const reservedSpans = run.evicted === undefined ? 0 : Math.min(run.evicted.spanCount ?? this.maxSpans, this.maxSpans)
    this.cache.readingSpans += reservedSpans
    this.cache.trimCache(undefined)
    try {
      return await this.readBackRun(run, cached)
    } finally {
      this.cache.readingSpans -= reservedSpans
      this.cache.releaseReadBackSlot()
    }
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
        this.cache.uncache(runId)
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
