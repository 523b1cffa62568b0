/** A run while it is being written: what the write loop, the watch over its file and the summary read. */
import type { DataFile } from '../../native/index.js'
import type { LatencyHistogram } from '../../base/latency.js'
import type { WatchedRun } from './file-watch.js'
import type { FilesRun } from './files-run.js'

/** A run being written; the fields the watch over its file reads are WatchedRun's (file-watch.ts). */
export interface ActiveRun extends WatchedRun {
  readonly buffer: Buffer
  /** The data file (append, overwrite); null in a files run, whose records are files in `records`. */
  readonly file: DataFile | null
  /** A files run's directory and how its record files are made (files-run.ts); null otherwise. */
  readonly records: FilesRun | null
  endBytes: number
  /** Highest seq whose sync returned. */
  syncedSeq: number
  lastSeq: number
  readonly latency: LatencyHistogram
}
