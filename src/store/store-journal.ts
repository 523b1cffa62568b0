/**
 * The store's journal rounds: group commit (every queued announcement and every run's queued items in
 * one round: one write, one fdatasync), 'recorded' only after that fdatasync returned, and the
 * rotation to a new segment, whose old one is folded (store-fold.ts).
 * A short write, ENOSPC or a failed fdatasync of a round fails every run with acks in that round or
 * queued, and the journal takes nothing more (after a failed fdatasync it cannot be trusted: never
 * retried); the listener says so, and answers queries from what was recorded until restarted.
 * Event loop and threadpool: no synchronous fs call in the ack and hello paths (a frozen disk must
 * not stop hellos): a round's write and fdatasync, and the fold's calls, go to the libuv threadpool
 * (4 threads; a fold takes at most foldLanes, so a round always finds one). Verdicts, rare, still
 * write synchronously before their fsync.
 */
import { performance } from 'node:perf_hooks'
import { describeSystemError } from '../base/errors.js'
import { logHeader, type LogItem } from './ack-log.js'
import { frameRound, roundTargetBytes, type JournalRound } from './journal.js'
import { type Committed, type Segment, type UnfoldedSegment, framedCommit, voidRound } from './journal-rounds.js'
import { type RunState, addLoggedSpan, recordEnd, recordSteadyMs } from './run-state.js'
import { StoreReadBack } from './store-read-back.js'
import { StorageError } from './store-state.js'

/** The store writing journal rounds: group commit, then 'recorded'; a failed round breaks the journal. */
export abstract class StoreJournal extends StoreReadBack {
  /** Runs with entries to write or a log to close, for the next group commit round. */
  protected readonly dirty = new Set<RunState>()
  protected committing: Promise<void> | undefined
  /** Announcements waiting for the next round, in order. */
  protected readonly announceQueue: RunState[] = []
  protected lastRound = 0
  /** The fold of the previous segment (or of the segments a start found), under way in the background. */
  protected folding: Promise<void> | undefined
  protected foldTimer: NodeJS.Timeout | undefined
  /** Set when a round's write or fdatasync, or a fold, failed: the journal takes nothing more. */
  protected broken: Error | undefined
  /** fdatasyncs of journal rounds so far (one per round, whatever the number of runs in it). */
  roundSyncCount = 0

  protected queue(run: RunState, entry: LogItem): void {
    run.pendingEntries.push(entry)
    this.markDirty(run)
  }

  protected markDirty(run: RunState): void {
    this.dirty.add(run)
    this.startCommit()
  }

  protected startCommit(): void {
    // commit() clears this.committing in the same tick in which it finds nothing to do, so work
    // queued afterwards always starts a new commit.
    if (this.committing === undefined) this.committing = this.commit()
  }

  /**
   * Group commit: while one round is written and fdatasynced, the next one accumulates; a round takes
   * every queued announcement and every run with queued entries (up to roundTargetBytes; the rest waits
   * one round), as ONE journal entry: one write, one fdatasync, however many runs.
   */
  private async commit(): Promise<void> {
    try {
      await Promise.resolve() // let acks of the same tick join the first round
      for (;;) {
        if (this.broken !== undefined || this.segment === undefined) return
        if (this.foldDue()) await this.rotate()
        const round = this.buildRound()
        if (round === undefined) return
        await this.writeRound(round)
      }
    } finally {
      this.committing = undefined
    }
  }

  private buildRound(): { round: JournalRound; announced: RunState[]; committed: Committed[] } | undefined {
    const announced: RunState[] = []
    const committed: Committed[] = []
    const round: JournalRound = { k: 'round', r: this.lastRound + 1, a: [], c: [] }
    let bytes = 0
    while (
      this.announceQueue.length > 0 &&
      (bytes === 0 || bytes + this.announceQueue[0]!.announce!.metaBytes.length <= roundTargetBytes)
    ) {
      const run = this.announceQueue.shift()!
      round.a.push({ id: run.meta.runId, m: run.announce!.metaBytes })
      bytes += run.announce!.metaBytes.length + 32
      announced.push(run)
    }
    const announcedIds = new Set(announced)
    for (const run of this.dirty) {
      if (bytes >= roundTargetBytes) break
      // Its announcement is not durable and not in this round: its entries wait (createRun marks it again).
      if (run.creating === true && !announcedIds.has(run)) continue
      this.dirty.delete(run)
      if (run.failed !== undefined || run.pendingEntries.length === 0) continue
      // One commit is one log entry (numbered, checksummed), as before: the items that fit in
      // maxCommitBytes (which bounds a torn log tail at replay); the rest waits for the next round.
      const commit = run.commits + 1
      const { items, entry } = framedCommit(commit, run.pendingEntries)
      let throughSeq = run.durableThroughSeq
      for (const item of items) if (item.k === 'ack') throughSeq = item.toSeq
      run.commits = commit
      // An ack arriving during the write extends the last item left here, never one being written.
      run.pendingEntries = run.pendingEntries.slice(items.length)
      if (run.pendingEntries.length > 0) this.dirty.add(run)
      round.c.push({ id: run.meta.runId, at: run.logBytes, f: entry })
      run.logBytes += entry.length
      bytes += entry.length + 32
      committed.push({ run, throughSeq, items, endBytes: run.logBytes })
    }
    if (round.a.length === 0 && round.c.length === 0) return undefined
    this.lastRound = round.r
    return { round, announced, committed }
  }

  /** One write and one fdatasync of the round, in the threadpool; 'recorded' only after the fdatasync returned. */
  private async writeRound({ round, announced, committed }: NonNullable<ReturnType<StoreJournal['buildRound']>>): Promise<void> {
    const segment = this.segment!
    const entry = frameRound(round)
    try {
      const { bytesWritten } = await segment.handle.write(entry, 0, entry.length, segment.bytes)
      if (bytesWritten !== entry.length)
        throw Object.assign(new Error(`short write to ${segment.path}: ${bytesWritten} of ${entry.length} bytes (disk full?)`), {
          code: 'ENOSPC',
        })
      await segment.handle.datasync()
      this.roundSyncCount++
    } catch (error) {
      await voidRound(segment)
      this.breakJournal(
        new Error(
          `${describeSystemError(error)} (writing journal round ${round.r} to ${segment.path}; the listener records nothing more: after a failed write or fdatasync the journal cannot be trusted, restart it)`,
        ),
        announced,
        committed.map((c) => c.run),
      )
      return
    }
    segment.bytes += entry.length
    segment.rounds++
    for (const { id, m } of round.a) segment.fold.set(id, { runId: id, meta: m, at: logHeader(id).length, frames: [] })
    for (const { id, at, f } of round.c) {
      const fold = segment.fold.get(id)
      if (fold === undefined) segment.fold.set(id, { runId: id, at, frames: [f] })
      else fold.frames.push(f)
    }
    this.armFoldTimer()
    for (const run of announced) {
      const settle = run.announce!
      delete run.announce
      this.runs.recount(run)
      settle.resolve()
    }
    for (const { run, throughSeq, items, endBytes } of committed) {
      // Durable now: its spans made from the items as logged, the one way a replay makes them.
      for (const item of items) {
        if (item.k === 'ack') addLoggedSpan(run, item, this.maxSpans)
        else if (item.k === 'end') recordEnd(run, item)
        else recordSteadyMs(run, item.atMs)
      }
      run.appliedBytes = endBytes
      run.durableThroughSeq = throughSeq
      // A fold that failed while this round was written failed the run: it answers what is recorded.
      if (run.failed !== undefined) run.lastAckedSeq = throughSeq
      if (this.evicting && run.evicted === undefined && run.spans.length > this.maxResidentSpans) this.evictSpans(run)
      this.runs.recount(run)
      this.emit('recorded', run.meta.runId, throughSeq)
    }
  }

  /**
   * A round that failed (or a fold): every run with acks not yet recorded fails (its acks in that round
   * were never reported recorded, and never will be), every queued announcement is refused, and nothing
   * more is written (never retried: PostgreSQL's fsync lesson).
   */
  protected breakJournal(error: Error, announced: RunState[], inRound: RunState[]): void {
    this.broken ??= error
    for (const run of [...announced, ...this.announceQueue.splice(0)]) {
      this.runs.delete(run.meta.runId)
      const settle = run.announce
      delete run.announce
      settle?.reject(new StorageError(`could not store run ${run.meta.runId}: ${error.message}`))
    }
    for (const run of this.runs.values()) {
      if (run.failed !== undefined || run.creating === true) continue
      if (run.retired && run.pendingEntries.length === 0 && !inRound.includes(run)) continue
      run.failed = error
      run.retired = true
      run.pendingEntries = []
      // The acks of this round and those queued after it were never recorded (the writer is told it
      // failed): the run answers with the acks it recorded (its spans hold those only: they are made
      // when a round is durable), so a verdict counts only those, as a restart's replay will.
      run.lastAckedSeq = run.durableThroughSeq
      this.emit('failed', run.meta.runId, error)
    }
    this.dirty.clear()
  }

  private foldDue(): boolean {
    const segment = this.segment!
    if (segment.rounds === 0 || this.folding !== undefined) return false
    return segment.bytes >= this.maxSegmentBytes || performance.now() - segment.openedMs >= this.foldAgeMs
  }

  /** An idle listener folds too: a timer starts a commit pass once the segment is old enough. */
  private armFoldTimer(): void {
    if (this.foldTimer !== undefined) return
    this.foldTimer = setTimeout(() => {
      this.foldTimer = undefined
      this.startCommit()
      if (this.segment !== undefined && this.segment.rounds > 0) this.armFoldTimer()
    }, this.foldAgeMs)
    this.foldTimer.unref()
  }

  /** Starts a new segment (between rounds) and folds the old one in the background. */
  protected async rotate(): Promise<void> {
    const old = this.segment!
    try {
      this.segment = await this.newSegment(old.segment + 1)
    } catch (error) {
      this.breakJournal(
        new Error(
          `${describeSystemError(error)} (starting journal segment ${old.segment + 1}; the listener records nothing more, restart it)`,
        ),
        [],
        [],
      )
      return
    }
    // At once: a query reads the run commits it holds from it until its fold is done.
    this.unfolded.push(old)
    await old.handle.close().catch(() => undefined)
    this.folding = this.fold(old).finally(() => {
      this.folding = undefined
    })
  }

  /** A new, empty segment, its header durable (ack-store.ts opens the journal's files). */
  protected abstract newSegment(segment: number): Promise<Segment>

  /** The segment's commits into the run files (store-fold.ts); a rotation starts it in the background. */
  protected abstract fold(segment: UnfoldedSegment): Promise<void>
}
