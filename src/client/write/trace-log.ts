/**
 * The lab's and bench's side file (--trace-file): one fixed-size entry per completed sync, outside the
 * cut, so ack coverage can be measured against what the syncs completed. With `--jobs N` each job
 * writes its own, PATH.jobK (K = 1..N, as its data files): one file written by N threads at offsets
 * each counted from 0 would keep only the entries of whichever wrote last.
 */
import { openSync, writeSync, closeSync } from 'node:fs'
import type { RunKey } from '../../record/records.js'

/** Trace entries: run id (8 bytes), seq (f64), sync-return time from process.hrtime in ns (f64). */
export const traceEntryBytes = 24

/** The trace file of a job (`index` 0-based, as jobs.ts numbers them); PATH itself for a plain write. */
export function jobTracePath(path: string, job: { readonly index: number; readonly count: number } | undefined): string {
  return job === undefined || job.count <= 1 ? path : `${path}.job${job.index + 1}`
}

/** Lab/bench side file: one fixed-size entry per completed sync, written in place so it survives SIGKILL. */
export class TraceLog {
  private readonly fd: number
  private readonly entry = Buffer.alloc(traceEntryBytes)
  private offset = 0

  constructor(path: string) {
    this.fd = openSync(path, 'w')
  }

  completed(key: RunKey, seq: number): void {
    key.idBytes.copy(this.entry, 0)
    this.entry.writeDoubleLE(seq, 8)
    this.entry.writeDoubleLE(Number(process.hrtime.bigint()), 16)
    writeSync(this.fd, this.entry, 0, traceEntryBytes, this.offset)
    this.offset += traceEntryBytes
  }

  close(): void {
    closeSync(this.fd)
  }
}
