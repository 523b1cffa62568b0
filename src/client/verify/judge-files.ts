/**
 * Judging a files run (`--pattern files`): the listener's acks against the record files in the run's
 * directory (record/files-layout.ts: rec-<seq>, .rec-<seq>.tmp, superblock). Acks are contiguous 1..A
 * and the run keeps K = slotCount record files, so every acknowledged seq s promises:
 *
 *   s + K <= A (its deletion was acknowledged)   rec-s is absent; present: a deleted record came back (lost: the unlink was not durable)
 *   s + K <= E + 1, unless the writer ended the run itself (E >= A: the highest seq whose file holds exactly its own record;
 *     deleted by a step the listener never heard of, or by step E + 1 in part)   absent is fine (superseded); present: judged as below
 *   otherwise                                    rec-s holds exactly record s (slot (s - 1) % K, as in append):
 *     absent, .rec-s.tmp present                 lost: rename lost (the record exists only under its temporary name)
 *     absent                                     lost: the file is missing
 *     not a regular file                         lost: its name holds a directory, a symbolic link, a FIFO, ...
 *     empty                                      lost: zero-length file (the name survived, the data did not)
 *     shorter than a record                      lost: short file
 *     unreadable (EIO, EBADMSG, ...)             lost and unreadable, as a data file's record
 *     one whole record of another seq            corrupt: another record's contents under its name
 *     longer than a record                       corrupt: more than its record
 *     anything else                              as a data file's slot (classify.ts): intact, lost, torn or corrupt
 *
 * Record and temporary files of seqs above A were never acknowledged: fine, counted. Names no files
 * run makes (rec-01, a subdirectory, a foreign file) are noted, never a failure. Every failure is in
 * `lost`, `torn` or `corrupt`, so the verdict rules, the stored verdict and the report are those of
 * data records; the deletions found kept are `superseded`.
 *
 * Fault model: the listener may claim up to maxJudgedSeq acks, the directory may hold anything. So
 * nothing loops per acknowledged seq: only the directory's listing is walked, bounded by
 * maxFilesRunEntries (past it: exit 3), and the absent seqs are counted as the gaps between the
 * present ones (packed in Float64Arrays, sorted once). Nothing is followed: entries are lstat'ed and
 * opened with O_NOFOLLOW | O_NONBLOCK, and only regular files are read (one record's bytes at most).
 * Each file is read once, so a dying disk costs one failed read per record file, bounded as the
 * listing is (a data file's failing stretch is read again record by record: unreadable-slots.ts).
 */
import { closeSync, constants, fstatSync, lstatSync, openSync, opendirSync, readSync, type Dir, type Stats } from 'node:fs'
import { join } from 'node:path'
import type { StoredRun } from '../../protocol/messages.js'
import { timelineOfSpans } from './ack-timeline.js'
import { Classifier, runLayout, type SlotVerdict } from '../../record/classify.js'
import { maxOverwriteSlots, type RunMeta } from '../../record/format.js'
import { recordFileName, seqOfRecordFile, seqOfTempFile, superblockFileName, tempFileName } from '../../record/files-layout.js'
import { runKey } from '../../record/records.js'
import { describeSystemError, runtimeError } from '../../base/errors.js'
import { oneLine } from '../../base/printable.js'
import { isUnreadable } from './read-ahead.js'
import { findingOf, roleOf, runVerdict } from './verdict-rules.js'
import { maxDetailList, type FilesFindings, type RecordFinding, type RunReport } from './run-report.js'
import { fileKind, readSuperblock } from './data-file-read.js'
import { corruptCode, FailedSeqs, reorderingOf, toRanges, tornCode } from './failed-seqs.js'
import { listenedRunMs, maxJudgedSeq, superblockFinding, withAckTimes, type JudgeOptions } from './judge.js'

/**
 * Entries of a run's directory verify lists at most: the most record files a run keeps (slotCount,
 * maxOverwriteSlots) and room for temporary files, unacknowledged ones and strays. One number per
 * record file is kept while judging (8 bytes: 128 MiB at the bound, as overwrite's slot table).
 */
export const maxFilesRunEntries = maxOverwriteSlots + 2 ** 20

const intactCode = 253

/** Unacknowledged record and temporary files writerReached reads at most, the highest first. */
export const maxReachedReads = 64

/** The classes of loss a reason code stands for (failed-seqs.ts codes 0..249). */
type LossClass = 'missing' | 'rename' | 'zero' | 'short' | 'not-a-file' | 'unreadable' | 'lost' | 'back'

/** What one present record file was found to be: a code (intact, torn, corrupt or a loss reason's). */
type FileOutcome = { readonly code: number; readonly finding?: RecordFinding; readonly kind?: 'torn' | 'corrupt' | 'unreadable' | 'short' }

/** Seq-sorted numbers, grown by doubling: seq * 256 + code, or plain seqs. */
class PackedList {
  private values = new Float64Array(1024)
  length = 0
  push(value: number): void {
    if (this.length === this.values.length) {
      const larger = new Float64Array(this.values.length * 2)
      larger.set(this.values)
      this.values = larger
    }
    this.values[this.length++] = value
  }
  sorted(): Float64Array {
    return this.values.subarray(0, this.length).sort()
  }
}

/** One files run being judged. */
class FilesJudging {
  readonly failed = new FailedSeqs(true)
  readonly classes = new Map<number, LossClass>()
  readonly present = new PackedList()
  readonly temps = new PackedList()
  readonly torn: RecordFinding[] = []
  readonly corrupt: RecordFinding[] = []
  readonly unreadable: RecordFinding[] = []
  readonly records: RecordFinding[] = []
  readonly strayNames: string[] = []
  strays = 0
  unacknowledged = 0
  /** Record and temporary files above the acknowledged seqs: seq * 2, + 1 for a temporary name (writerReached reads them). */
  private readonly unacknowledgedFiles = new PackedList()
  /** The highest seq of any record or temporary file listed. */
  highestSeen = 0
  /** Acknowledged records absent because a later step the listener never heard of deleted them. */
  deletedLater = 0
  readonly counts: Record<LossClass | 'intact' | 'torn' | 'corrupt', number> = {
    missing: 0,
    rename: 0,
    zero: 0,
    short: 0,
    'not-a-file': 0,
    unreadable: 0,
    lost: 0,
    back: 0,
    intact: 0,
    torn: 0,
    corrupt: 0,
  }
  maxSurvivingSeq = 0
  private readonly classifier: Classifier
  private readonly bytes: Buffer

  constructor(
    readonly meta: RunMeta,
    readonly throughSeq: number,
    readonly windowLow: number,
    nowMs: number,
    runMs: number,
  ) {
    // A record's bytes are those of the same seq in an append run of the same window (files-layout.ts).
    const layout = runLayout({ pattern: 'append', slotCount: meta.slotCount, createdMs: meta.createdMs }, nowMs, runMs)
    this.classifier = new Classifier(runKey(meta.runId), meta.recordSizeBytes, layout)
    this.bytes = Buffer.alloc(meta.recordSizeBytes)
  }

  code(reason: string, lossClass: LossClass): number {
    const code = this.failed.reasonCode(reason)
    if (!this.classes.has(code)) this.classes.set(code, lossClass)
    return code
  }

  stray(name: string): void {
    this.strays++
    if (this.strayNames.length < maxDetailList) this.strayNames.push(oneLine(JSON.stringify(name), 200))
  }

  /** One entry of the directory, by its name. */
  entry(dir: string, name: string): void {
    if (name === superblockFileName) return
    const seq = seqOfRecordFile(name)
    if (seq !== null) {
      this.highestSeen = Math.max(this.highestSeen, seq)
      if (seq > this.throughSeq) this.unacknowledgedEntry(seq, false)
      else if (seq < this.windowLow) this.deletedEntry(dir, name, seq)
      else {
        const outcome = this.judgeFile(join(dir, name), seq)
        if (outcome !== null) this.present.push(seq * 256 + outcome.code)
      }
      return
    }
    const temp = seqOfTempFile(name)
    if (temp === null) {
      this.stray(name)
      return
    }
    this.highestSeen = Math.max(this.highestSeen, temp)
    if (temp > this.throughSeq) this.unacknowledgedEntry(temp, true)
    else if (temp >= this.windowLow && lstatOrNull(join(dir, name))?.isFile() === true) this.temps.push(temp)
  }

  private unacknowledgedEntry(seq: number, temporary: boolean): void {
    this.unacknowledged++
    this.unacknowledgedFiles.push(seq * 2 + (temporary ? 1 : 0))
  }

  /**
   * How far the writer evidently got: the highest seq above the acknowledged ones whose record or
   * temporary file holds exactly its own record of this run (0: none does). A name alone proves
   * nothing (a user's rec-999999, another run's file, garbage under the name): counting it would
   * excuse every absent acknowledged record as deleted by steps that never ran. Files are read from
   * the highest down until one holds its record, reading at most maxReachedReads files of a record's
   * size (others are passed on their lstat): a writer's last complete step is its highest file or the
   * one below (the next step's temporary file), so a directory of a million unacknowledged files
   * costs a few reads, not a million.
   */
  writerReached(dir: string): number {
    const files = this.unacknowledgedFiles.sorted()
    let reads = 0
    for (let i = files.length - 1; i >= 0 && reads < maxReachedReads; i--) {
      const value = files[i]!
      const temporary = value % 2 === 1
      const seq = (value - (temporary ? 1 : 0)) / 2
      if (i + 1 < files.length && files[i + 1] === value) continue // the same name listed twice
      const path = join(dir, temporary ? tempFileName(seq) : recordFileName(seq))
      const stats = lstatOrNull(path)
      if (stats?.isFile() !== true || stats.size !== this.meta.recordSizeBytes) continue // no record: nothing to read
      reads++
      if (this.holdsOwnRecord(path, stats, seq)) return seq
    }
    return 0
  }

  /** Whether the regular file at path (listed as stats) holds exactly record seq of this run; false for anything else, an unreadable file included. */
  private holdsOwnRecord(path: string, stats: Stats, seq: number): boolean {
    try {
      if (this.readRecord(path, stats) !== this.meta.recordSizeBytes) return false
    } catch (error) {
      if (error instanceof Vanished || error instanceof NotAFile || isUnreadable(error)) return false
      throw error
    }
    const verdict = this.classifier.classify(this.bytes, this.slotOf(seq), seq)
    return verdict.kind === 'intact' && verdict.foundSeq === seq
  }

  /** rec-s of a seq whose deletion was acknowledged: a regular file there came back; anything else is a stray. */
  private deletedEntry(dir: string, name: string, seq: number): void {
    let size: number | string
    try {
      const stats = lstatSync(join(dir, name))
      if (!stats.isFile()) {
        this.stray(name)
        return
      }
      size = stats.size
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return
      if (!isUnreadable(error)) throw runtimeError(`could not stat ${join(dir, name)}: ${describeSystemError(error)}`)
      // The name is in the directory again, whatever the storage can say of its inode.
      size = `its inode unreadable (${describeSystemError(error)})`
    }
    this.present.push(seq * 256 + this.code('a deleted record file came back: its acknowledged deletion was lost', 'back'))
    this.noteRecord({
      seq,
      slot: this.slotOf(seq),
      offsetBytes: 0,
      lengthBytes: typeof size === 'number' ? size : 0,
      detail: `${name} is there again, ${typeof size === 'number' ? `${size} bytes` : size}, though its deletion was acknowledged (with record ${seq + this.meta.slotCount})`,
    })
  }

  private slotOf(seq: number): number {
    return (seq - 1) % this.meta.slotCount
  }

  private noteRecord(finding: RecordFinding): void {
    if (this.records.length < maxDetailList) this.records.push(finding)
  }

  /** What rec-seq (acknowledged, not deleted) holds; null when it vanished between the listing and now (absent). */
  private judgeFile(path: string, seq: number): FileOutcome | null {
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

  /**
   * After the listing: the present files in seq order, the absent ones between them counted as ranges
   * (rename lost where the temporary file is there), every failure pushed in seq order.
   */
  settle(absentReason: string, absentClass: LossClass, deletedLaterThrough = 0): void {
    const present = this.present.sorted()
    const temps = this.temps.sorted()
    const { failed, counts } = this
    let t = 0
    let next = this.windowLow
    // Absent up to deletedLaterThrough: deleted by a step after the acknowledged ones (judgeFilesRun says why).
    const missing = (from: number, to: number): void => {
      const later = Math.min(to, deletedLaterThrough)
      if (later >= from) this.deletedLater += later - from + 1
      if (Math.max(from, later + 1) <= to) this.lose(Math.max(from, later + 1), to, absentReason, absentClass)
    }
    const absent = (from: number, to: number): void => {
      while (t < temps.length && temps[t]! < from) t++
      while (from <= to && t < temps.length && temps[t]! <= to) {
        const temp = temps[t++]!
        if (temp < from) continue // the same temporary name listed twice
        if (temp > from) missing(from, temp - 1)
        this.lose(temp, temp, 'rename lost: the record is there only under its temporary name', 'rename')
        from = temp + 1
      }
      if (from <= to) missing(from, to)
    }
    let previous = -1
    for (const entry of present) {
      const code = entry % 256
      const seq = (entry - code) / 256
      if (seq === previous) continue // a name listed twice counts once
      previous = seq
      if (seq >= this.windowLow) {
        absent(next, seq - 1)
        next = seq + 1
      }
      if (code === intactCode) {
        counts.intact++
        this.maxSurvivingSeq = Math.max(this.maxSurvivingSeq, seq)
        continue
      }
      failed.push(seq, code)
      if (code === tornCode) counts.torn++
      else if (code === corruptCode) counts.corrupt++
      else counts[this.classes.get(code) ?? 'lost']++
    }
    absent(next, this.throughSeq)
  }

  private lose(from: number, to: number, reason: string, lossClass: LossClass): void {
    this.failed.pushRange(from, to, this.code(reason, lossClass))
    this.counts[lossClass] += to - from + 1
  }
}

/** The record file went away between the listing and its reading: judged absent. */
class Vanished extends Error {}
/** The name holds no regular file (message: what it holds). */
class NotAFile extends Error {}

function lstatOrNull(path: string): Stats | null {
  try {
    return lstatSync(path)
  } catch {
    return null
  }
}

/** What lies at a files run's path: its directory, nothing, a file, or what cannot be judged (thrown, exit 3). */
function runPlace(path: string): 'directory' | 'missing' | 'file' | { readonly unreadable: string } {
  let stats: Stats
  try {
    stats = lstatSync(path)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 'missing'
    if (isUnreadable(error)) return { unreadable: describeSystemError(error) }
    throw runtimeError(`could not stat ${path}: ${describeSystemError(error)}`)
  }
  if (stats.isDirectory()) return 'directory'
  if (stats.isFile()) return 'file'
  if (stats.isSymbolicLink())
    throw runtimeError(
      `${path} is a symbolic link, not the directory write made: verify never follows one out of a run's place`,
      "give --file the run's directory itself (the path given to write)",
    )
  throw runtimeError(`${path} is ${fileKind(stats)}, not a directory`, "give --file the run's directory (the path given to write)")
}

/** Lists dir into judging, entry by entry; the errno when the storage would not list it to its end. Past maxFilesRunEntries: exit 3. */
function listDirectory(path: string, judging: FilesJudging, maxEntries: number): string | null {
  let dir: Dir
  try {
    dir = opendirSync(path, { bufferSize: 1024 })
  } catch (error) {
    if (isUnreadable(error)) return describeSystemError(error)
    throw runtimeError(`could not list ${path}: ${describeSystemError(error)}`)
  }
  try {
    let entries = 0
    for (;;) {
      const entry = dir.readSync()
      if (entry === null) return null
      if (++entries > maxEntries)
        throw runtimeError(
          `${path} holds more than ${maxEntries.toLocaleString('en-US')} entries, more than a files run makes (it keeps at most ${maxOverwriteSlots.toLocaleString('en-US')} record files); nothing was judged`,
          "give --file a files run's directory, holding only what write made there",
        )
      judging.entry(path, entry.name)
    }
  } catch (error) {
    if (isUnreadable(error)) return describeSystemError(error)
    throw error
  } finally {
    dir.closeSync()
  }
}

/**
 * End reasons of a writer that stopped between two steps, having acked every step it completed and
 * sent its end after those acks (writer.ts writeLoop: --duration, a signal or the campaign's stop).
 * No step past the last ack ran, so nothing acknowledged was deleted by one. Any other end ('error'
 * may come mid-step, after the recycling unlink) or none at all (a cut) keeps the excuse.
 */
const endedBetweenSteps: ReadonlySet<string> = new Set(['duration', 'interrupted'])

export interface FilesJudgeOptions extends JudgeOptions {
  /** Tests: a lower bound than maxFilesRunEntries, shown on a small directory. */
  readonly maxEntries?: number
}

export async function judgeFilesRun(run: StoredRun, options: FilesJudgeOptions = {}): Promise<RunReport> {
  const meta = run.meta
  const acks = options.acks ?? timelineOfSpans(meta.runId, run.spans)
  const acked = acks.throughSeq
  if (acked > maxJudgedSeq)
    throw runtimeError(`the listener sent seq ${acked} for run ${meta.runId}, more than any writer can have written`)
  const keep = meta.slotCount
  const windowLow = acked > keep ? acked - keep + 1 : 1
  const deleted = windowLow - 1
  const judging = new FilesJudging(meta, acked, windowLow, options.nowMs ?? Date.now(), listenedRunMs(run))

  let superblock: { kind: string; detail: string; runId?: string }
  const place = runPlace(meta.path)
  let reachedSeq = 0
  if (place === 'missing') {
    superblock = { kind: 'missing', detail: 'the run directory does not exist' }
    judging.settle('the run directory is missing', 'missing')
  } else if (place === 'file') {
    superblock = { kind: 'not-a-directory', detail: `${meta.path} is a file, not the run's directory` }
    judging.settle("the run's directory is gone: a file is at its path", 'missing')
  } else if (place !== 'directory') {
    superblock = { kind: 'unreadable', detail: `the run directory cannot be read: ${place.unreadable}` }
    judging.settle(`the storage could not read the run directory back: ${place.unreadable}`, 'unreadable')
  } else {
    superblock = superblockFinding(readSuperblock(meta.path), meta)
    const listingFailed = listDirectory(meta.path, judging, options.maxEntries ?? maxFilesRunEntries)
    // The writer deletes rec-(s - K) in step s before its directory sync and ack, and sends acks
    // without waiting for the listener to record them: steps past A may have run, each deleting an
    // acknowledged record. Step E + 1 may have run in part (its deletion kept, its new file not), E the
    // highest seq whose file in the directory holds its own record. So a record absent at or below E + 1 - K is deleted, not lost.
    // E counts only a file that holds its own record of this run (writerReached): a bare name past the run is no step.
    reachedSeq = judging.writerReached(meta.path)
    const deletedLaterThrough = endedBetweenSteps.has(run.end?.reason ?? 'vanished')
      ? 0
      : Math.min(acked, Math.max(acked, reachedSeq) + 1 - keep)
    if (listingFailed === null) judging.settle('the file is missing', 'missing', deletedLaterThrough)
    else judging.settle(`not listed: the storage could not list the run directory to its end: ${listingFailed}`, 'unreadable')
  }

  const { failed, counts } = judging
  const lost =
    counts.missing + counts.rename + counts.zero + counts.short + counts['not-a-file'] + counts.unreadable + counts.lost + counts.back
  const { count: lostRangeCount, ranges: lostRanges } = await withAckTimes(toRanges(failed, []), acks)
  const role = roleOf(meta.method)
  const verdict = runVerdict(
    role,
    findingOf(acked, lost + counts.torn + counts.corrupt, superblock.kind === 'valid', run.end?.reason === 'storage-lost'),
  )
  const bySeq = (a: RecordFinding, b: RecordFinding): number => a.seq - b.seq
  const files: FilesFindings = {
    keep,
    dirSync: meta.files?.dirSync ?? true,
    publish: meta.files?.publish ?? 'rename',
    deleted,
    deletedUnacknowledged: judging.deletedLater,
    highestSeq: judging.highestSeen,
    reachedSeq,
    renameLost: counts.rename,
    zeroLength: counts.zero,
    short: counts.short,
    notAFile: counts['not-a-file'],
    cameBack: counts.back,
    unacknowledged: judging.unacknowledged,
    strays: judging.strays,
    strayNames: judging.strayNames,
    records: judging.records.sort(bySeq),
  }
  return {
    runId: meta.runId,
    groupId: meta.groupId,
    method: meta.method,
    role,
    direct: meta.direct,
    recordSize: meta.recordSizeBytes,
    pattern: meta.pattern,
    path: meta.path,
    createdMs: meta.createdMs,
    ended: run.end === undefined ? null : run.end.reason,
    rebootedSinceWrite: options.rebootedSinceWrite ?? null,
    acked,
    superseded: deleted - counts.back + judging.deletedLater,
    intact: counts.intact,
    lost,
    unreadable: counts.unreadable,
    torn: counts.torn,
    corrupt: counts.corrupt,
    interrupted: 0,
    verdict,
    superblock,
    lostRangeCount,
    lostRanges,
    tornRecords: judging.torn.sort(bySeq),
    corruptRecords: judging.corrupt.sort(bySeq),
    interruptedRecords: [],
    unreadableRecords: judging.unreadable.sort(bySeq),
    reordering: reorderingOf(failed, [], judging.maxSurvivingSeq),
    files,
  }
}
