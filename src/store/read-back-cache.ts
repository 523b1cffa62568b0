/**
 * The read-back cache (store-read-back.ts reads the runs' spans back): runs' spans kept as read back,
 * least recently used first, within a budget of spans (maxCachedSpans, read-backs under way counted)
 * and of runs (maxCachedRuns), and the turns of read-backs under way (readBacksAtOnce).
 */
import type { WriterEnv } from '../protocol/messages.js'
import type { MinHeap } from './min-heap.js'
import { type RunState, announceOrder } from './run-state.js'

/** A run's spans read back for queries: the run replayed from its log and the journal through copy.appliedBytes (none when only its writer was read), and its writer from meta.msgpack. */
export interface ReadBack {
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

/** The read-back cache of one store, and its turns. */
export class ReadBackCache {
  /** Spans and writers of evicted runs read back for queries, least recently used first. */
  readonly readBack = new Map<string, ReadBack>()
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
  startCache: MinHeap<RunState> | undefined
  /** Read-backs under way (at most readBacksAtOnce), the queries waiting for one in order, and the spans they may bring. */
  private readBacksRunning = 0
  private readonly readBackQueue: Array<() => void> = []
  readingSpans = 0

  constructor(
    /** The store's runs: an entry read for a run no longer on record is not kept. */
    private readonly runs: ReadonlyMap<string, RunState>,
    private readonly maxCachedSpans: number,
    private readonly maxCachedRuns: number,
  ) {}

  /**
   * At start, runs come in directory order: a run's spans go in the cache if they fit once older runs
   * cached are dropped (oldest first), never dropping a newer one for it. So the cache ends holding
   * the newest runs that fit, as if filled newest first, while only it and the run replayed are held.
   */
  cacheAtStart(run: RunState, entry: ReadBack): void {
    const cached = this.startCache!
    const spans = entry.copy?.spans.length ?? 0
    const older: RunState[] = []
    let freed = 0
    const full = (): boolean =>
      this.readBackSpans - freed + spans > this.maxCachedSpans || this.readBack.size - older.length >= this.maxCachedRuns
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
  endStartCache(): void {
    const cached = this.startCache
    this.startCache = undefined
    for (let run = cached?.pop(); run !== undefined; run = cached?.pop()) {
      const entry = this.readBack.get(run.meta.runId)
      if (entry === undefined) continue
      this.readBack.delete(run.meta.runId)
      this.readBack.set(run.meta.runId, entry)
    }
  }

  async readBackSlot(): Promise<void> {
    if (this.readBacksRunning < readBacksAtOnce) {
      this.readBacksRunning++
      return
    }
    await new Promise<void>((resolve) => this.readBackQueue.push(resolve))
  }

  /** The slot goes to the first query waiting (none can take it before it), else is free. */
  releaseReadBackSlot(): void {
    const next = this.readBackQueue.shift()
    if (next === undefined) this.readBacksRunning--
    else next()
  }

  /**
   * A run's spans read back (or just replayed) kept as the most recently used, the least recently used
   * dropped past maxCachedSpans (read-backs under way counted in it). One run larger than the cache
   * stays alone while no other read-back is under way (its pages need no read each).
   */
  cacheSpans(runId: string, entry: ReadBack, onlyIfRoom = false): void {
    // Read for a run no longer on record (pruned while it was read, its id maybe announced again): not kept.
    if (this.runs.get(runId) !== entry.of) return
    const spans = entry.copy?.spans.length ?? 0
    if (
      onlyIfRoom &&
      (this.readBackSpans + this.readingSpans + spans > this.maxCachedSpans ||
        (this.readBack.size >= this.maxCachedRuns && !this.readBack.has(runId)))
    )
      return
    this.uncache(runId)
    // Larger than what the read-backs under way leave: not kept (only the query that asked holds it).
    if (this.readingSpans > 0 && this.readingSpans + spans > this.maxCachedSpans) return
    this.readBack.set(runId, entry)
    this.readBackCounted.set(runId, spans)
    this.readBackSpans += spans
    this.trimCache(runId)
  }

  /** Least recently used entries dropped until the cache and the read-backs under way fit maxCachedSpans, and the cache maxCachedRuns (keep stays). */
  trimCache(keep: string | undefined): void {
    for (const id of this.readBack.keys()) {
      if ((this.readBackSpans + this.readingSpans <= this.maxCachedSpans && this.readBack.size <= this.maxCachedRuns) || id === keep) break
      this.uncache(id)
    }
  }

  /** The run's entry in the read-back cache: none when the entry was read for another run of the same id. */
  cachedFor(run: RunState): ReadBack | undefined {
    const entry = this.readBack.get(run.meta.runId)
    return entry?.of === run ? entry : undefined
  }

  /** A run's spans out of the read-back cache, taken back from its count as they were counted. */
  uncache(runId: string): void {
    this.readBackSpans -= this.readBackCounted.get(runId) ?? 0
    this.readBackCounted.delete(runId)
    this.readBack.delete(runId)
  }
}
