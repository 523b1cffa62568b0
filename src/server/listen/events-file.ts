/**
 * The listener's --events FILE: every listener event as one JSON line, written off the thread that
 * answers hellos and acks, bounded, rotated, and never the listener's end (EventsFile says how).
 */
import { constants } from 'node:fs'
import { open, rename, type FileHandle } from 'node:fs/promises'
import { describeSystemError } from '../../base/errors.js'
import type { Io } from '../../base/io.js'
import type { ListenerEvent } from './events.js'

/** The events file is rotated past this size: events -> events.1 -> events.2 (the oldest dropped). */
export const eventsFileMaxBytes = 64 * 1024 * 1024
/** Rotated files kept besides the current one. */
export const eventsFilesKept = 2
/** Lines waiting for a slow or frozen disk; beyond this they are dropped and counted. */
export const eventsQueueMaxBytes = 4 * 1024 * 1024

/**
 * Appends each event to path as one JSON line. Asynchronous: lines wait in a bounded queue and one
 * writer appends them in order, so a frozen or slow disk never blocks the thread that answers
 * hellos and acks; when the queue is full lines are dropped, and the next line written is a warning
 * counting them. Each batch is one write() in append mode of whole lines, and a write cut short (a
 * full disk) is truncated back off, its lines dropped and counted, so a reader never sees a torn
 * line. The file is opened non-blocking: a FIFO nobody reads is a failure, never a hang. Past
 * maxBytes the file is rotated (path.1, path.2; the oldest dropped). A failure is reported once
 * (until a write succeeds again) and never stops the listener.
 */
export class EventsFile {
  private file: FileHandle | undefined
  private sizeBytes = 0
  private queue: Buffer[] = []
  private queuedBytes = 0
  private dropped = 0
  private writing: Promise<void> | undefined
  private failing = false
  private regular = true
  /** A line was left in part (it could not be cut back): the next write starts with a newline. */
  private newlineFirst = false
  constructor(
    private readonly path: string,
    private readonly io: Io,
    private readonly maxBytes = eventsFileMaxBytes,
    private readonly queueMaxBytes = eventsQueueMaxBytes,
  ) {}

  append(event: ListenerEvent): void {
    const line = Buffer.from(`${JSON.stringify(event)}\n`)
    if (this.queuedBytes + line.length > this.queueMaxBytes) {
      this.dropped++
      return
    }
    this.queue.push(line)
    this.queuedBytes += line.length
    this.writing ??= this.writeAll().finally(() => (this.writing = undefined))
  }

  /** Lines dropped since the last one written (for tests). */
  droppedCount(): number {
    return this.dropped
  }

  private async writeAll(): Promise<void> {
    while (this.queue.length > 0) {
      const lines = this.queue
      this.queue = []
      this.queuedBytes = 0
      if (this.dropped > 0) {
        const warning: ListenerEvent = {
          kind: 'warning',
          message: `${this.dropped} events were not written to ${this.path}: its disk did not keep up, was full or failed`,
          atMs: Date.now(),
        }
        lines.unshift(Buffer.from(`${JSON.stringify(warning)}\n`))
        this.dropped = 0
      }
      // Whole lines up to the room left in the file per write: rotation happens between lines.
      while (lines.length > 0) {
        const room = Math.max(this.maxBytes - this.sizeBytes, 0)
        let count = 1
        let bytes = lines[0]!.length
        while (count < lines.length && bytes + lines[count]!.length <= room) bytes += lines[count++]!.length
        const batch = lines.splice(0, count)
        if (this.newlineFirst) batch.unshift(Buffer.from('\n'))
        this.newlineFirst = false
        await this.write(Buffer.concat(batch), count)
      }
    }
  }

  /** Writes whole lines or none: a short write is cut back off (a disk that fills mid-line), its lines counted as dropped. */
  private async write(bytes: Buffer, lines: number): Promise<void> {
    try {
      let file = await this.openFile()
      if (this.regular && this.sizeBytes > 0 && this.sizeBytes + bytes.length > this.maxBytes) {
        await this.rotate()
        file = await this.openFile()
      }
      const before = this.sizeBytes
      const { bytesWritten } = await file.write(bytes)
      if (bytesWritten !== bytes.length) {
        await this.cutBack(file, before, bytesWritten)
        throw Object.assign(new Error(`short write: ${bytesWritten} of ${bytes.length} bytes (disk full?)`), { code: 'ENOSPC' })
      }
      this.sizeBytes += bytesWritten
      this.failing = false
    } catch (error) {
      this.dropped += lines
      if (!this.failing)
        this.io.err(
          `plugcheck: warning: could not append to the events file ${this.path}: ${describeSystemError(error)}; the listener goes on (events still go to stderr)\n`,
        )
      this.failing = true
      // Opened afresh next time: the file may have been moved, or its file system remounted.
      await this.closeFile()
    }
  }

  /**
   * Takes a line cut in part back off the file (truncated to its size before the write), so the next
   * line is not glued onto half of one; when that fails too, the next write starts on a new line.
   */
  private async cutBack(file: FileHandle, sizeBytes: number, written: number): Promise<void> {
    if (written === 0) return
    try {
      if (!this.regular) throw new Error('not a regular file')
      await file.truncate(sizeBytes)
    } catch {
      this.newlineFirst = true
    }
  }

  private async openFile(): Promise<FileHandle> {
    if (this.file !== undefined) return this.file
    // O_NONBLOCK: a FIFO nobody reads must fail now, not hold a threadpool thread (and the process) for ever.
    const file = await open(this.path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NONBLOCK, 0o644)
    this.file = file
    const stat = await file.stat()
    this.regular = stat.isFile()
    this.sizeBytes = stat.size
    return file
  }

  /** path.1 -> path.2, path -> path.1, then a new path; the oldest is replaced. */
  private async rotate(): Promise<void> {
    await this.closeFile()
    for (let n = eventsFilesKept; n >= 1; n--) {
      const from = n === 1 ? this.path : `${this.path}.${n - 1}`
      await rename(from, `${this.path}.${n}`).catch((error: NodeJS.ErrnoException) => {
        if (error.code !== 'ENOENT') throw error
      })
    }
  }

  private async closeFile(): Promise<void> {
    const file = this.file
    this.file = undefined
    this.sizeBytes = 0
    await file?.close().catch(() => undefined) // every line was written by then
  }

  /** Writes what is queued (waiting at most waitMs for a frozen disk), then closes. */
  async close(waitMs = 2000): Promise<void> {
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, waitMs)))
    await Promise.race([
      (async () => {
        while (this.writing !== undefined) await this.writing
      })(),
      timeout,
    ])
    clearTimeout(timer)
    await this.closeFile()
  }
}
