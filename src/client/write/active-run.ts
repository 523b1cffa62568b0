/** A run while it is being written: what the write loop, the watch over its file and the summary read. */
import type { DataFile } from '../../native/index.js'
import type { LatencyHistogram } from '../../base/latency.js'
import type { WatchedRun } from './file-watch.js'

/** A run being written; the fields the watch over its file reads are WatchedRun's (file-watch.ts). */
export interface ActiveRun extends WatchedRun {
  readonly buffer: Buffer
  readonly file: DataFile
  endBytes: number
  /** Highest seq whose sync returned. */
  syncedSeq: number
  lastSeq: number
  readonly latency: LatencyHistogram
}
