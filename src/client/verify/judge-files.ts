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
 *
 * The parts: files-directory.ts (the run's place, its listing), files-record.ts (one record file read
 * and classified), files-reached.ts (E, from the unacknowledged files); here, the table's decisions.
 */
import { lstatSync } from 'node:fs'
import { join } from 'node:path'
import type { StoredRun } from '../../protocol/messages.js'
import { timelineOfSpans } from './ack-timeline.js'
import type { RunMeta } from '../../record/format.js'
import { seqOfRecordFile, seqOfTempFile, superblockFileName } from '../../record/files-layout.js'
import { describeSystemError, runtimeError } from '../../base/errors.js'
import { oneLine } from '../../base/printable.js'
import { isUnreadable } from './read-ahead.js'
import { findingOf, roleOf, runVerdict } from './verdict-rules.js'
import { maxDetailList, type FilesFindings, type RecordFinding, type RunReport } from './run-report.js'
import { readSuperblock } from './data-file-read.js'
import { corruptCode, reorderingOf, toRanges, tornCode } from './failed-seqs.js'
import { listenedRunMs, maxJudgedSeq, superblockFinding, withAckTimes, type JudgeOptions } from './judge.js'
import { listDirectory, lstatOrNull, maxFilesRunEntries, PackedList, runPlace } from './files-directory.js'
import { intactCode, RecordFiles, type LossClass } from './files-record.js'
import { UnacknowledgedFiles } from './files-reached.js'

export { maxFilesRunEntries } from './files-directory.js'

/** One files run being judged. */
class FilesJudging {
  readonly present = new PackedList()
  readonly temps = new PackedList()
  readonly strayNames: string[] = []
  strays = 0
  /** Record and temporary files above the acknowledged seqs (files-reached.ts reads them). */
  readonly unacknowledged = new UnacknowledgedFiles()
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
  readonly records: RecordFiles

  constructor(
    readonly meta: RunMeta,
    readonly throughSeq: number,
    readonly windowLow: number,
    nowMs: number,
    runMs: number,
  ) {
    this.records = new RecordFiles(meta, nowMs, runMs)
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
      if (seq > this.throughSeq) this.unacknowledged.push(seq, false)
      else if (seq < this.windowLow) this.deletedEntry(dir, name, seq)
      else {
        const outcome = this.records.judge(join(dir, name), seq)
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
    if (temp > this.throughSeq) this.unacknowledged.push(temp, true)
    else if (temp >= this.windowLow && lstatOrNull(join(dir, name))?.isFile() === true) this.temps.push(temp)
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
    const { records } = this
    this.present.push(seq * 256 + records.code('a deleted record file came back: its acknowledged deletion was lost', 'back'))
    records.noteRecord({
      seq,
      slot: records.slotOf(seq),
      offsetBytes: 0,
      lengthBytes: typeof size === 'number' ? size : 0,
      detail: `${name} is there again, ${typeof size === 'number' ? `${size} bytes` : size}, though its deletion was acknowledged (with record ${seq + this.meta.slotCount})`,
    })
  }

  /**
   * After the listing: the present files in seq order, the absent ones between them counted as ranges
   * (rename lost where the temporary file is there), every failure pushed in seq order.
   */
  settle(absentReason: string, absentClass: LossClass, deletedLaterThrough = 0): void {
    const present = this.present.sorted()
    const temps = this.temps.sorted()
    const { counts } = this
    const { failed } = this.records
    let t = 0
    let next = this.windowLow
    // Absent up to deletedLaterThrough: deleted by a step after the acknowledged ones (judgeDirectory says why).
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
      else counts[this.records.classes.get(code) ?? 'lost']++
    }
    absent(next, this.throughSeq)
  }

  private lose(from: number, to: number, reason: string, lossClass: LossClass): void {
    this.records.failed.pushRange(from, to, this.records.code(reason, lossClass))
    this.counts[lossClass] += to - from + 1
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

type SuperblockFinding = { kind: string; detail: string; runId?: string }

/** Judges what lies at the run's path into judging: the superblock found there and E, how far the writer got (0: not read). */
function judgeDirectory(
  run: StoredRun,
  judging: FilesJudging,
  maxEntries: number,
): { readonly superblock: SuperblockFinding; readonly reachedSeq: number } {
  const meta = run.meta
  const place = runPlace(meta.path)
  if (place === 'missing') {
    judging.settle('the run directory is missing', 'missing')
    return { superblock: { kind: 'missing', detail: 'the run directory does not exist' }, reachedSeq: 0 }
  }
  if (place === 'file') {
    judging.settle("the run's directory is gone: a file is at its path", 'missing')
    return { superblock: { kind: 'not-a-directory', detail: `${meta.path} is a file, not the run's directory` }, reachedSeq: 0 }
  }
  if (place !== 'directory') {
    judging.settle(`the storage could not read the run directory back: ${place.unreadable}`, 'unreadable')
    return { superblock: { kind: 'unreadable', detail: `the run directory cannot be read: ${place.unreadable}` }, reachedSeq: 0 }
  }
  const superblock = superblockFinding(readSuperblock(meta.path), meta)
  const listingFailed = listDirectory(meta.path, (name) => judging.entry(meta.path, name), maxEntries)
  // The writer deletes rec-(s - K) in step s before its directory sync and ack, and sends acks
  // without waiting for the listener to record them: steps past A may have run, each deleting an
  // acknowledged record. Step E + 1 may have run in part (its deletion kept, its new file not), E the
  // highest seq whose file in the directory holds its own record. So a record absent at or below E + 1 - K is deleted, not lost.
  // E counts only a file that holds its own record of this run (writerReached): a bare name past the run is no step.
  const reachedSeq = judging.unacknowledged.writerReached(meta.path, judging.records)
  const acked = judging.throughSeq
  const deletedLaterThrough = endedBetweenSteps.has(run.end?.reason ?? 'vanished')
    ? 0
    : Math.min(acked, Math.max(acked, reachedSeq) + 1 - meta.slotCount)
  if (listingFailed === null) judging.settle('the file is missing', 'missing', deletedLaterThrough)
  else judging.settle(`not listed: the storage could not list the run directory to its end: ${listingFailed}`, 'unreadable')
  return { superblock, reachedSeq }
}

const bySeq = (a: RecordFinding, b: RecordFinding): number => a.seq - b.seq

/** The files run's own findings (run-report.ts FilesFindings) from a settled judging. */
function filesFindings(judging: FilesJudging, deleted: number, reachedSeq: number): FilesFindings {
  const { meta, counts } = judging
  return {
    keep: meta.slotCount,
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
    unacknowledged: judging.unacknowledged.count,
    strays: judging.strays,
    strayNames: judging.strayNames,
    records: judging.records.records.sort(bySeq),
  }
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
  const { superblock, reachedSeq } = judgeDirectory(run, judging, options.maxEntries ?? maxFilesRunEntries)

  const { counts, records } = judging
  const { failed } = records
  const lost =
    counts.missing + counts.rename + counts.zero + counts.short + counts['not-a-file'] + counts.unreadable + counts.lost + counts.back
  const { count: lostRangeCount, ranges: lostRanges } = await withAckTimes(toRanges(failed, []), acks)
  const role = roleOf(meta.method)
  const verdict = runVerdict(
    role,
    findingOf(acked, lost + counts.torn + counts.corrupt, superblock.kind === 'valid', run.end?.reason === 'storage-lost'),
  )
  const files = filesFindings(judging, deleted, reachedSeq)
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
    tornRecords: records.torn.sort(bySeq),
    corruptRecords: records.corrupt.sort(bySeq),
    interruptedRecords: [],
    unreadableRecords: records.unreadable.sort(bySeq),
    reordering: reorderingOf(failed, [], judging.maxSurvivingSeq),
    files,
  }
}
