/**
 * The listener's durable memory: <dir>/journal/ (journal.ts), where every group commit round of every
 * run is written first (one write, one fdatasync per round, however many runs), and is folded every
 * few seconds into one directory per run (fold.ts) under <dir>/runs/<runId>/ holding
 *   acks.log      the run's ack log (format and reader: ack-log.ts): a header naming the run, written
 *                 and fsynced first, then one checksummed entry per group commit (one fdatasync covers
 *                 every ack, steady and end queued while the previous fdatasync ran)
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
 * refusal naming the file and the byte, never the acks after it dropped (ack-log.ts has the rules).
 * Replay streams the log in chunks (a log of any size replays) and turns any read error other than a
 * missing file into a refusal: fewer acks than were recorded would turn a FAIL into a PASS. Ack
 * times are stamped monotonic per run (never before the announcement or the previous ack), so a clock
 * stepped back cannot make a run's own log look implausible.
 * A short write, ENOSPC or a failed fdatasync of a round fails every run with acks in that round or
 * queued, and the journal takes nothing more (after a failed fdatasync it cannot be trusted: never
 * retried); the listener says so, and answers queries from what was recorded until restarted.
 * Start reads <dir>/catalog.msgpack (catalog.ts): the runs retired and wholly in runs/ are taken
 * from it, unread; the rest (live at the last catalog, an older listener's, in the journal) are replayed.
 * Damage in a replayed run refuses the start; damage in a catalogued run is found by the scrub after
 * start (startScrub: every catalogued run replayed by the same rules, in the background), or a
 * catalogued run's directory missing at start: a warning, and that run's queries are refused naming
 * the file, never answered with fewer acks. A query reading an ended run's files back checks them too.
 *
 * Order: runs are ordered by announceIndex (one more than the highest on record, at announcement),
 * never by the listener's clock, which may step back; meta files without it (older listeners) come
 * before every run that has one, ordered by announcement time.
 * File descriptors: the journal's segment, and at most foldLanes run files during a fold.
 * Files are opened with O_NONBLOCK and must be regular files: a FIFO or device planted in the
 * directory cannot hang startup.
 * Event loop and threadpool: no synchronous fs call in the ack and hello paths (a frozen disk must
 * not stop hellos): a round's write and fdatasync, and the fold's calls, go to the libuv threadpool
 * (4 threads; a fold takes at most foldLanes, so a round always finds one). Verdicts, rare, still
 * write synchronously before their fsync.
 *
 * In memory a run's acks are spans, not one entry per seq (span-table.ts, 24 bytes a span): consecutive
 * seqs received within spanWindowMs of each other share a span, so the time window of any lost seq is
 * known to that precision while a run of hours stays small. Past maxSpans (maxStoredSpans, a week)
 * neighbouring spans are merged pairwise: the seqs stay exact, the merged windows coarser. A verifier
 * gets a long run's spans page by page (spanPage), never all in one reply.
 * A run's spans are made from its logged items (applyItem, addLoggedSpan), when the journal round
 * holding them is durable, never ack by ack: a live run's spans are exactly what a replay of its log
 * gives, so a query of a live run shows its recorded acks only (as a restart would), and its reply
 * does not change when it ends, is evicted or the listener restarts. Its end likewise: answered once
 * the round holding it is durable (endQueued until then: the run is answered as live, never as ended
 * with fewer acks than its end follows), and every count answered (runs, claims, a verdict's check)
 * is its recorded acks (durableThroughSeq; lastAckedSeq is the writer's, for the next ack in order).
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
import { EventEmitter } from 'node:events'
import { closeSync, constants as fsConstants, fsync, mkdirSync, openSync, renameSync, stat as statCallback, writeSync } from 'node:fs'
import { mkdir, open, readdir, rename, rm, stat, unlink, type FileHandle } from 'node:fs/promises'
import { promisify } from 'node:util'
import { join } from 'node:path'
import { holdExclusiveLock } from '../base/locks.js'
import { peerKey } from '../protocol/endpoint.js'
import type { FileLock } from '../native/index.js'
import { syncDirectoryAsync } from '../base/directory-sync.js'
import { performance } from 'node:perf_hooks'
import { Packr } from 'msgpackr'
import { z } from 'zod'
import type { RunMeta } from '../record/format.js'
import { runIdSchema, runMetaSchema } from '../record/format.js'
import {
  campaignTagSchema,
  type endReasons,
  epochMsSchema,
  groupRunsMax,
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
import { describeSystemError, exitCodes, runtimeError, usageError } from '../base/errors.js'
import {
  frameCommit,
  logHeader,
  maxCommitBytes,
  maxEndDetailBytes,
  maxItemsPerCommit,
  parseCommitFrame,
  readFramesBetween,
  replayLog,
  type LogItem,
  type LogReplay,
} from './ack-log.js'
import {
  damagedSegment,
  frameRound,
  listSegments,
  readSegment,
  roundTargetBytes,
  segmentHeader,
  segmentName,
  type JournalRound,
} from './journal.js'
import { foldRuns, logShorterThanJournal, type FoldRun } from './fold.js'
import { seal, unseal, type SealedKind } from './sealed-file.js'
import { SpanSummary, SpanTable } from './span-table.js'
import { MinHeap } from './min-heap.js'
import { catalogFormatVersion, catalogName, encodeCatalog, readCatalog, writeCatalog, type Catalog, type CatalogEntry } from './catalog.js'
import { setImmediate as yieldToLoop } from 'node:timers/promises'

export { frameCommit, frameLogEntry, logHeader } from './ack-log.js'
export { spanWindowMs } from './span-table.js'
/** meta.msgpack is a few KiB (a fingerprint included); anything over this is damage. */
const maxMetaFileBytes = 1024 * 1024
/** A journal segment is folded into the run files once it holds this many bytes, or is this old. */
const defaultSegmentBytes = 16 * 1024 * 1024
const defaultFoldAgeMs = 5_000
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
  /** Announcement order; undefined for runs stored by older listeners (they come first). Taken from meta.msgpack over a catalog that differs. */
  announceIndex: number | undefined
  /** performance.now() at the announcement, for runs announced since this listener started. */
  announcedPerfMs?: number
  origin: RunOrigin
  /**
   * Its spans, made from its logged items only, when the round holding them is durable (applyItem at
   * replay, addLoggedSpan after a round's fdatasync): what a replay of its log gives, recorded acks only.
   * An empty table once evicted (evicted says what they were: read back from its log on demand).
   */
  spans: SpanTable
  /**
   * Set when the run's spans left memory (read at start, retired and folded, or past residentSpansMax
   * while live): queryAsync reads them back from its log and the journal. summary goes on taking the
   * spans of a live run (absent for runs taken from the catalog, which take no more).
   */
  evicted?: { spanCount: number | undefined; lastAckMs: number | undefined; readonly summary?: SpanSummary }
  /** Log bytes whose items are in spans (a round's commit counts once its fdatasync returned). */
  appliedBytes: number
  /** The stamp of the latest ack accepted (ackStampMs: stamps never go back), 0 before the first. */
  lastStampMs: number
  /** Read from the catalog at start, its files not checked yet (the scrub checks them). */
  catalogued?: boolean
  /** Its meta.msgpack carries this version's checksum (an older listener's has none): set by a replay. */
  metaSealed?: boolean
  /** Read from the catalog at start (checked since or not): a prune holds it against its files first. */
  fromCatalog?: boolean
  /** Its files do not hold what is on record for it (found after start): its queries are refused with this. */
  damaged?: Error
  /** Its writer's fingerprint left memory (bootId kept): read back from meta.msgpack for a query. */
  writerTrimmed?: boolean
  /**
   * Its log's stamp (logStamp) when the bytes of its copy were read, or when this listener's fold last
   * wrote it: a cached copy is used only while the log has this stamp (else the log is read whole
   * again, so damage done since is found, never served from a copy of what it held).
   */
  logSeen?: string
  /** Its end as logged: set once the round holding it is durable (what a replay gives), never before. */
  end?: { reason: EndReason; detail?: string; atMs: number }
  /**
   * An end accepted (endRun, release) whose round is not durable yet: the run takes nothing more, but
   * queries answer it as live until its end is recorded (then with every ack before it).
   */
  endQueued?: { reason: EndReason; detail?: string; atMs: number }
  /** When the writer first said it was steady, as logged (null: never, or not recorded yet). */
  steadyMs: number | null
  /** A steady accepted whose round is not durable yet (steadyMs is set from it once it is). */
  steadyQueuedMs?: number
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
  /** The run's log size once every commit given so far is folded: where its next commit goes (`at`). */
  logBytes: number
  /** meta.msgpack's size (for usage()). */
  metaBytes: number
  /** verdict.msgpack's size (0: none), for usage(). */
  verdictBytes?: number
  /** Its announcement waits for a journal round (createRun's promise settles with that round). */
  announce?: { readonly metaBytes: Buffer; readonly resolve: () => void; readonly reject: (error: Error) => void }
}

/** A journal segment not folded yet: what its fold will write, per run. */
interface UnfoldedSegment {
  readonly segment: number
  readonly path: string
  readonly fold: Map<string, FoldRun>
  /** Its fold wrote and fsynced the run files (the catalog may take its runs; the segment goes next). */
  foldedToRuns?: boolean
}

/** The journal segment rounds are appended to. */
interface Segment extends UnfoldedSegment {
  readonly handle: FileHandle
  bytes: number
  rounds: number
  readonly openedMs: number
}

/** A run's spans read back for queries: the run replayed from its log and the journal through copy.appliedBytes (none when only its writer was read), and its writer from meta.msgpack. */
interface ReadBack {
  /** The run it was read for (a run id pruned and announced again is another run: its entry is never served for it). */
  readonly of: RunState
  readonly copy: RunState | undefined
  readonly writer: WriterEnv | undefined
}

/** A run's commit in a round being written: its items, the seq they go through, and where its log ends after it. */
interface Committed {
  readonly run: RunState
  readonly throughSeq: number
  /** No longer in pendingEntries: appendAck never extends them. */
  readonly items: readonly LogItem[]
  readonly endBytes: number
}

/** The journal as read at start: its segments and, per run, what it holds. */
interface JournalRead {
  readonly segments: Array<{ segment: number; path: string; rounds: JournalRound[]; validBytes: number; torn: boolean }>
  /** Bytes of commits each run has in the journal (and its log header, when announced there): its log may be no longer than where they end. */
  readonly journalEnd: Map<string, number>
  /** The first commit of each run in the journal: where the durable part of its log ends. */
  readonly firstAt: Map<string, { at: number; path: string }>
  readonly announced: Set<string>
  readonly lastRound: number
  readonly lastSegment: number
}

export class StorageError extends Error {}

/** Spans kept read back from logs, in all: two runs of a week (a `write --method a,b` group), ~290 MB. */
const cachedSpansDefault = 2 * maxStoredSpans
/**
 * Runs kept read back, in all, whatever their spans: each entry is a copy of its run (metadata, writer,
 * span table), a few KB even for a run of one span, so 100,000 short runs would hold ~1 GB under the span budget alone.
 */
const cachedRunsDefault = 4096

/**
 * Read-backs of runs under way at once, in all (others wait their turn, first come first served):
 * each builds a whole copy of its run before the cache takes it, so spans in memory are the cache
 * plus at most this many runs, however many queries ask at once.
 */
const readBacksAtOnce = 2

export interface AckStoreOptions {
  /** Spans kept in memory per run (default and most: maxStoredSpans, what a reply may carry); lower for tests. */
  readonly maxSpans?: number
  /** A journal segment is folded at this size (default 16 MiB) or age (default 5 s); lower for tests. */
  readonly segmentBytes?: number
  readonly foldAgeMs?: number
  /** Spans read back for queries kept in memory at most (LRU across runs and connections; default maxStoredSpans). */
  readonly cachedSpansMax?: number
  /** Runs the read-back cache keeps at most (default cachedRunsDefault); lower for tests. */
  readonly cachedRunsMax?: number
  /** A live run's spans leave memory once it holds more than this many (default residentSpansDefault); lower for tests. */
  readonly residentSpansMax?: number
}

/**
 * A run keeps at most this many spans in memory (~96 KiB), however long it runs: past it they leave
 * for its log (SpanSummary stays, 64 bytes) and are read back for a query. Resident spans in all:
 * runs holding their table x residentSpansMax, plus the read-back cache (cachedSpansMax).
 */
const residentSpansDefault = 4096

/** A query reads a run's log back in chunks of this size, yielding to the event loop in between. */
const queryChunkBytes = 64 * 1024

export interface AckStoreEvents {
  /** An ack was accepted (in memory; durable at the next 'recorded'). For instrumentation. */
  accepted: [runId: string, fromSeq: number, toSeq: number]
  recorded: [runId: string, throughSeq: number]
  failed: [runId: string, error: Error]
  /** Something found after start (the scrub's damage, a catalog that could not be written): said to the user. */
  warning: [message: string]
}

export class AckStore extends EventEmitter<AckStoreEvents> {
  private readonly runs = new RunMap()
  /** Runs with entries to write or a log to close, for the next group commit round. */
  private readonly dirty = new Set<RunState>()
  private committing: Promise<void> | undefined
  /** The highest announceIndex on record; the next announcement gets one more. */
  private lastAnnounceIndex = 0
  /** Files open right now in a fold (ack logs and meta files; never between folds). */
  private readonly foldFiles = { openLogs: 0 }
  /** Announcements waiting for the next round, in order. */
  private readonly announceQueue: RunState[] = []
  private segment: Segment | undefined
  private lastRound = 0
  /** The fold of the previous segment (or of the segments a start found), under way in the background. */
  private folding: Promise<void> | undefined
  /** Segments a start found that are not folded yet (0 once the backlog is folded). */
  backlogFolds = 0
  private foldTimer: NodeJS.Timeout | undefined
  /** Set when a round's write or fdatasync, or a fold, failed: the journal takes nothing more. */
  private broken: Error | undefined
  /** fdatasyncs of journal rounds so far (one per round, whatever the number of runs in it). */
  roundSyncCount = 0
  private readonly segmentBytesMax: number
  private readonly foldAgeMs: number
  /** Spans and writers of evicted runs read back for queries, least recently used first. */
  private readonly readBack = new Map<string, ReadBack>()
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
  private startCache: MinHeap<RunState> | undefined
  /** Read-backs under way (at most readBacksAtOnce), the queries waiting for one in order, and the spans they may bring. */
  private readBacksRunning = 0
  private readonly readBackQueue: Array<() => void> = []
  private readingSpans = 0
  private readonly cachedSpansMax: number
  private readonly cachedRunsMax: number
  private readonly residentSpansMax: number
  /** Segments rotated out and not folded yet (a failed fold's stays): a run's commits there are read back from them. */
  private readonly unfolded: UnfoldedSegment[] = []
  /** Only the listener's store evicts (verify --acks and report read a directory once). */
  private evicting = false
  /** Verdict writes under way, per run: one run's verdicts are stored in order. */
  private readonly verdictWrites = new Map<string, Promise<void>>()
  /** The descriptor holding <dir>/lock, for the store's life (the listener's, not verify's). */
  private lock: FileLock | undefined
  readonly warnings: string[] = []
  /** Run logs replayed at start (those not in the catalog): a start from the catalog replays few. */
  replayedLogCount = 0
  /** Catalogs written so far. */
  catalogWriteCount = 0
  /** Something the catalog holds changed since it was written (a run retired and folded, a verdict, a prune). */
  private catalogDirty = false
  /** Catalog writes, one after the other. */
  private catalogWrite: Promise<boolean> = Promise.resolve(true)
  private scrubbing: Promise<void> | undefined
  private readonly checking = new Map<RunState, Promise<void>>()
  private closing = false

  /** Spans kept per run; beyond it neighbours are merged (see coarsen). */
  readonly maxSpans: number

  private constructor(
    readonly dir: string,
    options: AckStoreOptions = {},
  ) {
    super()
    this.maxSpans = options.maxSpans ?? maxStoredSpans
    this.segmentBytesMax = options.segmentBytes ?? defaultSegmentBytes
    this.foldAgeMs = options.foldAgeMs ?? defaultFoldAgeMs
    this.cachedSpansMax = options.cachedSpansMax ?? cachedSpansDefault
    this.cachedRunsMax = options.cachedRunsMax ?? cachedRunsDefault
    this.residentSpansMax = options.residentSpansMax ?? residentSpansDefault
    if (!Number.isInteger(this.maxSpans) || this.maxSpans < 2 || this.maxSpans > maxStoredSpans)
      throw new RangeError(`maxSpans must be 2..${maxStoredSpans}`)
    if (!Number.isInteger(this.residentSpansMax) || this.residentSpansMax < 1)
      throw new RangeError('residentSpansMax must be a positive integer')
    if (!Number.isInteger(this.cachedRunsMax) || this.cachedRunsMax < 1) throw new RangeError('cachedRunsMax must be a positive integer')
  }

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
        if (last !== undefined && last.torn && last.validBytes > 0) await cutTornTail(last.path, last.validBytes)
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
        store.endStartCache()
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
      store.endStartCache()
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
   * journal changed during it (segments appended to, rotated or deleted), at most readAttemptsMax
   * times; a read that fails on a journal that did not change is damage, said at once.
   */
  private static async readWhileLive(dir: string, options: AckStoreOptions, catalogUse: 'check' | 'peek'): Promise<AckStore> {
    for (let attempt = 1; ; attempt++) {
      const before = await journalState(join(dir, 'journal'))
      try {
        return (await AckStore.read(dir, options, catalogUse)).store
      } catch (error) {
        if (
          attempt >= readAttemptsMax ||
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
    if (catalogUse === 'use') store.startCache = new MinHeap((a, b) => announceOrder(a, b) < 0)
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

  /** The catalog, or undefined (with a warning when it should have been usable) for a full replay. */
  private async readCatalogAtStart(catalogUse: 'use' | 'peek' | 'check', runDirs: number): Promise<Catalog | undefined> {
    const catalog = await readCatalog(this.dir)
    const path = join(this.dir, catalogName)
    if (catalog === 'missing') {
      // An older listener's directory has none; a run directory without it is replayed, nothing lost.
      if (catalogUse === 'use' && runDirs > 0)
        this.warnings.push(`${path} is missing: every run's log is replayed (this start takes longer), and a new catalog is written`)
      return undefined
    }
    if ('problem' in catalog) {
      this.warnings.push(
        `${path} is not usable (${catalog.problem}): every run's log is replayed (this start takes longer)${catalogUse === 'use' ? ', and a new catalog is written' : ''}`,
      )
      return undefined
    }
    return catalog
  }

  /** A run from its catalog entry: its summary only (spans and writer read back for a query, like an evicted run's). */
  private restore(entry: CatalogEntry): RunState {
    const origin: RunOrigin = {
      ...(entry.peer === undefined ? {} : { peer: entry.peer }),
      ...(entry.writer === undefined ? {} : { writer: entry.writer }),
      ...(entry.authenticated === undefined ? {} : { authenticated: entry.authenticated }),
      ...(entry.campaign === undefined ? {} : { campaign: entry.campaign }),
    }
    const run = newRunState(entry.meta, entry.announcedMs, entry.announceIndex, origin, noSpans)
    run.retired = true
    setLogged(run, entry)
    run.metaBytes = entry.metaBytes
    run.verdict = entry.verdict
    if (entry.verdictBytes !== undefined) run.verdictBytes = entry.verdictBytes
    run.evicted = { spanCount: entry.spanCount, lastAckMs: entry.lastAckMs }
    run.writerTrimmed = entry.writer !== undefined
    run.catalogued = true
    run.fromCatalog = true
    this.runs.set(entry.id, run)
    this.lastAnnounceIndex = Math.max(this.lastAnnounceIndex, entry.announceIndex ?? 0)
    return run
  }

  /** A run replayed from its files against what the catalog recorded of it: fewer commits, bytes or acks is damage. */
  private checkAgainstCatalog(runId: string, entry: CatalogEntry): void {
    const run = this.runs.get(runId)
    if (run === undefined) throw runDirGone(this.runDir(runId), entry)
    const problem = lessThanRecorded(run, entry)
    if (problem !== undefined) throw damagedLog(join(this.runDir(runId), 'acks.log'), problem)
  }

  /**
   * Every segment, oldest first; only the last one's last round may be torn (ignored with a warning).
   * The segments must be numbered one after the other and chain up by their rounds (journal.ts): a
   * segment missing, or one from another state of the directory put back, is damage.
   */
  private async readJournal(): Promise<JournalRead> {
    const listed = await listSegments(join(this.dir, 'journal'))
    const segments: JournalRead['segments'] = []
    const firstAt: JournalRead['firstAt'] = new Map()
    const journalEnd: JournalRead['journalEnd'] = new Map()
    const announced = new Set<string>()
    let nextRound = 0
    for (const [i, { segment, path }] of listed.entries()) {
      const previous = listed[i - 1]
      if (previous !== undefined && segment !== previous.segment + 1) {
        throw damagedSegment(
          path,
          0,
          `the segment before it is ${previous.path}: segments ${previous.segment + 1} to ${segment - 1} are missing`,
        )
      }
      const read = await readSegment(path, segment, i === listed.length - 1, nextRound)
      if (read.tornTail !== null) {
        this.warnings.push(
          `ignored ${read.tornTail.bytes} bytes of a torn journal round at byte ${read.tornTail.atByte} of ${path}: the last round, cut short by a crash, was never reported as recorded`,
        )
      }
      nextRound = read.rounds.length === 0 ? read.firstRound : read.rounds.at(-1)!.r + 1
      for (const round of read.rounds) {
        for (const a of round.a) {
          announced.add(a.id)
          journalEnd.set(a.id, logHeader(a.id).length)
        }
        for (const c of round.c) {
          if (!firstAt.has(c.id) && !announced.has(c.id)) firstAt.set(c.id, { at: c.at, path })
          journalEnd.set(c.id, c.at + c.f.length)
        }
      }
      segments.push({ segment, path, rounds: read.rounds, validBytes: read.validBytes, torn: read.tornTail !== null })
    }
    return {
      segments,
      firstAt,
      journalEnd,
      announced,
      lastRound: nextRound === 0 ? 0 : nextRound - 1,
      lastSegment: listed.at(-1)?.segment ?? 0,
    }
  }

  /** One journal round applied in memory: its announcements, then its commits (checked as a log's). */
  private applyRound(round: JournalRound, path: string): void {
    for (const { id, m } of round.a) {
      if (this.runs.has(id)) throw damagedSegment(path, 0, `round ${round.r} announces run ${id} a second time`)
      const metaFile = this.metaOf(m, `${path} (round ${round.r})`, id)
      const run = newRunState(metaFile.meta, metaFile.announcedMs, metaFile.announceIndex, originOf(metaFile))
      run.retired = true
      run.logBytes = logHeader(id).length
      run.appliedBytes = run.logBytes
      run.metaBytes = m.length
      this.runs.set(id, run)
      this.lastAnnounceIndex = Math.max(this.lastAnnounceIndex, metaFile.announceIndex ?? 0)
    }
    for (const { id, at, f } of round.c) {
      const run = this.runs.get(id)
      const where = `round ${round.r} holds a commit of run ${id}`
      if (run === undefined) throw damagedSegment(path, 0, `${where}, which is not on record (its directory in runs/ is gone)`)
      const commit = parseCommitFrame(f)
      if ('problem' in commit) throw damagedSegment(path, 0, `${where} that ${commit.problem}`)
      if (commit.n !== run.commits + 1 || at !== run.logBytes)
        throw damagedSegment(
          path,
          0,
          `${where} numbered ${commit.n} for byte ${at}, where commit ${run.commits + 1} at byte ${run.logBytes} was expected`,
        )
      for (const item of commit.items) {
        const problem = applyItem(run, item, this.maxSpans)
        if (problem !== undefined) throw damagedSegment(path, 0, `${where} that ${problem}`)
      }
      run.commits = commit.n
      run.logBytes += f.length
      run.appliedBytes = run.logBytes
      run.durableThroughSeq = run.lastAckedSeq
    }
  }

  /** meta.msgpack's bytes checked (checksum, schema, run id), or a refusal naming where they were read. */
  private metaOf(bytes: Buffer, where: string, runId: string): z.infer<typeof metaFileSchema> {
    const decoded = unsealed('meta', bytes)
    if ('problem' in decoded) throw damagedMeta(where, decoded.problem)
    const parsed = metaFileSchema.safeParse(decoded.value)
    if (!parsed.success) throw damagedMeta(where, describeInvalid(parsed.error))
    if (parsed.data.meta.runId !== runId)
      throw damagedMeta(where, `it describes run ${parsed.data.meta.runId}, not run ${runId} of its directory`)
    return parsed.data
  }

  /** A new, empty segment: its header fsynced and its directory entry too, before any round goes there. */
  private async newSegment(segment: number): Promise<Segment> {
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
  private async replay(runId: string, journaled?: { at: number; path: string }, chunkBytes?: number): Promise<void> {
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
    if (metaFile.meta.runId !== runId)
      throw damagedMeta(metaPath, `it describes run ${metaFile.meta.runId}, not run ${runId} of its directory`)
    const run = newRunState(metaFile.meta, metaFile.announcedMs, metaFile.announceIndex, originOf(metaFile))
    run.retired = true
    run.metaSealed = decoded.sealed
    // With commits in the journal, only the log's first `at` bytes are durable (fold.ts): the rest is
    // not read (a fold cut short), and a log shorter than that lost fsynced bytes.
    if (journaled !== undefined) {
      const sizeBytes = await fileSize(logPath)
      if (sizeBytes < journaled.at) throw logShorterThanJournal(logPath, sizeBytes, journaled.at)
    }
    // Taken before the read: a change during it shows as another stamp at the next query.
    const stamp = await logStamp(logPath)
    const replayed = await replayLog(logPath, runId, (item) => applyItem(run, item, this.maxSpans), journaled?.at, chunkBytes)
    // A sealed meta.msgpack was written by this version, after the log's header was fsynced: no crash
    // leaves it without that header. (Older listeners created an empty log: a legacy run may have one.)
    if (decoded.sealed && replayed.format !== 2) throw damagedLog(logPath, logWithoutHeader(replayed))
    if (journaled !== undefined && (replayed.tornTail !== null || replayed.validBytes !== journaled.at)) {
      throw damagedLog(
        logPath,
        `its first ${journaled.at} bytes, fsynced before ${journaled.path} was written, do not end in a whole commit (whole entries end at byte ${replayed.validBytes})`,
      )
    }
    if (replayed.tornTail !== null) this.warnings.push(tornTailWarning(runId, logPath, replayed.tornTail))
    run.commits = replayed.commits
    run.logBytes = replayed.validBytes
    run.appliedBytes = run.logBytes
    run.metaBytes = metaBytes.length
    run.durableThroughSeq = run.lastAckedSeq
    if (stamp !== undefined) run.logSeen = stamp
    this.runs.set(runId, run)
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
    // A damaged verdict file still takes its bytes on disk.
    if (typeof bytes !== 'string') run.verdictBytes = bytes.length
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
    return this.runs.runsByGroup.has(groupId)
  }

  lastAckedSeq(runId: string): number {
    return this.runs.get(runId)?.lastAckedSeq ?? 0
  }

  /** What the listener needs to judge a new announcement or an ack against a known run. */
  runInfo(
    runId: string,
  ): { meta: RunMeta; announcedMs: number; origin: RunOrigin; ended: boolean; steadyMs: number | null; creating: boolean } | undefined {
    const run = this.runs.get(runId)
    return run === undefined
      ? undefined
      : {
          meta: run.meta,
          announcedMs: run.announcedMs,
          origin: run.origin,
          ended: endAccepted(run),
          steadyMs: run.steadyMs ?? run.steadyQueuedMs ?? null,
          creating: run.creating === true,
        }
  }

  /**
   * What a query answers of the run (a state a replay of the durable journal and log gives): its
   * recorded acks, whether its end is recorded, and whether an end was accepted whose round is not
   * durable yet (settling: answered as live until then). Undefined for a run not on record.
   */
  recorded(runId: string): { throughSeq: number; ended: boolean; settling: boolean } | undefined {
    const run = this.runs.get(runId)
    return run === undefined || run.creating === true
      ? undefined
      : { throughSeq: run.durableThroughSeq, ended: run.end !== undefined, settling: isSettling(run) }
  }

  /** Resolves once none of these runs has an end accepted and not recorded (its round durable, or the journal failed). */
  async endsRecorded(runIds: readonly string[]): Promise<void> {
    const settling = (): boolean =>
      runIds.some((id) => {
        const run = this.runs.get(id)
        return run !== undefined && isSettling(run)
      })
    // The commit loop runs until nothing is queued: when it ends, each end was written or failed.
    while (settling() && this.committing !== undefined) await this.committing
  }

  /**
   * Makes the run durable before the writer is told to start: its announcement (meta.msgpack's bytes)
   * goes into the next journal round, and the promise settles when that round's fdatasync returned (a
   * run exists once its announcement is durable; no fsync of its own). The fold later creates its
   * directory, log and meta.msgpack. If the round fails, the announcement is refused and the run forgotten.
   */
  async createRun(meta: RunMeta, announcedMs: number, origin: RunOrigin = {}): Promise<void> {
    if (this.runs.has(meta.runId)) throw new StorageError(`run ${meta.runId} already exists`)
    if (!epochMsSchema.safeParse(announcedMs).success) {
      // Replay and verify refuse such times; storing them would lose the run's acks later.
      throw new StorageError(
        `the listener's clock reads ${new Date(announcedMs).toISOString()}, not a real date: set it before announcing runs`,
      )
    }
    if (this.broken !== undefined) throw new StorageError(`could not store run ${meta.runId}: ${this.broken.message}`)
    // meta.msgpack's schema takes no index past this: a run stored with one could not be read back.
    if (this.lastAnnounceIndex >= Number.MAX_SAFE_INTEGER) {
      throw new StorageError(
        `could not store run ${meta.runId}: the listener's last announcement is number ${this.lastAnnounceIndex}, the highest a run can be stored with (its run files say so: damaged or crafted)`,
      )
    }
    // The order is taken now, in announcement order, whatever the clock says.
    const announceIndex = ++this.lastAnnounceIndex
    const run = newRunState(meta, announcedMs, announceIndex, origin)
    run.announcedPerfMs = performance.now()
    run.creating = true
    run.logBytes = logHeader(meta.runId).length
    run.appliedBytes = run.logBytes
    this.runs.set(meta.runId, run) // reserve the id at once: a second announcement must not race us
    const metaBytes = seal('meta', packr.pack({ meta, announcedMs, announceIndex, ...origin }))
    run.metaBytes = metaBytes.length
    await new Promise<void>((resolve, reject) => {
      run.announce = { metaBytes, resolve, reject }
      this.announceQueue.push(run)
      this.startCommit()
    })
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
    return Math.max(Math.round(run.announcedMs + elapsedMs), run.lastStampMs, run.announcedMs)
  }

  /** Accepts an ack in order; durable after the next group commit, announced by a 'recorded' event. */
  appendAck(runId: string, fromSeq: number, toSeq: number, receivedMs: number): void {
    const run = this.runs.get(runId)
    if (run === undefined) throw new Error(`appendAck on unknown run ${runId}`)
    if (!isWritable(run)) throw new Error(`appendAck on run ${runId}, which takes no more acks`)
    receivedMs = this.ackStampMs(runId, receivedMs)
    // Its span is made from the logged item once the round holding it is durable (writeRound), as a
    // replay makes it: acks queued between rounds share one item, and so one span window.
    if (fromSeq !== run.lastAckedSeq + 1 || toSeq < fromSeq)
      throw new Error(`ack ${fromSeq}-${toSeq} does not follow seq ${run.lastAckedSeq} of run ${runId}`)
    run.lastAckedSeq = toSeq
    run.lastStampMs = receivedMs
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
    if (endAccepted(run)) throw new Error(`endRun on run ${runId}, which already ended`)
    // Stamped like its acks: a listener clock stepped (to 1970, or back) mid-run cannot write an end its replay refuses.
    atMs = this.ackStampMs(runId, atMs)
    // Cut so that an end alone fits a commit (maxCommitBytes); kept in memory as it is logged.
    if (detail !== undefined) detail = cutToBytes(detail, maxEndDetailBytes)
    // Answered as ended once the round holding it is durable (writeRound): a query before that would
    // show an end with fewer acks than it follows, a state no replay gives.
    run.endQueued = { reason, ...(detail === undefined ? {} : { detail }), atMs }
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
    if (run.steadyMs !== null || run.steadyQueuedMs !== undefined) return false
    atMs = this.ackStampMs(runId, atMs) // as endRun
    // Answered (runs) once the round holding it is durable, as its end.
    run.steadyQueuedMs = atMs
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
        // A run not folded yet has no directory: made here (the fold leaves verdict.msgpack alone).
        if ((await mkdir(dir, { recursive: true })) !== undefined) await syncDirectoryAsync(join(this.dir, 'runs'))
        const file = openSync(tmpPath, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_TRUNC, 0o644)
        try {
          const sealed = seal('verdict', packr.pack({ runId, result }))
          writeAllSync(file, sealed, tmpPath)
          run.verdictBytes = sealed.length
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
      // Written with the next fold (a crash before it: the scrub reads verdict.msgpack again).
      this.catalogDirty = true
      this.runs.recount(run)
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
    if (!endAccepted(run) && run.failed === undefined) return this.endRun(runId, 'vanished', undefined, atMs)
    run.retired = true
  }

  private queue(run: RunState, entry: LogItem): void {
    run.pendingEntries.push(entry)
    this.markDirty(run)
  }

  private markDirty(run: RunState): void {
    this.dirty.add(run)
    this.startCommit()
  }

  private startCommit(): void {
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
  private async writeRound({ round, announced, committed }: NonNullable<ReturnType<AckStore['buildRound']>>): Promise<void> {
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
      if (this.evicting && run.evicted === undefined && run.spans.length > this.residentSpansMax) this.evictSpans(run)
      this.runs.recount(run)
      this.emit('recorded', run.meta.runId, throughSeq)
    }
  }

  /**
   * A round that failed (or a fold): every run with acks not yet recorded fails (its acks in that round
   * were never reported recorded, and never will be), every queued announcement is refused, and nothing
   * more is written (never retried: PostgreSQL's fsync lesson).
   */
  private breakJournal(error: Error, announced: RunState[], inRound: RunState[]): void {
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
    return segment.bytes >= this.segmentBytesMax || performance.now() - segment.openedMs >= this.foldAgeMs
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
  private async rotate(): Promise<void> {
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
    const scratch = new AckStore(this.dir, { maxSpans: this.maxSpans })
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
            this.uncache(runId)
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
      this.uncache(runId)
    }
    this.catalogDirty = true
    // A catalog still holding them would read them as runs whose directory is gone: the renamed
    // directories go once it is written (else at the next start, after the catalog written there).
    if (await this.saveCatalog()) await removePruned(runsDir)
  }

  /**
   * Bounded memory per run: a retired run wholly in runs/ (nothing queued, nothing in the journal)
   * keeps its summary only; its spans and its writer's fingerprint are read back from its files when a
   * query asks (queryAsync, spanPageAsync). Its spans are what its log replays (they are made from the
   * logged items), so a reply is the same before and after they leave memory, and after a restart.
   */
  private evict(run: RunState): void {
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
  private summarizeReplayed(runId: string): void {
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
  private endStartCache(): void {
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
  private evictSpans(run: RunState): void {
    run.evicted = { spanCount: run.spans.length, lastAckMs: run.spans.lastAckMs, summary: SpanSummary.of(run.spans) }
    run.spans = noSpans
  }

  /**
   * The run as a query sees it: its spans (and writer) read back if evicted, through every commit
   * durable when the query asked (a cached copy of a live run is brought up to date first, from where
   * it ended: never served stale, never read whole again).
   */
  private async resident(run: RunState): Promise<RunState> {
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
  private cacheSpans(runId: string, entry: ReadBack, onlyIfRoom = false): void {
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
  private cachedFor(run: RunState): ReadBack | undefined {
    const entry = this.readBack.get(run.meta.runId)
    return entry?.of === run ? entry : undefined
  }

  /** A run's spans out of the read-back cache, taken back from its count as they were counted. */
  private uncache(runId: string): void {
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
  private async writerOf(runId: string): Promise<WriterEnv | undefined> {
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

  /**
   * Writes the catalog of every run retired and wholly in runs/ (after the one under way, if any).
   * False when it could not be written: a warning; the runs it lacks are replayed at the next start.
   */
  private saveCatalog(): Promise<boolean> {
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
  private inCatalog(run: RunState): boolean {
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

  private warn(message: string): void {
    this.warnings.push(message)
    this.emit('warning', message)
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
  private checked(run: RunState): Promise<void> {
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
    const scratch = new AckStore(this.dir, { maxSpans: this.maxSpans })
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
      if (!this.readBack.has(runId)) {
        this.cacheSpans(runId, { of: run, copy, writer: copy.origin.writer }, true)
        // The log as the copy was read from it (a copy not cached leaves the stamp of one that is).
        if (this.readBack.get(runId)?.copy === copy) run.logSeen = copy.logSeen
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

  /** Spans held in memory right now, in all (tests of the memory bound). */
  residentSpanCount(): number {
    let count = 0
    for (const run of this.runs.values()) count += run.spans.length
    for (const entry of this.readBack.values()) count += entry.copy?.spans.length ?? 0
    return count
  }

  /** Runs the read-back cache holds right now (tests of its bound). */
  cachedRunCount(): number {
    return this.readBack.size
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
  private foldBacklog(backlog: readonly UnfoldedSegment[]): void {
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
  private async fold(segment: UnfoldedSegment): Promise<void> {
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

  isWritable(runId: string): boolean {
    const run = this.runs.get(runId)
    return run !== undefined && isWritable(run)
  }

  /** Run files open right now (in a fold; for tests of the descriptor bound). */
  openLogCount(): number {
    return this.foldFiles.openLogs
  }

  /**
   * The runs a verify asks for: by run id, or the latest group for this host and path. A run with more
   * than inlineSpansMax spans comes without them (spanPage reads them).
   */
  query(host: string, requestedPath: string, runId?: string, options: { inlineSpansMax?: number } = {}): StoredRun[] {
    const runs = this.queried(host, requestedPath, runId)
    if (runs.some((r) => r.evicted !== undefined)) throw new Error('query() of evicted runs: the listener uses queryAsync()')
    return runs.map((r) => storedRun(r, options.inlineSpansMax))
  }

  /**
   * query() for the listener: evicted runs' spans are read back first (without blocking the event loop).
   * inlineSpansTotalMax bounds the spans inline in the whole reply (a wide group's runs each under
   * inlineSpansMax add up): a run that would go past it comes without its spans, as a long one does.
   */
  async queryAsync(
    host: string,
    requestedPath: string,
    runId?: string,
    options: { inlineSpansMax?: number; inlineSpansTotalMax?: number } = {},
  ): Promise<StoredRun[]> {
    if (runId === undefined) await this.checkNewerThanLatest(host, requestedPath)
    const runs = this.queried(host, requestedPath, runId)
    for (const run of runs) {
      await this.checked(run)
      if (run.damaged !== undefined) throw run.damaged
    }
    // Each member's reply made in turn (its spans as an array, the only copy the reply holds): no
    // member's read-back copy is held while the next one is read back.
    const stored: StoredRun[] = []
    let inlineLeft = options.inlineSpansTotalMax ?? Number.POSITIVE_INFINITY
    for (const run of runs) {
      const inlineMax = Math.min(options.inlineSpansMax ?? Number.POSITIVE_INFINITY, inlineLeft)
      const spanCount = run.evicted?.spanCount
      // Its spans do not go in the reply (a verifier pages them): its summary says all the reply needs.
      const reply =
        spanCount !== undefined && spanCount > inlineMax ? await this.summaryReply(run) : storedRun(await this.resident(run), inlineMax)
      inlineLeft -= reply.spans.length
      stored.push(reply)
    }
    return stored
  }

  /**
   * Before the background check has passed them, the catalogued runs announced after the path's latest
   * run (by the catalog) are checked first: one of them may be that path's run by its files (a catalog
   * made by hand or by someone else can say another path), and the latest run is the one the files say.
   * The check goes newest first, so this waits for few runs; a path no catalogued run names is answered
   * from the catalog until the check has passed every run.
   */
  private async checkNewerThanLatest(host: string, requestedPath: string): Promise<void> {
    for (;;) {
      const latest = this.queried(host, requestedPath).reduce<RunState | undefined>(
        (a, b) => (a === undefined || announceOrder(b, a) > 0 ? b : a),
        undefined,
      )
      if (latest === undefined) return
      const newer = [...this.runs.values()].filter((r) => r.catalogued === true && announceOrder(r, latest) > 0)
      if (newer.length === 0) return
      for (const run of newer) await this.checked(run)
    }
  }

  /**
   * An evicted run's reply without its spans, from its summary: the spans a read-back would give end
   * at its durable seq, at its last ack's time (the summary takes the same logged items). Its writer
   * read back if trimmed.
   */
  private async summaryReply(run: RunState): Promise<StoredRun> {
    const writer = run.writerTrimmed === true ? (this.cachedFor(run)?.writer ?? (await this.writerOf(run.meta.runId))) : run.origin.writer
    // An empty table for the fields storedRun reads; the summary's values replace them.
    const reply = storedRun({ ...run, spans: new SpanTable(), origin: writer === undefined ? run.origin : { ...run.origin, writer } })
    const lastAckMs = run.evicted?.lastAckMs
    return { ...reply, ackedThroughSeq: run.durableThroughSeq, ...(lastAckMs === undefined ? {} : { lastAckMs }) }
  }

  /** spanPage() for the listener (see queryAsync). */
  async spanPageAsync(runId: string, afterSeq: number, throughSeq: number, maxCount: number): Promise<Buffer | undefined> {
    const run = this.runs.get(runId)
    if (run === undefined || run.creating === true || throughSeq > run.lastAckedSeq) return undefined
    await this.checked(run)
    if (run.damaged !== undefined) throw run.damaged
    const view = await this.resident(run)
    if (throughSeq > view.spans.throughSeq) return undefined
    return view.spans.page(afterSeq, throughSeq, maxCount)
  }

  private queried(host: string, requestedPath: string, runId?: string): RunState[] {
    if (runId !== undefined) {
      const run = this.runs.get(runId)
      return run === undefined ? [] : [run]
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
      .slice(0, groupRunsMax)
  }

  /** Spans the run holds in memory (0 for a run not on record). */
  spanCount(runId: string): number {
    const run = this.runs.get(runId)
    if (run?.evicted !== undefined) return run.evicted.spanCount ?? this.cachedFor(run)?.copy?.spans.length ?? 0
    return run?.spans.length ?? 0
  }

  /**
   * A span-page of the run: the spans holding seqs afterSeq+1..throughSeq, at most maxCount (cut to
   * that range); undefined for a run not on record or throughSeq past its last acknowledged seq.
   */
  spanPage(runId: string, afterSeq: number, throughSeq: number, maxCount: number): Buffer | undefined {
    const run = this.runs.get(runId)
    if (run?.evicted !== undefined) throw new Error('spanPage() of an evicted run: the listener uses spanPageAsync()')
    if (run === undefined || run.creating === true || throughSeq > run.spans.throughSeq) return undefined
    return run.spans.page(afterSeq, throughSeq, maxCount)
  }

  /**
   * Every run on record for this host and path, newest first, at most groupRunsMax; live here only for a
   * run whose end is accepted and not recorded yet (the listener marks the runs whose writer is connected).
   */
  claims(host: string, requestedPath: string): Claim[] {
    return [...this.runs.values()]
      .filter((r) => r.meta.host === host && r.meta.requestedPath === requestedPath)
      .sort((a, b) => announceOrder(b, a))
      .slice(0, groupRunsMax)
      .map((r) => ({
        runId: r.meta.runId,
        groupId: r.meta.groupId,
        method: r.meta.method,
        announcedMs: r.announcedMs,
        ...(r.origin.peer === undefined ? {} : { peer: r.origin.peer }),
        ...(r.origin.authenticated === undefined ? {} : { authenticated: r.origin.authenticated }),
        // An end accepted, not recorded yet: answered as live until it is (never ended with fewer acks).
        live: isSettling(r),
        ...(r.end === undefined ? {} : { end: r.end }),
        ackedThroughSeq: r.durableThroughSeq,
      }))
  }

  /**
   * One line per run, newest first (announcement order), only the campaign's runs when one is named;
   * acks as recorded; live as in claims (the listener marks the runs whose writer is connected).
   */
  summaries(campaign?: string): RunSummary[] {
    return this.newestFirst(campaign).map(summaryOf)
  }

  /** Every run with its summary and its stored acks, newest first (for the report). */
  runRecords(): Array<{ summary: RunSummary; run: StoredRun }> {
    // A damaged run (its directory gone) has no acks to show: its warning names it instead.
    return this.newestFirst()
      .filter((r) => r.damaged === undefined)
      .map((r) => ({ summary: summaryOf(r), run: storedRun(r) }))
  }

  private newestFirst(campaign?: string): RunState[] {
    return [...this.runs.values()]
      .filter((r) => r.creating !== true && (campaign === undefined || r.origin.campaign?.name === campaign))
      .sort((a, b) => announceOrder(b, a))
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
      `another plugcheck (a listener or a prune) holds ${dir}'s lock (${path})`,
      'stop that listener or wait for that prune, or give this one a --dir of its own; verify --acks can read the directory meanwhile',
    ),
  )!
}

function isWritable(run: RunState): boolean {
  return run.failed === undefined && !endAccepted(run) && !run.retired
}

/** The writer's view: an end was accepted (recorded or not yet). */
function endAccepted(run: RunState): boolean {
  return run.end !== undefined || run.endQueued !== undefined
}

/** An end accepted whose round is not durable yet (and will be: the run has not failed). */
function isSettling(run: RunState): boolean {
  return run.end === undefined && run.endQueued !== undefined && run.failed === undefined
}

/** What a run's log says of it (its acks, commits, bytes, steady moment and end), set on the run as recorded and durable. */
function setLogged(run: RunState, logged: Pick<RunState, 'lastAckedSeq' | 'commits' | 'logBytes' | 'steadyMs' | 'end'>): void {
  run.lastAckedSeq = logged.lastAckedSeq
  run.durableThroughSeq = logged.lastAckedSeq
  run.commits = logged.commits
  run.logBytes = logged.logBytes
  run.appliedBytes = logged.logBytes
  run.steadyMs = logged.steadyMs
  if (logged.end === undefined) delete run.end
  else run.end = logged.end
}

/** The run's steady moment, logged in a round now durable. */
function recordSteadyMs(run: RunState, atMs: number): void {
  run.steadyMs = atMs
  delete run.steadyQueuedMs
}

/** The run's end, logged in a round now durable: answered from now on, as a replay gives it. */
function recordEnd(run: RunState, item: Extract<LogItem, { k: 'end' }>): void {
  run.end = { reason: item.reason, ...(item.detail === undefined ? {} : { detail: item.detail }), atMs: item.atMs }
  delete run.endQueued
}

/**
 * Cuts a failed round off its segment, best effort: its bytes may have reached the disk whole, and a
 * restart would then bring back announcements refused to their writers (the newest run on a path
 * with none of its acks). The segment's size made durable at the end of the last good round removes
 * it; if that fails too, the disk is failing and the error already says the listener stopped.
 */
async function voidRound(segment: Segment): Promise<void> {
  try {
    await segment.handle.truncate(segment.bytes)
    await segment.handle.sync()
  } catch {
    // the round may come back at restart: acks it holds were sent by their writers, so they are true
  }
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
  return runtimeError(
    `could not read ${path}: ${describeSystemError(error)}`,
    'the listener refuses to answer from an ack log it cannot read in full',
  )
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
  if (item.toSeq > maxPlausibleSeq(run.announcedMs, item.lastMs))
    return `acknowledges seq ${item.toSeq} by ${new Date(item.lastMs).toISOString()}, more than a writer can have written by then`
  addSpan(run, item.fromSeq, item.toSeq, item.firstMs, item.lastMs, maxSpans)
  return undefined
}

/** One commit frame (of the journal, or of a log read back from an offset) applied to a run's copy if it follows what came before; else what makes it impossible. */
function applyCommitFrame(copy: RunState, frame: Buffer, maxSpans: number): string | undefined {
  const commit = parseCommitFrame(frame)
  if ('problem' in commit) return commit.problem
  if (commit.n !== copy.commits + 1)
    return `is commit ${commit.n}, where commit ${copy.commits + 1} was expected (an entry duplicated, out of order or missing)`
  for (const item of commit.items) {
    const problem = applyItem(copy, item, maxSpans)
    if (problem !== undefined) return `(commit ${commit.n}) ${problem}`
  }
  copy.commits = commit.n
  copy.appliedBytes += frame.length
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

/**
 * The spans of every run restored from the catalog or evicted: none (read back into a table of their
 * own for a query). One shared table, not 100,000 (~0.4 s and ~40 MB at start): nothing adds to it (an
 * evicted run's next spans go to its summary), and frozen, so an add would throw rather than reach every run.
 */
const noSpans = new SpanTable()
Object.freeze(noSpans)

function newRunState(
  meta: RunMeta,
  announcedMs: number,
  announceIndex: number | undefined,
  origin: RunOrigin,
  spans = new SpanTable(),
): RunState {
  return {
    meta,
    announcedMs,
    announceIndex,
    origin,
    spans,
    appliedBytes: 0,
    lastStampMs: 0,
    steadyMs: null,
    verdict: null,
    lastAckedSeq: 0,
    retired: false,
    pendingEntries: [],
    durableThroughSeq: 0,
    commits: 0,
    logBytes: 0,
    metaBytes: 0,
  }
}

function originOf(metaFile: z.infer<typeof metaFileSchema>): RunOrigin {
  return {
    ...(metaFile.peer === undefined ? {} : { peer: metaFile.peer }),
    ...(metaFile.writer === undefined ? {} : { writer: metaFile.writer }),
    ...(metaFile.authenticated === undefined ? {} : { authenticated: metaFile.authenticated }),
    ...(metaFile.campaign === undefined ? {} : { campaign: metaFile.campaign }),
  }
}

/** Runs on record and their bytes on disk. */
export interface Usage {
  readonly runs: number
  readonly bytes: number
}

export interface StoreUsage {
  readonly total: Usage
  /** By peer key (quotas.ts peerKey: an IPv4 address, also when mapped into IPv6; an IPv6 /64). */
  readonly byPeer: ReadonlyMap<string, Usage>
  /** One peer key's usage (zero when it holds no run). */
  ofPeer(key: string): Usage
}

const noUsage: Usage = { runs: 0, bytes: 0 }

function bytesOf(run: RunState): number {
  return run.logBytes + run.metaBytes + (run.verdictBytes ?? 0)
}

/**
 * The runs on record, with runs and bytes in all and per peer key, kept as runs are added, removed
 * or recounted (after their bytes changed): quotas ask at every announcement, which must cost the
 * same with 20 runs or 100,000.
 */
class RunMap extends Map<string, RunState> {
  private readonly total = { runs: 0, bytes: 0 }
  private readonly byPeer = new Map<string, { runs: number; bytes: number }>()
  /** What each run was counted as (its peer key and bytes), to take back exactly that. */
  private readonly counted = new Map<RunState, { key: string; bytes: number }>()
  /** Runs per group id (hasGroup asks at every announcement). */
  readonly runsByGroup = new Map<string, number>()
  private readonly ofPeer = (key: string): Usage => {
    const peer = this.byPeer.get(key)
    return peer === undefined ? noUsage : { runs: peer.runs, bytes: peer.bytes }
  }

  /** The totals as they are now (byPeer is the live map: read it at once). */
  get usage(): StoreUsage {
    return { total: { runs: this.total.runs, bytes: this.total.bytes }, byPeer: this.byPeer, ofPeer: this.ofPeer }
  }

  override set(runId: string, run: RunState): this {
    const previous = this.get(runId)
    if (previous !== undefined) this.uncount(previous)
    this.count(run)
    return super.set(runId, run)
  }

  override delete(runId: string): boolean {
    const run = this.get(runId)
    if (run !== undefined) this.uncount(run)
    return super.delete(runId)
  }

  /** The run's bytes changed (a round, a verdict): counted again. */
  recount(run: RunState): void {
    if (!this.counted.has(run)) return
    this.uncount(run)
    this.count(run)
  }

  private count(run: RunState): void {
    const key = peerKey(run.origin.peer ?? 'unknown')
    const bytes = bytesOf(run)
    this.counted.set(run, { key, bytes })
    this.add(key, 1, bytes)
    this.runsByGroup.set(run.meta.groupId, (this.runsByGroup.get(run.meta.groupId) ?? 0) + 1)
  }

  private uncount(run: RunState): void {
    const counted = this.counted.get(run)
    if (counted === undefined) return
    this.counted.delete(run)
    this.add(counted.key, -1, -counted.bytes)
    const groupRuns = (this.runsByGroup.get(run.meta.groupId) ?? 0) - 1
    if (groupRuns <= 0) this.runsByGroup.delete(run.meta.groupId)
    else this.runsByGroup.set(run.meta.groupId, groupRuns)
  }

  private add(key: string, runs: number, bytes: number): void {
    this.total.runs += runs
    this.total.bytes += bytes
    const peer = this.byPeer.get(key) ?? { runs: 0, bytes: 0 }
    peer.runs += runs
    peer.bytes += bytes
    if (peer.runs === 0) this.byPeer.delete(key)
    else this.byPeer.set(key, peer)
  }
}

/** Reads of a live directory tried at most (readWhileLive): a fold every 5 s meets a read rarely twice in a row. */
const readAttemptsMax = 5

/** The journal's segments and their sizes, as one string (a change means a listener wrote to it). */
async function journalState(journalDir: string): Promise<string> {
  const parts: string[] = []
  for (const { path } of await listSegments(journalDir).catch(() => [])) parts.push(`${path}:${await fileSize(path).catch(() => -1)}`)
  return parts.join(',')
}

/** A segment cut back to its whole rounds, and made durable so. */
async function cutTornTail(path: string, validBytes: number): Promise<void> {
  const handle = await open(path, fsConstants.O_WRONLY | fsConstants.O_NONBLOCK)
  try {
    await handle.truncate(validBytes)
    await handle.sync()
  } finally {
    await handle.close()
  }
}

/** Directories of pruned runs, renamed out of the runs before their deletion (a crash may leave some). */
async function removePruned(runsDir: string): Promise<void> {
  for (const name of await readdir(runsDir))
    if (name.startsWith('.pruned-')) await rm(join(runsDir, name), { recursive: true, force: true })
}

/** What folding a segment's rounds writes, per run (fold.ts). */
function foldPlan(rounds: readonly JournalRound[]): FoldRun[] {
  const plan = new Map<string, FoldRun>()
  for (const round of rounds) {
    for (const { id, m } of round.a) plan.set(id, { runId: id, meta: m, at: logHeader(id).length, frames: [] })
    for (const { id, at, f } of round.c) {
      const run = plan.get(id)
      if (run === undefined) plan.set(id, { runId: id, at, frames: [f] })
      else run.frames.push(f)
    }
  }
  return [...plan.values()]
}

/** A run log's size (0 when missing: replay then says what is wrong). */
async function fileSize(path: string): Promise<number> {
  try {
    return (await statAsync(path)).size
  } catch (error) {
    if ((error as { code?: string }).code === 'ENOENT') return 0
    throw unreadable(path, error)
  }
}
const statAsync = promisify(statCallback)

/**
 * A log's inode, size, mtime and ctime (ns): any write to it changes them (ctime cannot be set back
 * but by the clock), so an unchanged stamp says its bytes are the ones read. Undefined when it cannot
 * be stat()ed (the read that follows says why). On a file system with coarse timestamps, a write of the
 * same size within one tick of the last one keeps the stamp: the background check and a restart still find it.
 */
async function logStamp(path: string): Promise<string | undefined> {
  try {
    const s = await stat(path, { bigint: true })
    return `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`
  } catch {
    return undefined
  }
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
    live: isSettling(run),
    ...(run.end === undefined ? {} : { end: run.end }),
    ackedThroughSeq: run.durableThroughSeq,
    steadyMs: run.steadyMs,
    verdict: run.verdict,
    campaign: run.origin.campaign ?? null,
  }
}

function addSpan(run: RunState, fromSeq: number, toSeq: number, firstMs: number, lastMs: number, maxSpans: number): void {
  addLoggedSpan(run, { fromSeq, toSeq, firstMs, lastMs }, maxSpans)
  run.lastAckedSeq = Math.max(run.lastAckedSeq, toSeq)
}

/**
 * The one way a run's spans are made, at replay (applyItem) and once a round is durable (writeRound):
 * from a logged ack item. An evicted run's summary takes it (its spans are read back for a query).
 */
function addLoggedSpan(run: RunState, item: { fromSeq: number; toSeq: number; firstMs: number; lastMs: number }, maxSpans: number): void {
  if (run.evicted === undefined) return run.spans.add(item.fromSeq, item.toSeq, item.firstMs, item.lastMs, maxSpans)
  const summary = run.evicted.summary
  if (summary === undefined) throw new Error(`run ${run.meta.runId} takes no more acks (taken from the catalog)`)
  summary.add(item.fromSeq, item.toSeq, item.firstMs, item.lastMs, maxSpans)
  run.evicted.spanCount = summary.length
  run.evicted.lastAckMs = summary.lastAckMs
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

/** A run's log may hold at most what the journal's commits of it end at (a fold cut short holds less). */
async function checkLogWithinJournal(
  logPath: string,
  journalEndByte: number,
  journal: JournalRead,
  journalMoved: () => Promise<boolean>,
): Promise<void> {
  const sizeBytes = await fileSize(logPath)
  if (sizeBytes <= journalEndByte || (await journalMoved())) return
  const path = journal.segments.at(-1)?.path ?? 'the journal'
  throw damagedSegment(
    path,
    0,
    `the journal's commits of run ${logPath.split('/').at(-2)} end at byte ${journalEndByte} of its log, but ${logPath} holds ${sizeBytes} bytes: the journal is older than the log (a segment from an earlier state of the directory)`,
  )
}
/** What the catalog holds of a run (its writer without the fingerprint, which meta.msgpack keeps). */
function catalogEntryOf(run: RunState): CatalogEntry {
  const writer = run.origin.writer
  const lastAckMs = run.evicted !== undefined ? run.evicted.lastAckMs : run.spans.lastAckMs
  // Spans as its log replays them (they are made from its logged items); unknown for a catalogued run never read back.
  const spanCount = run.evicted !== undefined ? run.evicted.spanCount : run.spans.length
  return {
    id: run.meta.runId,
    meta: run.meta,
    announcedMs: run.announcedMs,
    ...(run.announceIndex === undefined ? {} : { announceIndex: run.announceIndex }),
    ...(run.origin.peer === undefined ? {} : { peer: run.origin.peer }),
    ...(writer === undefined ? {} : { writer: { bootId: writer.bootId, fingerprint: null } }),
    ...(run.origin.authenticated === undefined ? {} : { authenticated: run.origin.authenticated }),
    ...(run.origin.campaign === undefined ? {} : { campaign: run.origin.campaign }),
    ...(run.end === undefined ? {} : { end: run.end }),
    steadyMs: run.steadyMs,
    lastAckedSeq: run.lastAckedSeq,
    ...(lastAckMs === undefined ? {} : { lastAckMs }),
    ...(spanCount === undefined ? {} : { spanCount }),
    commits: run.commits,
    logBytes: run.logBytes,
    metaBytes: run.metaBytes,
    verdict: run.verdict,
    ...(run.verdictBytes === undefined ? {} : { verdictBytes: run.verdictBytes }),
  }
}

/**
 * What a run's files are the authority for, and its catalog entry holds too: the scrub takes the run
 * from its files on any difference (a catalog holding another end reason, say, would change verify's
 * verdict where `verify --acks` and a restart without the catalog answer what the files hold).
 */
const fromFiles: ReadonlyArray<readonly [what: string, of: (run: RunState) => unknown]> = [
  ['commits', (r) => r.commits],
  ['log bytes', (r) => r.logBytes],
  ['acks', (r) => r.lastAckedSeq],
  ['end', (r) => r.end ?? null],
  ['steady', (r) => r.steadyMs],
  ['announcement order', (r) => r.announceIndex ?? null],
  ['peer', (r) => r.origin.peer ?? null],
  ['authenticated', (r) => r.origin.authenticated ?? null],
  ['campaign', (r) => r.origin.campaign ?? null],
  ["writer's boot id", (r) => r.origin.writer?.bootId ?? null],
]

/** The fields (fromFiles) where the catalogued run differs from its files, each with what the catalog and the files say. */
function catalogDifferences(run: RunState, copy: RunState): Array<{ what: string; text: string }> {
  const differences: Array<{ what: string; text: string }> = []
  for (const [what, of] of fromFiles) {
    const [recorded, held] = [JSON.stringify(of(run)), JSON.stringify(of(copy))]
    if (recorded !== held) differences.push({ what, text: `${what} (${recorded} in the catalog, ${held} in the files)` })
  }
  return differences
}

/** The fields of fromFiles that takeFromFiles's warning states in full. */
const countFields = new Set(['commits', 'log bytes', 'acks'])

/** What a run read from its files lacks of what the catalog recorded (undefined: it holds all of it, or more). */
function lessThanRecorded(
  run: Pick<RunState, 'commits' | 'logBytes' | 'lastAckedSeq' | 'end' | 'steadyMs'>,
  entry: CatalogEntry,
): string | undefined {
  if (
    run.logBytes >= entry.logBytes &&
    run.commits >= entry.commits &&
    run.lastAckedSeq >= entry.lastAckedSeq &&
    (run.end !== undefined || entry.end === undefined) &&
    (run.steadyMs !== null || entry.steadyMs === null)
  ) {
    return undefined
  }
  return (
    `its whole commits end at byte ${run.logBytes} (${run.commits} commits, acks through seq ${run.lastAckedSeq}${run.end === undefined ? ', no end' : ''}), ` +
    `but the listener recorded ${entry.commits} commits in ${entry.logBytes} bytes (acks through seq ${entry.lastAckedSeq}${entry.end === undefined ? '' : ', and its end'}) in its catalog: recorded acks are missing from the log`
  )
}

/** A run the catalog holds whose directory is gone from runs/. */
function runDirGone(dir: string, entry: CatalogEntry): Error {
  return runtimeError(
    `could not read ${dir}: the run's directory is gone, but the listener recorded ${entry.lastAckedSeq} acknowledged records of it (${entry.logBytes} bytes of log; its catalog, ${join(dir, '..', '..', catalogName)}, holds it)`,
    `a run left out could turn a FAIL into a PASS, so its queries are refused; restore the directory, or, if the run does not matter, stop the listener and delete ${join(dir, '..', '..', catalogName)} too (it is rebuilt from runs/ at the next start)`,
  )
}
