/**
 * The store's folds: a journal segment's commits written into the run files (fold.ts), fsynced, the
 * catalog written when it changed, then the segment deleted; the backlog a start found folded in the
 * background, oldest first; and the catalog (catalog.ts) of the runs retired and wholly in runs/.
 */
import { unlink } from 'node:fs/promises'
import { join } from 'node:path'
import { syncDirectoryAsync } from '../base/directory-sync.js'
import { describeSystemError } from '../base/errors.js'
import { foldRuns } from './fold.js'
import { catalogName, encodeCatalog, writeCatalog } from './catalog.js'
import { catalogEntryOf } from './catalog-check.js'
import type { UnfoldedSegment } from './journal-rounds.js'
import { logStamp } from './run-files.js'
import type { RunState } from './run-state.js'
import { StoreJournal } from './store-journal.js'

/** The store folding journal segments into the run files, and writing its catalog. */
export abstract class StoreFold extends StoreJournal {
  /** Files open right now in a fold (ack logs and meta files; never between folds). */
  protected readonly foldFiles = { openLogs: 0 }
  /** Segments a start found that are not folded yet (0 once the backlog is folded). */
  backlogFolds = 0
  /** Catalogs written so far. */
  catalogWriteCount = 0
  /** Something the catalog holds changed since it was written (a run retired and folded, a verdict, a prune). */
  protected catalogDirty = false
  /** Catalog writes, one after the other. */
  protected catalogWrite: Promise<boolean> = Promise.resolve(true)
  protected closing = false

  /**
   * Writes the catalog of every run retired and wholly in runs/ (after the one under way, if any).
   * False when it could not be written: a warning; the runs it lacks are replayed at the next start.
   */
  protected saveCatalog(): Promise<boolean> {
    this.catalogWrite = this.catalogWrite.then(async () => {
      if (!this.catalogDirty) return true
      this.catalogDirty = false
      const runs = [...this.runs.values()].filter((run) => this.inCatalog(run))
      try {
        await writeCatalog(
          this.dir,
          await encodeCatalog(
            runs.reduce((highest, run) => Math.max(highest, run.announceIndex ?? 0), 0),
            runs,
            catalogEntryOf,
          ),
        )
        this.catalogWriteCount++
        return true
      } catch (error) {
        this.catalogDirty = true
        this.warn(
          `could not write ${join(this.dir, catalogName)}: ${describeSystemError(error)}; the runs it lacks are replayed from their logs at the next start (it takes longer, nothing is lost)`,
        )
        return false
      }
    })
    return this.catalogWrite
  }

  /** A run the catalog holds: retired, nothing of it queued or in a journal segment its fold has not written yet. */
  protected inCatalog(run: RunState): boolean {
    return (
      run.retired &&
      run.failed === undefined &&
      run.creating !== true &&
      run.pendingEntries.length === 0 &&
      run.appliedBytes === run.logBytes &&
      !this.dirty.has(run) &&
      !this.inJournal(run.meta.runId)
    )
  }

  /** The run has commits or its announcement in a journal segment whose fold has not written them to runs/ yet. */
  private inJournal(runId: string): boolean {
    if (this.segment?.fold.has(runId) === true) return true
    return this.unfolded.some((segment) => segment.foldedToRuns !== true && segment.fold.has(runId))
  }

  /** Folds everything recorded so far into the run files now (tests; the store folds on its own by size and age). */
  async foldNow(): Promise<void> {
    while (this.committing !== undefined || this.folding !== undefined) await Promise.all([this.committing, this.folding])
    if (this.broken !== undefined || this.segment === undefined || this.segment.rounds === 0) return
    await this.rotate()
    await this.folding
  }

  /**
   * The segments a start found in the journal, folded oldest first in the background (a run's commits
   * in a later one go after those in an earlier one). No rotation starts meanwhile (foldDue waits for
   * `folding`); a stop waits for the segment being folded and leaves the rest to the next start.
   */
  protected foldBacklog(backlog: readonly UnfoldedSegment[]): void {
    this.backlogFolds = backlog.length
    this.folding = (async () => {
      for (const segment of backlog) {
        if (this.broken !== undefined || this.closing) return
        await this.fold(segment)
        // (fold() sets it when it fails: read again after the await.)
        const broken = this.broken as Error | undefined
        if (broken !== undefined) {
          this.warn(
            `could not fold the journal found at start: ${broken.message}; runs already recorded are answered, new runs are refused`,
          )
          return
        }
        this.backlogFolds--
      }
    })().finally(() => {
      this.folding = undefined
    })
  }

  /** The segment's commits into the run files, fsynced, then the segment deleted (fold.ts). */
  protected override async fold(segment: UnfoldedSegment): Promise<void> {
    try {
      const changed = await this.logsChangedSinceSeen(segment.fold.keys())
      await foldRuns(join(this.dir, 'runs'), [...segment.fold.values()], this.foldFiles)
      segment.foldedToRuns = true
      await this.noteFolded(segment.fold.keys(), changed)
      // The catalog before the segment goes: a run folded here and retired is in it, or still in the journal.
      for (const runId of segment.fold.keys()) if (this.runs.get(runId)?.retired === true) this.catalogDirty = true
      if (this.catalogDirty) await this.saveCatalog()
      await unlink(segment.path)
      await syncDirectoryAsync(join(this.dir, 'journal'))
      // Its commits are in the run logs, fsynced: read back from there now.
      this.unfolded.splice(this.unfolded.indexOf(segment), 1)
      for (const runId of segment.fold.keys()) {
        const run = this.runs.get(runId)
        if (run !== undefined && !this.dirty.has(run) && !this.inJournal(runId)) this.evict(run)
      }
    } catch (error) {
      // The journal still holds every recorded ack (the segment stays); a restart folds it again.
      this.breakJournal(
        new Error(
          `${describeSystemError(error)} (folding journal segment ${segment.path} into runs/; the listener records nothing more, restart it)`,
        ),
        [],
        [],
      )
    }
  }

  /**
   * Before a fold: the runs whose log changed since it was last seen (by anything but this listener):
   * their stamp goes, so their next query reads the log whole. One stat at a time (the threadpool
   * keeps a thread for the next round).
   */
  private async logsChangedSinceSeen(runIds: Iterable<string>): Promise<Set<string>> {
    const changed = new Set<string>()
    for (const runId of [...runIds]) {
      const run = this.runs.get(runId)
      if (run?.logSeen === undefined || (await logStamp(join(this.runDir(runId), 'acks.log'))) === run.logSeen) continue
      changed.add(runId)
      delete run.logSeen
    }
    return changed
  }

  /** After a fold: each log it wrote is seen as it left it (but one changed before the fold stays unseen). */
  private async noteFolded(runIds: Iterable<string>, changed: ReadonlySet<string>): Promise<void> {
    for (const runId of [...runIds]) {
      const run = this.runs.get(runId)
      if (run === undefined || changed.has(runId)) continue
      const stamp = await logStamp(join(this.runDir(runId), 'acks.log'))
      if (stamp === undefined) delete run.logSeen
      else run.logSeen = stamp
    }
  }
}
