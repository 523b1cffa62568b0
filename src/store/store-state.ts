/**
 * The ack store's state (ack-store.ts describes the store): the runs on record, the journal's segment
 * and the segments not folded yet, the store's options and their defaults, and the events it emits.
 * Each layer of the store (store-*.ts) extends this class; the state a single layer keeps is declared
 * in that layer.
 */
import { EventEmitter } from 'node:events'
import { join } from 'node:path'
import { maxStoredSpans } from '../protocol/messages.js'
import type { Segment, UnfoldedSegment } from './journal-rounds.js'
import { RunMap } from './run-map.js'

/** A journal segment is folded into the run files once it holds this many bytes, or is this old. */
const defaultSegmentBytes = 16 * 1024 * 1024
const defaultFoldAgeMs = 5_000

export class StorageError extends Error {}

/** Spans kept read back from logs, in all: two runs of a week (a `write --method a,b` group), ~290 MB. */
const cachedSpansDefault = 2 * maxStoredSpans
/**
 * Runs kept read back, in all, whatever their spans: each entry is a copy of its run (metadata, writer,
 * span table), a few KB even for a run of one span, so 100,000 short runs would hold ~1 GB under the span budget alone.
 */
const cachedRunsDefault = 4096

export interface AckStoreOptions {
  /** Spans kept in memory per run (default and most: maxStoredSpans, what a reply may carry); lower for tests. */
  readonly maxSpans?: number
  /** A journal segment is folded at this size (default 16 MiB) or age (default 5 s); lower for tests. */
  readonly segmentBytes?: number
  readonly foldAgeMs?: number
  /** Spans read back for queries kept in memory at most (LRU across runs and connections; default maxStoredSpans). */
  readonly maxCachedSpans?: number
  /** Runs the read-back cache keeps at most (default cachedRunsDefault); lower for tests. */
  readonly maxCachedRuns?: number
  /** A live run's spans leave memory once it holds more than this many (default residentSpansDefault); lower for tests. */
  readonly maxResidentSpans?: number
}

/**
 * A run keeps at most this many spans in memory (~96 KiB), however long it runs: past it they leave
 * for its log (SpanSummary stays, 64 bytes) and are read back for a query. Resident spans in all:
 * runs holding their table x maxResidentSpans, plus the read-back cache (maxCachedSpans).
 */
const residentSpansDefault = 4096

/** A query reads a run's log back in chunks of this size, yielding to the event loop in between. */
export const queryChunkBytes = 64 * 1024

export interface AckStoreEvents {
  /** An ack was accepted (in memory; durable at the next 'recorded'). For instrumentation. */
  accepted: [runId: string, fromSeq: number, toSeq: number]
  recorded: [runId: string, throughSeq: number]
  failed: [runId: string, error: Error]
  /** Something found after start (the scrub's damage, a catalog that could not be written): said to the user. */
  warning: [message: string]
}

/** The state every layer of the store shares, its options checked. */
export abstract class StoreState extends EventEmitter<AckStoreEvents> {
  protected readonly runs = new RunMap()
  /** The highest announceIndex on record; the next announcement gets one more. */
  protected lastAnnounceIndex = 0
  protected segment: Segment | undefined
  protected readonly maxSegmentBytes: number
  protected readonly foldAgeMs: number
  protected readonly maxCachedSpans: number
  protected readonly maxCachedRuns: number
  protected readonly maxResidentSpans: number
  /** Segments rotated out and not folded yet (a failed fold's stays): a run's commits there are read back from them. */
  protected readonly unfolded: UnfoldedSegment[] = []
  readonly warnings: string[] = []

  /** Spans kept per run; beyond it neighbours are merged (see coarsen). */
  readonly maxSpans: number

  protected constructor(
    readonly dir: string,
    options: AckStoreOptions = {},
  ) {
    super()
    this.maxSpans = options.maxSpans ?? maxStoredSpans
    this.maxSegmentBytes = options.segmentBytes ?? defaultSegmentBytes
    this.foldAgeMs = options.foldAgeMs ?? defaultFoldAgeMs
    this.maxCachedSpans = options.maxCachedSpans ?? cachedSpansDefault
    this.maxCachedRuns = options.maxCachedRuns ?? cachedRunsDefault
    this.maxResidentSpans = options.maxResidentSpans ?? residentSpansDefault
    if (!Number.isInteger(this.maxSpans) || this.maxSpans < 2 || this.maxSpans > maxStoredSpans)
      throw new RangeError(`maxSpans must be 2..${maxStoredSpans}`)
    if (!Number.isInteger(this.maxResidentSpans) || this.maxResidentSpans < 1)
      throw new RangeError('maxResidentSpans must be a positive integer')
    if (!Number.isInteger(this.maxCachedRuns) || this.maxCachedRuns < 1) throw new RangeError('maxCachedRuns must be a positive integer')
  }

  protected runDir(runId: string): string {
    return join(this.dir, 'runs', runId)
  }

  protected warn(message: string): void {
    this.warnings.push(message)
    this.emit('warning', message)
  }
}
