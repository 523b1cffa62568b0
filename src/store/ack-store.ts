/**
 * The listener's durable memory: <dir>/journal/ (journal.ts), where every group commit round of every
 * run is written first (one write, one fdatasync per round, however many runs), and is folded every
 * few seconds into one directory per run (fold.ts) under <dir>/runs/<runId>/ holding
 *   acks.log      the run's ack log (format: ack-log.ts, reader: ack-log-reader.ts): a header naming
 *                 the run, written and fsynced first, then one checksummed entry per group commit (one
 *                 fdatasync covers every ack, steady and end queued while the previous fdatasync ran)
 *   meta.msgpack  the run's metadata, its announcement time and order (announceIndex), the peer
 *                 address it came from, the writer's environment and its campaign tag (absent in
 *                 older directories and for runs outside a campaign), sealed with its checksum
 *                 (sealed-file.ts). A run exists once the journal round holding its announcement
 *                 (these bytes) is fdatasynced; the fold writes them to a temp file, fsyncs it and
 *                 renames it into place after the log, then fsyncs both directories, before the
 *                 segment goes; a failed round is cut off the journal. No meta.msgpack and an empty log: an
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
 * or damage what it holds. "Recorded" is sent only after the journal round holding a commit was written
 * whole and its fdatasync returned, so only the last round can be torn, and it was never reported as
 * recorded: ignored with a warning. A run's log gets its commits only by folds, fsynced before their
 * segment is deleted; the journal's first commit of a run says where the log's durable part ends
 * (fold.ts says why this never loses a recorded ack nor reads fewer). In a log, only the last entry can
 * be torn (a log of an older listener, or a fold cut short past that point): replay ignores it with a
 * warning. Any other bad entry is damage: a
 * refusal naming the file and the byte, never the acks after it dropped (ack-log-reader.ts has the rules).
 * Replay streams the log in chunks (a log of any size replays) and turns any read error other than a
 * missing file into a refusal: fewer acks than were recorded would turn a FAIL into a PASS.
 * Start reads <dir>/catalog.msgpack (catalog.ts): the runs retired and wholly in runs/ are taken
 * from it, unread; the rest (live at the last catalog, an older listener's, in the journal) are replayed.
 * Damage in a replayed run refuses the start; damage in a catalogued run is found by the scrub after
 * start (startScrub: every catalogued run replayed by the same rules, in the background), or a
 * catalogued run's directory missing at start: a warning, and that run's queries are refused naming
 * the file, never answered with fewer acks. A query reading an ended run's files back checks them too.
 * File descriptors: the journal's segment, and at most foldLanes run files during a fold.
 * Files are opened with O_NONBLOCK and must be regular files: a FIFO or device planted in the
 * directory cannot hang startup.
 *
 * The store is built in layers, each a class of its own file extending the one below, so that each
 * reads alone: its state and options (store-state.ts), the replay of run files and the journal
 * (store-replay.ts), runs' spans read back (store-read-back.ts, which holds a read-back-cache.ts),
 * the journal's rounds (store-journal.ts), the fold and the catalog (store-fold.ts), the scrub and
 * prunes (store-scrub.ts), run creation, acks and verdicts (store-writes.ts), the queries
 * (store-queries.ts); this file opens, reads and closes a directory, and opens the journal's segment
 * files (newSegment, reopenSegment: the file-system calls a round's write and fdatasync go to, where
 * test/unit/store/announce-failure.test.ts injects its faults). The run state they share and its rules
 * are in run-state.ts.
 */
import { constants as fsConstants, mkdirSync } from 'node:fs'
import { open, readdir, unlink } from 'node:fs/promises'
import { join } from 'node:path'
import { holdExclusiveLock } from '../base/locks.js'
import type { FileLock } from '../native/index.js'
import { syncDirectoryAsync } from '../base/directory-sync.js'
import { performance } from 'node:perf_hooks'
import { describeSystemError, exitCodes, usageError } from '../base/errors.js'
import { segmentHeader, segmentName } from './journal.js'
import { MinHeap } from './min-heap.js'
import { catalogFormatVersion, type CatalogEntry } from './catalog.js'
import { runDirGone } from './catalog-check.js'
import {
  type JournalRead,
  type Segment,
  type UnfoldedSegment,
  checkLogWithinJournal,
  cutTornTail,
  foldPlan,
  journalState,
  maxReadAttempts,
} from './journal-rounds.js'
import { removePruned } from './run-files.js'
import { announceOrder } from './run-state.js'
import { StoreQueries } from './store-queries.js'
import type { AckStoreOptions } from './store-state.js'

export { frameCommit, frameLogEntry, logHeader } from './ack-log.js'
export { spanWindowMs } from './span-table.js'

/** The listener's ack store: a directory opened (locked) or read, and closed. */
export class AckStore extends StoreQueries {
  /** The descriptor holding <dir>/lock, for the store's life (the listener's, not verify's). */
  private lock: FileLock | undefined
  /** Run logs replayed at start (those not in the catalog): a start from the catalog replays few. */
  replayedLogCount = 0

  /**
   * Opens (creating if needed) a store directory for a listener and replays every run in it. Takes
   * <dir>/lock first: a second listener on the same directory would keep its own view of the runs
   * (and verify would judge a file against half of them), so it is refused (exit 2).
   */
  static async open(dir: string, options: AckStoreOptions = {}): Promise<AckStore> {
    mkdirSync(join(dir, 'runs'), { recursive: true })
    mkdirSync(join(dir, 'journal'), { recursive: true })
    const lock = lockDirectory(dir)
    try {
      const { store, journal } = await AckStore.read(dir, options, 'use')
      store.lock = lock
      // Recovery: every remaining segment is folded into the run files (bytes past each run's first `at`
      // cut off and written again: fold.ts says why this loses nothing), then deleted, in the
      // background after the listener listens, as its own folds are: a start after a kill -9 does not
      // wait for a backlog of new runs' files. Queries meanwhile read a run's commits from the
      // segments not folded yet (readBackRun), as they do between a rotation and its fold.
      store.lastRound = journal.lastRound
      let backlog: UnfoldedSegment[] = []
      try {
        // The newest segment is kept (the end of the chain of segments: journal.ts); the new one is
        // started first, so that a crash during the folds leaves a chain that still holds.
        const last = journal.segments.at(-1)
        const keepLast = last !== undefined && last.rounds.length === 0 && last.validBytes > 0
        // A torn last round (never reported recorded) is cut off first: once a segment follows, only
        // whole rounds may end it (journal.ts), and rounds appended after it must not leave its bytes behind.
        if (last?.torn && last.validBytes > 0) await cutTornTail(last.path, last.validBytes)
        if (last !== undefined && last.validBytes === 0) {
          // Its header was torn by a crash while it was being started: it holds nothing; started again.
          await unlink(last.path)
          store.segment = await store.newSegment(last.segment)
        } else {
          store.segment = keepLast ? await store.reopenSegment(last) : await store.newSegment(journal.lastSegment + 1)
        }
        backlog = journal.segments
          .filter((segment) => segment !== last || (!keepLast && last.validBytes > 0))
          .map(({ segment, path, rounds }) => ({ segment, path, fold: new Map(foldPlan(rounds).map((run) => [run.runId, run])) }))
        store.unfolded.push(...backlog)
        // Every retired run holds its summary only, those with commits in the backlog too (read back from
        // their log, then from the segments not folded yet): a long run live at the crash is not held
        // whole for the backlog's fold. A run announced in the backlog keeps its spans until its fold
        // (its meta.msgpack, where a read-back finds its writer, is not written yet).
        store.evicting = true
        // (A catalogued run holds a summary only already: not sorted, 100,000 of them take ~0.1 s.)
        const announcedInBacklog = (runId: string): boolean => backlog.some((segment) => segment.fold.get(runId)?.meta !== undefined)
        for (const run of [...store.runs.values()]
          .filter((r) => r.catalogued !== true && !announcedInBacklog(r.meta.runId))
          .sort((a, b) => announceOrder(b, a)))
          store.evict(run)
      } catch (error) {
        store.cache.endStartCache()
        if ((error as { exitCode?: number }).exitCode !== undefined) throw error
        // A full or failing disk: what is recorded stays readable (the journal keeps what was not
        // folded), and queries are answered; nothing new can be recorded.
        store.broken = new Error(
          `${describeSystemError(error)} (starting a journal segment at start; the listener records nothing more: free space or fix the disk, then restart it)`,
        )
        store.warnings.push(
          `could not start the journal at start: ${store.broken.message}; runs already recorded are answered, new runs are refused`,
        )
      }
      store.cache.endStartCache()
      // Pruned directories go only once a catalog without their runs is written (else they would read as runs gone).
      if (store.broken === undefined && (!store.catalogDirty || (await store.saveCatalog()))) await removePruned(join(dir, 'runs'))
      if (store.broken === undefined && backlog.length > 0) store.foldBacklog(backlog)
      return store
    } catch (error) {
      lock.release()
      throw error
    }
  }

  /**
   * Reads a store directory without changing it (verify --acks, report; no lock: on a copy of a live
   * directory too): the run files, with the journal's rounds applied in memory (a torn last round
   * ignored); throws ENOENT when it has no runs/, and a runtime PlugcheckError naming the file when a
   * run's files or the journal cannot be read.
   */
  static async load(dir: string, options: AckStoreOptions = {}): Promise<AckStore> {
    return AckStore.readWhileLive(dir, options, 'check')
  }

  /**
   * Reads a store directory as the listener would (runs in the catalog taken from it, unchecked) without
   * changing it: for a decision that checks the runs it acts on against their files (summaryFromFiles),
   * as runs --prune --dry-run does, so that it selects what the prune itself would.
   */
  static async peek(dir: string, options: AckStoreOptions = {}): Promise<AckStore> {
    return AckStore.readWhileLive(dir, options, 'peek')
  }

  /**
   * A read without the lock, of a directory a listener may be writing: its journal is read before its
   * logs, and a fold in between (rounds appended since, then folded) makes a log longer than the
   * journal read says, which on a still directory is damage. A failed read is tried again while the
   * journal changed during it (segments appended to, rotated or deleted), at most maxReadAttempts
   * times; a read that fails on a journal that did not change is damage, said at once.
   */
  private static async readWhileLive(dir: string, options: AckStoreOptions, catalogUse: 'check' | 'peek'): Promise<AckStore> {
    for (let attempt = 1; ; attempt++) {
      const before = await journalState(join(dir, 'journal'))
      try {
        return (await AckStore.read(dir, options, catalogUse)).store
      } catch (error) {
        if (
          attempt >= maxReadAttempts ||
          (error as { exitCode?: number }).exitCode !== exitCodes.runtime ||
          (await journalState(join(dir, 'journal'))) === before
        )
          throw error
      }
    }
  }

  /**
   * The runs of a directory. 'use' (the listener): runs in the catalog are taken from it (their files
   * checked later by the scrub; a directory gone is damage named for the run's queries), the others
   * replayed. 'check' (verify --acks, report): every run replayed, and one the catalog holds more of
   * than its files (its log shorter) refused; one whose directory is gone is named in a warning and
   * its queries refused, as the listener does.
   */
  private static async read(
    dir: string,
    options: AckStoreOptions,
    catalogUse: 'use' | 'peek' | 'check',
  ): Promise<{ store: AckStore; journal: JournalRead }> {
    const store = new AckStore(dir, options)
    // The listener keeps a summary of each run as soon as it is replayed (its spans in the cache while
    // there is room): a start holds the cache and the run being replayed, never every run's spans.
    // verify --acks and report judge every run they read from its spans: they keep them.
    if (catalogUse === 'use') store.cache.startCache = new MinHeap((a, b) => announceOrder(a, b) < 0)
    // Without the lock (verify --acks, report, --dry-run) a listener may write meanwhile (see readWhileLive).
    const journalBefore = catalogUse === 'use' ? undefined : await journalState(join(dir, 'journal'))
    // A log longer than the journal read says is damage on a still directory; where the journal
    // changed since, a fold of later rounds wrote it (they are after this read's moment: not read).
    const journalMoved = async (): Promise<boolean> =>
      journalBefore !== undefined && (await journalState(join(dir, 'journal'))) !== journalBefore
    const names = await readdir(join(dir, 'runs'))
    const runIds = names.filter((name) => /^[0-9a-f]{16}$/.test(name)).sort()
    const pruned = new Set(names.filter((name) => name.startsWith('.pruned-')).map((name) => name.slice('.pruned-'.length)))
    const journal = await store.readJournal()
    const catalog = await store.readCatalogAtStart(catalogUse, runIds.length)
    // A journal of segments holding no round (a clean stop leaves one) changes no run: the catalog stays.
    store.catalogDirty =
      catalog === undefined || catalog.version !== catalogFormatVersion || journal.segments.some((segment) => segment.rounds.length > 0)
    const catalogued = new Map<string, CatalogEntry>()
    for (const entry of catalog?.entries ?? []) {
      // In the journal: its files may be a fold cut short, replayed the old way; pruned: gone for good.
      if (journal.announced.has(entry.id) || journal.firstAt.has(entry.id) || pruned.has(entry.id)) store.catalogDirty = true
      else catalogued.set(entry.id, entry)
    }
    store.lastAnnounceIndex = catalog?.lastAnnounceIndex ?? 0
    for (const runId of runIds) {
      if (!/^[0-9a-f]{16}$/.test(runId)) continue
      // Announced in the journal: its files may be a fold cut short; the journal has all of it. But a
      // log longer than the journal's commits of it is not a fold cut short: the journal is from an
      // earlier state of the directory (it would read as fewer acks).
      const end = journal.journalEnd.get(runId)
      if (end !== undefined) await checkLogWithinJournal(join(dir, 'runs', runId, 'acks.log'), end, journal, journalMoved)
      if (journal.announced.has(runId)) continue
      const entry = catalogued.get(runId)
      catalogued.delete(runId)
      if (entry !== undefined && catalogUse !== 'check') {
        store.restore(entry)
        continue
      }
      await store.replay(runId, journal.firstAt.get(runId))
      store.replayedLogCount++
      // With commits in the journal its spans stay until the journal is folded at start (open evicts it).
      if (catalogUse === 'use' && !journal.firstAt.has(runId)) store.summarizeReplayed(runId)
      if (entry === undefined) store.catalogDirty = true
      else store.checkAgainstCatalog(runId, entry)
    }
    // Left: runs the catalog holds whose directory is gone (a catalog copied from another directory,
    // a run directory removed): that run's queries are refused, the others judged, as the listener does.
    for (const entry of catalogued.values()) {
      const error = runDirGone(store.runDir(entry.id), entry)
      store.restore(entry).damaged = error
      store.warnings.push(`run ${entry.id}: ${error.message}; its queries are refused`)
    }
    for (const { path, rounds } of journal.segments) for (const round of rounds) store.applyRound(round, path)
    // After the journal: a verdict must agree with every recorded ack (catalogued runs: the scrub). A run
    // announced in the journal with no directory in runs/ has no verdict file (one read each would cost
    // ~5 s on a backlog of 100,000 new runs).
    const listed = new Set(runIds)
    for (const run of store.runs.values())
      if (run.catalogued !== true && listed.has(run.meta.runId)) run.verdict = await store.replayVerdict(run)
    // Journal rounds and verdicts changed sizes after the runs were added: counted once, here (a
    // catalogued run has neither: its sizes are the catalog's, counted when it was added).
    for (const run of store.runs.values()) if (run.catalogued !== true) store.runs.recount(run)
    return { store, journal }
  }

  /** A new, empty segment: its header fsynced and its directory entry too, before any round goes there. */
  protected override async newSegment(segment: number): Promise<Segment> {
    const path = join(this.dir, 'journal', segmentName(segment))
    const handle = await open(path, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL, 0o644)
    try {
      // Its first round is the next one: the segments chain up (journal.ts).
      const header = segmentHeader(segment, this.lastRound + 1)
      const { bytesWritten } = await handle.write(header, 0, header.length, 0)
      if (bytesWritten !== header.length) throw Object.assign(new Error(`short write to ${path} (disk full?)`), { code: 'ENOSPC' })
      await handle.sync()
      await syncDirectoryAsync(join(this.dir, 'journal'))
      return { segment, path, handle, bytes: header.length, rounds: 0, openedMs: performance.now(), fold: new Map() }
    } catch (error) {
      await handle.close().catch(() => undefined)
      throw error
    }
  }

  /** The newest segment, holding its header only (its rounds go on after it). */
  private async reopenSegment(read: { segment: number; path: string; validBytes: number }): Promise<Segment> {
    const handle = await open(read.path, fsConstants.O_WRONLY | fsConstants.O_NONBLOCK)
    // Bytes after the header (a torn first round, never reported as recorded) are overwritten.
    return {
      segment: read.segment,
      path: read.path,
      handle,
      bytes: read.validBytes,
      rounds: 0,
      openedMs: performance.now(),
      fold: new Map(),
    }
  }

  async close(): Promise<void> {
    this.closing = true
    await this.scrubbing
    while (this.verdictWrites.size > 0) await Promise.all(this.verdictWrites.values())
    while (this.committing !== undefined || this.folding !== undefined) await Promise.all([this.committing, this.folding])
    clearTimeout(this.foldTimer)
    const segment = this.segment
    this.segment = undefined
    if (segment !== undefined) {
      // Segments a start found and a stop cut short stay before it: folded, oldest first, at the next start.
      const backlogLeft = this.unfolded.length > 0
      // Its commits are read back from it until it is folded (below) or, not folded, for good.
      this.unfolded.push(segment)
      await segment.handle.close().catch(() => undefined)
      // A clean stop leaves every run in runs/ and a journal of one segment holding its header only,
      // the end of the chain of segments (journal.ts); a failed journal stays for the restart.
      if (this.broken === undefined && segment.rounds > 0 && !backlogLeft) {
        try {
          const next = await this.newSegment(segment.segment + 1)
          await next.handle.close()
        } catch (error) {
          this.warnings.push(
            `could not start journal segment ${segment.segment + 1} at the stop: ${describeSystemError(error)}; the journal is folded at the next start`,
          )
          this.lock?.release()
          this.lock = undefined
          return
        }
        await this.fold(segment)
      }
    }
    if (this.broken === undefined && this.catalogDirty) await this.saveCatalog()
    await this.catalogWrite
    this.lock?.release()
    this.lock = undefined
  }

  protected override scratchStore(): AckStore {
    return new AckStore(this.dir, { maxSpans: this.maxSpans })
  }
}

/**
 * Takes <dir>/lock (exclusive) and returns it, to hold for the listener's life; the OS releases it
 * when the process dies, however it dies.
 */
function lockDirectory(dir: string): FileLock {
  const path = join(dir, 'lock')
  return holdExclusiveLock(path, true, () =>
    usageError(
      `another plugcheck (a listener or a prune) holds ${dir}'s lock (${path})`,
      'stop that listener or wait for that prune, or give this one a --dir of its own; verify --acks can read the directory meanwhile',
    ),
  )!
}
