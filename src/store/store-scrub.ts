/**
 * The store's checks of catalogued runs and its prunes: the scrub (every run taken from the catalog
 * replayed from its files in the background, by the rules of a start), the usage quotas ask for, and
 * the removal of ended runs for good (a run gone or intact after a crash, never read with fewer acks).
 */
import { rename } from 'node:fs/promises'
import { join } from 'node:path'
import { syncDirectoryAsync } from '../base/directory-sync.js'
import type { RunMeta } from '../record/format.js'
import type { RunSummary } from '../protocol/messages.js'
import { catalogName } from './catalog.js'
import { setImmediate as yieldToLoop } from 'node:timers/promises'
import { catalogDifferences, catalogEntryOf, countFields, lessThanRecorded, runDirGone } from './catalog-check.js'
import { damagedLog, damagedMeta, removePruned } from './run-files.js'
import type { StoreUsage } from './run-map.js'
import { type RunState, announceOrder, endAccepted, setLogged, summaryOf } from './run-state.js'
import { StoreFold } from './store-fold.js'
import { StorageError, queryChunkBytes } from './store-state.js'

/** The store checking catalogued runs against their files, and pruning ended runs. */
export abstract class StoreScrub extends StoreFold {
  /** Verdict writes under way, per run: one run's verdicts are stored in order. */
  protected readonly verdictWrites = new Map<string, Promise<void>>()
  protected scrubbing: Promise<void> | undefined
  private readonly checking = new Map<RunState, Promise<void>>()

  /**
   * Runs on record and their bytes on disk (ack log and meta.msgpack; a run not folded yet counts what
   * its fold will write), in all and per peer (quotas.ts peerKey; 'unknown' for runs of older
   * listeners), for quotas: kept as runs come, grow and go (RunMap), so asking costs O(1) whatever
   * the number of runs and peers.
   */
  usage(): StoreUsage {
    return this.runs.usage
  }

  /** Whether an ended run may be pruned now, and its bytes on disk. */
  pruneCandidate(runId: string): { bytes: number } | { refused: string } {
    const run = this.runs.get(runId)
    if (run === undefined || run.creating === true) return { refused: `run ${runId} is not on record` }
    // An end accepted and not recorded yet is recorded by prune's fold, before anything is removed.
    if (!endAccepted(run) || !run.retired)
      return { refused: `run ${runId} has not ended (its writer may be live, or vanished with no end logged)` }
    if (this.verdictWrites.has(runId)) return { refused: `run ${runId} has a verdict being stored` }
    return { bytes: run.logBytes + run.metaBytes + (run.verdictBytes ?? 0) }
  }

  /**
   * The run as its files say, for a decision that must not rest on the catalog's word alone (a prune):
   * a run taken from the catalog is replayed read-only by the rules of a start (meta.msgpack, acks.log,
   * verdict.msgpack), as the background check does; any other run was read from its files, or recorded
   * in this store's life, already. Throws the run's damage, naming the file.
   */
  async summaryFromFiles(runId: string): Promise<RunSummary> {
    const run = this.runs.get(runId)
    if (run === undefined) throw new Error(`run ${runId} is not on record`)
    if (run.damaged !== undefined) throw run.damaged
    if (run.fromCatalog !== true) return summaryOf(run)
    const scratch = this.scratchStore()
    await scratch.replay(runId, undefined, queryChunkBytes)
    const copy = scratch.runs.get(runId)
    if (copy === undefined) throw runDirGone(this.runDir(runId), catalogEntryOf(run))
    copy.verdict = await scratch.replayVerdict(copy)
    return summaryOf(copy)
  }

  /**
   * Removes ended runs for good. Each run is folded first (the journal then holds none of its commits:
   * a restart cannot find commits of a run that is gone), then its directory renamed out of the runs
   * (runs/.pruned-<id>, which replay skips) and runs/ fsynced: the rename is atomic, so after a crash
   * a pruned run is gone or intact, never read with fewer acks. The renamed directory is deleted
   * after (a leftover one is deleted at the next start). Throws for a run that is unknown or not ended.
   */
  async prune(runIds: readonly string[]): Promise<void> {
    const refusals = runIds.map((id) => this.pruneCandidate(id)).flatMap((c) => ('refused' in c ? [c.refused] : []))
    if (refusals.length > 0) throw new Error(`not pruned: ${refusals.join('; ')}`)
    // Its end (queued, maybe) recorded and folded: nothing of it is left in the journal. A run wholly
    // in runs/ and in no segment still on disk (an old ended run, as a rule) waits for no fold (a
    // start's backlog may take minutes). A segment whose fold wrote the run files is still read at a
    // start until it is deleted: a run renamed away meanwhile would be a commit of a run not on record.
    const whollyInRuns = (runId: string): boolean => {
      const run = this.runs.get(runId)
      return run !== undefined && this.inCatalog(run) && !this.unfolded.some((segment) => segment.fold.has(runId))
    }
    if (!runIds.every(whollyInRuns)) await this.foldNow()
    if (this.broken !== undefined) throw new StorageError(`could not prune runs: ${this.broken.message}`)
    const runsDir = join(this.dir, 'runs')
    const renamed: string[] = []
    try {
      for (const runId of runIds) {
        await rename(this.runDir(runId), join(runsDir, `.pruned-${runId}`))
        renamed.push(runId)
      }
    } catch (error) {
      // Whole or not at all (the runs of a group go together): those renamed come back; one that
      // cannot come back is gone (deleted below), and so no longer on record.
      for (const runId of renamed) {
        await rename(join(runsDir, `.pruned-${runId}`), this.runDir(runId)).then(
          () => undefined,
          () => {
            this.runs.delete(runId)
            this.cache.uncache(runId)
          },
        )
      }
      await syncDirectoryAsync(runsDir).catch(() => undefined)
      await removePruned(runsDir).catch(() => undefined)
      throw error
    }
    // Renamed out of runs/: no longer on record, whether or not the fsync below succeeds; nor cached.
    for (const runId of runIds) {
      this.runs.delete(runId)
      this.cache.uncache(runId)
    }
    this.catalogDirty = true
    // A catalog still holding them would read them as runs whose directory is gone: the renamed
    // directories go once it is written (else at the next start, after the catalog written there).
    if (await this.saveCatalog()) await removePruned(runsDir)
  }

  /**
   * Checks, in the background after start, every run taken from the catalog against its files, by
   * the rules of a replay at start (meta.msgpack, the whole log, verdict.msgpack), a run at a time, a
   * log 64 KiB at a time (never more than a few ms of the event loop). A damaged run is named in a
   * warning and its queries are refused with the damage (file and byte); a verdict stored after the
   * catalog was written is taken from its file. Resolves when done (never rejects).
   */
  startScrub(): Promise<void> {
    this.scrubbing ??= this.scrub()
    return this.scrubbing
  }

  private async scrub(): Promise<void> {
    // Newest first: the runs a verify after a cut asks for are checked (and cached) first.
    for (const run of [...this.runs.values()].sort((a, b) => announceOrder(b, a))) {
      if (this.closing) return
      if (run.catalogued !== true) continue
      await yieldToLoop()
      if (this.runs.get(run.meta.runId) !== run) continue
      await this.checked(run)
    }
  }

  /** The catalogued run's files checked once (by the scrub, or first by a query that cannot wait for it). */
  protected checked(run: RunState): Promise<void> {
    if (run.catalogued !== true || run.damaged !== undefined) return Promise.resolve()
    let checking = this.checking.get(run)
    if (checking === undefined) {
      checking = this.scrubRun(run)
        .catch((error: unknown) => {
          if (this.closing) return
          run.damaged = error instanceof Error ? error : new Error(String(error))
          this.warn(`run ${run.meta.runId}: ${run.damaged.message}; its queries are refused`)
        })
        .finally(() => {
          run.catalogued = false
          this.checking.delete(run)
        })
      this.checking.set(run, checking)
    }
    return checking
  }

  /** The run replayed from its files by the rules of a start (a store of its own), then held against what was recorded. */
  private async scrubRun(run: RunState): Promise<void> {
    const runId = run.meta.runId
    const scratch = this.scratchStore()
    await scratch.replay(runId, undefined, queryChunkBytes)
    const copy = scratch.runs.get(runId)
    if (copy === undefined) throw runDirGone(this.runDir(runId), catalogEntryOf(run))
    // meta.msgpack of an older listener has no checksum: held against what the catalog recorded.
    const changed = (Object.keys(run.meta) as Array<keyof RunMeta>).filter(
      (key) => JSON.stringify(run.meta[key]) !== JSON.stringify(copy.meta[key]),
    )
    if (copy.announcedMs !== run.announcedMs) changed.push('announcedMs' as keyof RunMeta)
    if (changed.length > 0 && copy.metaSealed === true) {
      // Its checksum holds: the catalog, not the file, is what differs (made by hand or by someone else).
      this.warn(
        `run ${runId}: ${join(this.dir, catalogName)} recorded ${changed.map((key) => `${key} ${JSON.stringify(run.meta[key] ?? run.announcedMs)}`).join(', ')} where its meta.msgpack says ${changed.map((key) => JSON.stringify(copy.meta[key] ?? copy.announcedMs)).join(', ')}: the run is taken from its files, and the catalog written again`,
      )
      // Out of the store's counts (its group) while its metadata changes, then counted again.
      this.runs.delete(runId)
      Object.assign(run, { meta: copy.meta, announcedMs: copy.announcedMs })
      this.runs.set(runId, run)
      this.catalogDirty = true
    } else if (changed.length > 0) {
      const metaPath = join(this.runDir(runId), 'meta.msgpack')
      throw damagedMeta(
        metaPath,
        `it says ${changed.map((key) => `${key} ${JSON.stringify(copy.meta[key] ?? copy.announcedMs)}`).join(', ')}, where the listener recorded ${changed.map((key) => JSON.stringify(run.meta[key] ?? run.announcedMs)).join(', ')} (its catalog, ${join(this.dir, catalogName)})`,
      )
    }
    const problem = lessThanRecorded(copy, catalogEntryOf(run))
    if (problem !== undefined) throw damagedLog(join(this.runDir(runId), 'acks.log'), problem)
    const differences = catalogDifferences(run, copy)
    if (differences.length > 0) this.takeFromFiles(run, copy, differences)
    // A verdict stored after the catalog was written, before a crash, is in its file only.
    const verdict = await scratch.replayVerdict(copy)
    for (const message of scratch.warnings) this.warn(message)
    if (run.evicted !== undefined) {
      run.evicted.spanCount = copy.spans.length
      // What a query would read back: kept while the cache has room (the newest runs are checked first).
      if (!this.cache.readBack.has(runId)) {
        this.cache.cacheSpans(runId, { of: run, copy, writer: copy.origin.writer }, true)
        // The log as the copy was read from it (a copy not cached leaves the stamp of one that is).
        if (this.cache.readBack.get(runId)?.copy === copy) run.logSeen = copy.logSeen
      }
    }
    if (JSON.stringify(verdict) !== JSON.stringify(run.verdict) || copy.verdictBytes !== run.verdictBytes) this.catalogDirty = true
    run.verdict = verdict
    run.verdictBytes = copy.verdictBytes
    this.runs.recount(run)
  }

  /**
   * A catalogued run whose files hold more than its catalog entry: no catalog this listener writes
   * does that (a run goes in once its log is whole), so the catalog is someone else's, and the files,
   * the authority, are taken (fewer acks than they hold would turn a FAIL into a PASS).
   */
  private takeFromFiles(run: RunState, copy: RunState, differences: ReadonlyArray<{ what: string; text: string }>): void {
    // The counts are said first; the other fields that differ after them.
    const besides = differences.filter((d) => !countFields.has(d.what)).map((d) => d.text)
    this.warn(
      `run ${run.meta.runId}: ${join(this.dir, catalogName)} recorded ${run.commits} commits in ${run.logBytes} bytes (acks through seq ${run.lastAckedSeq}) where its files hold ${copy.commits} commits in ${copy.logBytes} bytes (acks through seq ${copy.lastAckedSeq})` +
        `${besides.length > 0 ? `; it differs in ${besides.join(', ')}` : ''}: the run is taken from its files, and the catalog written again`,
    )
    setLogged(run, copy)
    run.announceIndex = copy.announceIndex
    // Its writer's fingerprint stays in meta.msgpack (read back for a query), as for every catalogued run.
    const writer = copy.origin.writer
    run.origin = { ...copy.origin, ...(writer === undefined ? {} : { writer: { bootId: writer.bootId, fingerprint: null } }) }
    run.writerTrimmed = writer !== undefined
    run.evicted = { spanCount: copy.spans.length, lastAckMs: copy.spans.lastAckMs }
    this.catalogDirty = true
  }

  /** A store of its own over the same directory, for a run replayed by the rules of a start (the scrub, a prune's check). */
  protected abstract scratchStore(): StoreScrub
}
