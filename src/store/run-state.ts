/**
 * A run as the ack store holds it in memory (RunState), and the rules that change it as a replay does:
 * a logged item applied if it can follow what came before (else what makes it impossible: damage),
 * spans made from logged items only, and what a query answers of it.
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
 *
 * Order: runs are ordered by announceIndex (one more than the highest on record, at announcement),
 * never by the listener's clock, which may step back; meta files without it (older listeners) come
 * before every run that has one, ordered by announcement time.
 */
import type { RunMeta } from '../record/format.js'
import {
  type endReasons,
  maxPlausibleSeq,
  type CampaignTag,
  type RunSummary,
  type StoredRun,
  type StoredVerdict,
  type WriterEnv,
} from '../protocol/messages.js'
import { parseCommitFrame, type LogItem } from './ack-log.js'
import { type SpanSummary, SpanTable } from './span-table.js'

/** A run's acks may be stamped up to this long before its announcement (clock steps). */
const clockSkewMs = 60_000

export type EndReason = (typeof endReasons)[number] | 'vanished'

/** Who announced a run: the peer address the listener saw and the writer's environment. */
export interface RunOrigin {
  readonly peer?: string
  readonly writer?: WriterEnv
  /** The listener required a token and the writer presented it: a stranger cannot have announced the run. */
  readonly authenticated?: boolean
  /** The campaign cycle the writer tagged the run with. */
  readonly campaign?: CampaignTag
}

export interface RunState {
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
   * Set when the run's spans left memory (read at start, retired and folded, or past maxResidentSpans
   * while live): queryAsync reads them back from its log and the journal. summary goes on taking the
   * spans of a live run (absent for runs taken from the catalog, which take no more).
   */
  evicted?: { spanCount: number | undefined; lastAckMs: number | undefined; readonly summary?: SpanSummary } | undefined
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
  logSeen?: string | undefined
  /** Its end as logged: set once the round holding it is durable (what a replay gives), never before. */
  end?: { reason: EndReason; detail?: string | undefined; atMs: number } | undefined
  /**
   * An end accepted (endRun, release) whose round is not durable yet: the run takes nothing more, but
   * queries answer it as live until its end is recorded (then with every ack before it).
   */
  endQueued?: { reason: EndReason; detail?: string | undefined; atMs: number } | undefined
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
  verdictBytes?: number | undefined
  /** Its announcement waits for a journal round (createRun's promise settles with that round). */
  announce?: { readonly metaBytes: Buffer; readonly resolve: () => void; readonly reject: (error: Error) => void }
}

/**
 * Which of two runs was announced first (negative: a before b). announceIndex when both have one; a
 * run without one was stored by an older listener, before any run that has one; between two such
 * runs, their announcement times.
 */
export function announceOrder(a: RunState, b: RunState): number {
  if (a.announceIndex !== undefined && b.announceIndex !== undefined) return a.announceIndex - b.announceIndex
  if (a.announceIndex !== undefined) return 1
  if (b.announceIndex !== undefined) return -1
  return a.announcedMs - b.announcedMs || a.meta.runId.localeCompare(b.meta.runId)
}

export function isWritable(run: RunState): boolean {
  return run.failed === undefined && !endAccepted(run) && !run.retired
}

/** The writer's view: an end was accepted (recorded or not yet). */
export function endAccepted(run: RunState): boolean {
  return run.end !== undefined || run.endQueued !== undefined
}

/** An end accepted whose round is not durable yet (and will be: the run has not failed). */
export function isSettling(run: RunState): boolean {
  return run.end === undefined && run.endQueued !== undefined && run.failed === undefined
}

/** What a run's log says of it (its acks, commits, bytes, steady moment and end), set on the run as recorded and durable. */
export function setLogged(run: RunState, logged: Pick<RunState, 'lastAckedSeq' | 'commits' | 'logBytes' | 'steadyMs' | 'end'>): void {
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
export function recordSteadyMs(run: RunState, atMs: number): void {
  run.steadyMs = atMs
  delete run.steadyQueuedMs
}

/** The run's end, logged in a round now durable: answered from now on, as a replay gives it. */
export function recordEnd(run: RunState, item: Extract<LogItem, { k: 'end' }>): void {
  run.end = { reason: item.reason, ...(item.detail === undefined ? {} : { detail: item.detail }), atMs: item.atMs }
  delete run.endQueued
}

/** Applies one replayed log item if it can follow what came before; else what makes it impossible (damage). */
export function applyItem(run: RunState, item: LogItem, maxSpans: number): string | undefined {
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
export function applyCommitFrame(copy: RunState, frame: Buffer, maxSpans: number): string | undefined {
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

/**
 * The spans of every run restored from the catalog or evicted: none (read back into a table of their
 * own for a query). One shared table, not 100,000 (~0.4 s and ~40 MB at start): nothing adds to it (an
 * evicted run's next spans go to its summary), and frozen, so an add would throw rather than reach every run.
 */
export const noSpans = new SpanTable()
Object.freeze(noSpans)

export function newRunState(
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

export function summaryOf(run: RunState): RunSummary {
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
export function addLoggedSpan(
  run: RunState,
  item: { fromSeq: number; toSeq: number; firstMs: number; lastMs: number },
  maxSpans: number,
): void {
  if (run.evicted === undefined) {
    run.spans.add(item.fromSeq, item.toSeq, item.firstMs, item.lastMs, maxSpans)
    return
  }
  const summary = run.evicted.summary
  if (summary === undefined) throw new Error(`run ${run.meta.runId} takes no more acks (taken from the catalog)`)
  summary.add(item.fromSeq, item.toSeq, item.firstMs, item.lastMs, maxSpans)
  run.evicted.spanCount = summary.length
  run.evicted.lastAckMs = summary.lastAckMs
}

/**
 * The run as a runs reply carries it: its spans when there are at most maxInlineSpans of them, else
 * none, and ackedThroughSeq says how far they go (a verifier reads them page by page: spanPage).
 */
export function storedRun(run: RunState, maxInlineSpans = Number.POSITIVE_INFINITY): StoredRun {
  return {
    meta: run.meta,
    announcedMs: run.announcedMs,
    ...(run.origin.peer === undefined ? {} : { peer: run.origin.peer }),
    ...(run.origin.writer === undefined ? {} : { writer: run.origin.writer }),
    ...(run.origin.authenticated === undefined ? {} : { authenticated: run.origin.authenticated }),
    ...(run.end === undefined ? {} : { end: run.end }),
    spans: run.spans.length <= maxInlineSpans ? run.spans.toArray() : [],
    ackedThroughSeq: run.spans.throughSeq,
    ...(run.spans.lastAckMs === undefined ? {} : { lastAckMs: run.spans.lastAckMs }),
    verified: run.verdict !== null,
  }
}
