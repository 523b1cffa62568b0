/**
 * The lab's and bench's side file (--trace-file): one fixed-size entry per completed sync, outside the
 * cut, so ack coverage can be measured against what the syncs completed.
 */
import { openSync, writeSync, closeSync } from 'node:fs'
import type { RunKey } from '../../record/records.js'

/** Trace entries: run id (8 bytes), seq (f64), sync-return time from process.hrtime in ns (f64). */
export const traceEntryBytes = 24

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
