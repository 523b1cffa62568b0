/**
 * One record file of a files run, read and classified (judge-files.ts decides which files to judge
 * and what their absence means): rec-s must hold exactly record s, the bytes of seq s in an append run
 * of the same window (record/files-layout.ts). A file is lstat'ed, opened with O_NOFOLLOW | O_NONBLOCK,
 * fstat'ed (the inode listed, a regular file) and read for one record's bytes at most, once: a dying
 * disk costs one failed read per file. Unreadable (EIO, EBADMSG, ...) is a finding; any other failure
 * is an operating error (exit 3). The findings (failed seqs' reason codes, the detail lists, bounded
 * by maxDetailList) are kept here for the judging to settle.
 */
import { closeSync, constants, fstatSync, lstatSync, openSync, readSync, type Stats } from 'node:fs'
import { Classifier, runLayout, type SlotVerdict } from '../../record/classify.js'
import type { RunMeta } from '../../record/format.js'
import { recordFileName } from '../../record/files-layout.js'
import { runKey } from '../../record/records.js'
import { describeSystemError, runtimeError } from '../../base/errors.js'
import { isUnreadable } from './read-ahead.js'
import { maxDetailList, type RecordFinding } from './run-report.js'
import { fileKind } from './data-file-read.js'
import { corruptCode, FailedSeqs, tornCode } from './failed-seqs.js'

export const intactCode = 253

/** The classes of loss a reason code stands for (failed-seqs.ts codes 0..249). */
export type LossClass = 'missing' | 'rename' | 'zero' | 'short' | 'not-a-file' | 'unreadable' | 'lost' | 'back'

/** What one present record file was found to be: a code (intact, torn, corrupt or a loss reason's). */
export type FileOutcome = {
  readonly code: number
  readonly finding?: RecordFinding
  readonly kind?: 'torn' | 'corrupt' | 'unreadable' | 'short'
}

/** The record file went away between the listing and its reading: judged absent. */
class Vanished extends Error {}
/** The name holds no regular file (message: what it holds). */
class NotAFile extends Error {}

/** The record files of one files run: each read and classified, and the findings they leave. */
export class RecordFiles {
  readonly failed = new FailedSeqs(true)
  readonly classes = new Map<number, LossClass>()
  readonly torn: RecordFinding[] = []
  readonly corrupt: RecordFinding[] = []
  readonly unreadable: RecordFinding[] = []
  readonly records: RecordFinding[] = []
  private readonly classifier: Classifier
  private readonly bytes: Buffer

  constructor(
    readonly meta: RunMeta,
    nowMs: number,
    runMs: number,
  ) {
    // A record's bytes are those of the same seq in an append run of the same window (files-layout.ts).
    const layout = runLayout({ pattern: 'append', slotCount: meta.slotCount, createdMs: meta.createdMs }, nowMs, runMs)
    this.classifier = new Classifier(runKey(meta.runId), meta.recordSizeBytes, layout)
    this.bytes = Buffer.alloc(meta.recordSizeBytes)
  }

  /** The failure code of a reason, remembered as its class of loss. */
  code(reason: string, lossClass: LossClass): number {
    const code = this.failed.reasonCode(reason)
    if (!this.classes.has(code)) this.classes.set(code, lossClass)
    return code
  }

  slotOf(seq: number): number {
    return (seq - 1) % this.meta.slotCount
  }

  noteRecord(finding: RecordFinding): void {
    if (this.records.length < maxDetailList) this.records.push(finding)
  }

  /** Whether the regular file at path (listed as stats) holds exactly record seq of this run; false for anything else, an unreadable file included. */
  holdsOwnRecord(path: string, stats: Stats, seq: number): boolean {
    try {
      if (this.readRecord(path, stats) !== this.meta.recordSizeBytes) return false
    } catch (error) {
      if (error instanceof Vanished || error instanceof NotAFile || isUnreadable(error)) return false
      throw error
    }
    const verdict = this.classifier.classify(this.bytes, this.slotOf(seq), seq)
    return verdict.kind === 'intact' && verdict.foundSeq === seq
  }

  /** What rec-seq (acknowledged, not deleted) holds; null when it vanished between the listing and now (absent). */
  judge(path: string, seq: number): FileOutcome | null {
    const name = recordFileName(seq)
    const recordSize = this.meta.recordSizeBytes
    const slot = this.slotOf(seq)
    const finding = (detail: string, lengthBytes = recordSize): RecordFinding => ({ seq, slot, offsetBytes: 0, lengthBytes, detail })
    let stats: Stats
    try {
      stats = lstatSync(path)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null
      return this.unreadableFile(seq, slot, error)
    }
    if (!stats.isFile()) return { code: this.code(`its name holds ${fileKind(stats)}, not a file`, 'not-a-file') }
    if (stats.size === 0) {
      this.noteRecord(finding(`${name} is empty: the name survived, the data did not`, 0))
      return { code: this.code('zero-length file: the name survived, the data did not', 'zero') }
    }
    let got: number
    try {
      got = this.readRecord(path, stats)
    } catch (error) {
      if (error instanceof Vanished) return null
      if (error instanceof NotAFile) return { code: this.code(`its name holds ${error.message}, not a file`, 'not-a-file') }
      return this.unreadableFile(seq, slot, error)
    }
    if (got < recordSize) {
      this.noteRecord(finding(`${name} holds ${got} of the record's ${recordSize} bytes`, got))
      return { code: this.code('short file: the name survived with part of the data', 'short') }
    }
    return this.classified(this.classifier.classify(this.bytes, slot, seq), seq, finding, stats.size)
  }

  /** Reads up to one record of the file at path into this.bytes (never more); throws Vanished, NotAFile or the read's error. */
  private readRecord(path: string, listed: Stats): number {
    let fd: number
    try {
      fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      if (code === 'ENOENT') throw new Vanished()
      if (code === 'ELOOP') throw new NotAFile('a symbolic link')
      if (isUnreadable(error)) throw error
      throw runtimeError(`could not open ${path}: ${describeSystemError(error)}`)
    }
    try {
      const stats = fstatSync(fd)
      if (!stats.isFile()) throw new NotAFile(fileKind(stats))
      if (stats.ino !== listed.ino) throw new Vanished()
      const wanted = this.bytes.length
      let done = 0
      while (done < wanted) {
        const n = readSync(fd, this.bytes, done, wanted - done, done)
        if (n === 0) break
        done += n
      }
      return done
    } catch (error) {
      if (error instanceof Vanished || error instanceof NotAFile || isUnreadable(error)) throw error
      throw runtimeError(`could not read ${path}: ${describeSystemError(error)}`)
    } finally {
      closeSync(fd)
    }
  }

  private unreadableFile(seq: number, slot: number, error: unknown): FileOutcome {
    if (!isUnreadable(error)) throw runtimeError(`could not read ${recordFileName(seq)}: ${describeSystemError(error)}`)
    const why = `the storage could not read it back: ${describeSystemError(error)}`
    if (this.unreadable.length < maxDetailList)
      this.unreadable.push({ seq, slot, offsetBytes: 0, lengthBytes: this.meta.recordSizeBytes, detail: why })
    return { code: this.code(why, 'unreadable') }
  }

  /** A file of a whole record's length or more, by the slot's class, held to exactly its own record. */
  private classified(
    verdict: SlotVerdict,
    seq: number,
    finding: (detail: string, lengthBytes?: number) => RecordFinding,
    size: number,
  ): FileOutcome {
    const recordSize = this.meta.recordSizeBytes
    const corrupt = (detail: string, lengthBytes = recordSize): FileOutcome => {
      if (this.corrupt.length < maxDetailList) this.corrupt.push(finding(detail, lengthBytes))
      return { code: corruptCode }
    }
    if (verdict.foundSeq !== undefined && verdict.foundSeq !== seq)
      return corrupt(`${recordFileName(seq)} holds record ${verdict.foundSeq}, not record ${seq}: another record's contents under its name`)
    switch (verdict.kind) {
      case 'intact':
        if (size > recordSize)
          return corrupt(`${recordFileName(seq)} holds ${size} bytes: its record and ${size - recordSize} more no write made`, size)
        return { code: intactCode }
      case 'interrupted':
        return corrupt(`${recordFileName(seq)} holds sectors of other records: ${verdict.detail}`)
      case 'torn':
        if (this.torn.length < maxDetailList) this.torn.push(finding(`${recordFileName(seq)}: ${verdict.detail}`))
        return { code: tornCode }
      case 'corrupt':
        return corrupt(`${recordFileName(seq)}: ${verdict.detail}`)
      case 'lost':
        return { code: this.code(verdict.detail.startsWith('older data') ? 'older data: the write vanished' : verdict.detail, 'lost') }
    }
  }
}
