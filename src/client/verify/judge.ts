/**
 * Judging one run: the listener's acks against what the data file holds (docs/verify-semantics.md).
 * Findings are values in the report; only a failure to read the file at all is an error.
 *
 * Each slot is judged by its last acknowledged seq (Classifier). In overwrite, an acked seq that a
 * later acked seq superseded on the same slot is counted as superseded, not judged.
 *
 * Fault model: the acks come from a listener (or its directory) that may be hostile or damaged, the
 * file from storage that may hold anything. So nothing here loops over the acknowledged seqs or keeps
 * anything per seq: acks are contiguous 1..N, so in append the last acknowledged seq of each slot is
 * arithmetic, and in overwrite seqs are walked backwards from N only until every slot has its last one
 * (memory scales with the slot count, which runMetaSchema bounds). Slots past the end of an append
 * file are counted as ranges, not one by one. Failed seqs are kept packed in a Float64Array.
 */
import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from 'node:fs'
import type { StoredRun } from '../../protocol/messages.js'
import { timelineOfSpans, type AckTimeline } from './ack-timeline.js'
import { Classifier, runLayout, wholeVerdict, type SlotVerdict } from '../../record/classify.js'
import {
  decodeSuperblock,
  maxRecordSizeBytes,
  runKey,
  slotOf,
  slotOffsetBytes,
  superblockHeaderBytes,
  superblockMagic,
  type RunKey,
  type RunMeta,
  type SuperblockReading,
} from '../../record/format.js'
import { describeSystemError, runtimeError } from '../../base/errors.js'
import { WholeRecordCheck } from '../../record/scan.js'
import { readAhead, type ChunkRequest } from './read-ahead.js'
import { findingOf, roleOf, runVerdict, type RunVerdict } from './verdict-rules.js'
import { chunkBuffers, inThreadChecker, scanThreadCount, startScanThreads, type ChunkChecker } from './scan-threads.js'

/**
 * Large reads, several in flight (read-ahead.ts): the disk streams while earlier chunks are checked,
 * on other threads when there are cores for them (scan-threads.ts).
 */
const defaultReadChunkBytes = 16 * 1024 * 1024
const readsInFlight = 2
/** Per-record detail lists and lostRanges are capped; counts are always exact. */
export const detailListLimit = 1000
/**
 * Seqs above this cannot be real: 2^45 is more than a year at a million records a second (the fastest
 * writer reaches ~40k/s). It also keeps (seq, code) packable into one double.
 */
export const maxJudgedSeq = 2 ** 45
/** Overwrite: the backward walk stops once every slot has a seq; with a fair slot hash that takes ~slotCount * ln(slotCount) seqs. */
const overwriteWalkFactor = 64

export interface SeqRange {
  readonly fromSeq: number
  readonly toSeq: number
  readonly count: number
  /** Why these seqs are gone (zeros, older data, past the end of the file, another run's data). */
  readonly reason: string
  /** When the listener received the acks of these seqs (ms since the epoch; span precision 100 ms). */
  readonly ackedFromMs: number
  readonly ackedToMs: number
}

export interface RecordFinding {
  readonly seq: number
  readonly slot: number
  readonly offsetBytes: number
  readonly lengthBytes: number
  readonly detail: string
}

export interface RunReport {
  readonly runId: string
  readonly groupId: string
  readonly method: string
  /** `none` is the negative control: its losses prove the cut was real. Every other method is tested. */
  readonly role: 'control' | 'tested'
  readonly direct: boolean
  readonly recordSize: number
  readonly pattern: string
  readonly path: string
  readonly createdMs: number
  readonly ended: string | null
  /** false: this machine has not rebooted since the write (same boot id); null: unknown. */
  readonly rebootedSinceWrite: boolean | null
  readonly acked: number
  readonly superseded: number
  readonly intact: number
  readonly lost: number
  readonly torn: number
  readonly corrupt: number
  /** Overwrites of a newer, unacknowledged seq cut mid-record: the device's atomic write unit, not a failure. */
  readonly interrupted: number
  /**
   * tested: pass (every acknowledged record survived), fail (one did not, or the superblock did not),
   * inconclusive (nothing was acknowledged). control: pass (it lost records: the cut was real),
   * inconclusive (it lost nothing: the cut tested nothing).
   */
  readonly verdict: RunVerdict
  readonly superblock: { readonly kind: string; readonly detail: string; readonly runId?: string }
  /** Exact number of lost ranges; lostRanges holds the first detailListLimit of them, in seq order. */
  readonly lostRangeCount: number
  readonly lostRanges: readonly SeqRange[]
  readonly tornRecords: readonly RecordFinding[]
  readonly corruptRecords: readonly RecordFinding[]
  readonly interruptedRecords: readonly RecordFinding[]
  /** Acknowledged seqs lost, torn or corrupt while a later record survived: writes reordered across a flush. */
  readonly reordering: { readonly count: number; readonly survivedSeq: number; readonly earliestLostSeq: number } | null
}

export interface JudgeOptions {
  readonly nowMs?: number
  readonly rebootedSinceWrite?: boolean | null
  /** Tests: smaller reads, so a small file spans many chunks (rounded down to whole records). */
  readonly readChunkBytes?: number
  /** The run's acks, when its spans are not in run.spans (a long run's, read page by page: ack-timeline.ts). */
  readonly acks?: AckTimeline
}

// --- the data file -------------------------------------------------------------------------------

/** Opens the data file read-only; null when it does not exist. Only regular files: a FIFO would hang, a directory would not read. */
export function openDataFile(path: string): number | null {
  let fd: number
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw runtimeError(`could not open ${path}: ${describeSystemError(error)}`)
  }
  let stats: Stats
  try {
    stats = fstatSync(fd)
  } catch (error) {
    closeSync(fd)
    throw runtimeError(`could not stat ${path}: ${describeSystemError(error)}`)
  }
  if (!stats.isFile()) {
    closeSync(fd)
    throw runtimeError(`${path} is ${fileKind(stats)}, not a regular file`, 'give --file the data file that write created')
  }
  return fd
}

function fileKind(stats: Stats): string {
  if (stats.isDirectory()) return 'a directory'
  if (stats.isFIFO()) return 'a FIFO'
  if (stats.isSocket()) return 'a socket'
  if (stats.isCharacterDevice()) return 'a character device'
  if (stats.isBlockDevice()) return 'a block device'
  if (stats.isSymbolicLink()) return 'a symbolic link'
  return 'not a file'
}

/** What the file at path says about its run; 'missing' when there is no file. */
export function readSuperblock(path: string): SuperblockReading | { readonly kind: 'missing'; readonly detail: string } {
  const fd = openDataFile(path)
  if (fd === null) return { kind: 'missing', detail: 'the data file does not exist' }
  try {
    return readSuperblockFd(fd, path)
  } finally {
    closeSync(fd)
  }
}

/**
 * The superblock as its own header sizes it: its metadata, then the rest of its block (the record
 * size it names), never the listener's idea of the record size, which is what it cross-checks.
 */
function readSuperblockFd(fd: number, path: string): SuperblockReading {
  const head = Buffer.alloc(superblockHeaderBytes)
  const got = readFully(fd, head, head.length, 0, path)
  const metaLength = got === head.length ? head.readUInt32LE(12) : 0
  if (got < head.length || !head.subarray(0, 8).equals(superblockMagic) || metaLength > maxRecordSizeBytes - head.length)
    return decodeSuperblock(head.subarray(0, got))
  let block = Buffer.alloc(head.length + metaLength)
  let reading = decodeSuperblock(block.subarray(0, readFully(fd, block, block.length, 0, path)))
  if (reading.kind === 'valid' && reading.meta.recordSizeBytes > block.length) {
    block = Buffer.alloc(reading.meta.recordSizeBytes)
    reading = decodeSuperblock(block.subarray(0, readFully(fd, block, block.length, 0, path)))
  }
  return reading
}

/** Reads up to `wanted` bytes; short only at end of file. Any read error is a one-line runtime error. */
function readFully(fd: number, buffer: Buffer, wanted: number, offset: number, path: string): number {
  let done = 0
  try {
    while (done < wanted) {
      const n = readSync(fd, buffer, done, wanted - done, offset + done)
      if (n === 0) break
      done += n
    }
  } catch (error) {
    throw runtimeError(`could not read ${path} at offset ${offset + done}: ${describeSystemError(error)}`)
  }
  return done
}

// --- which seq each slot is judged by ------------------------------------------------------------

/** The last acknowledged seq of each slot, without a loop over acknowledged seqs. */
interface SlotPlan {
  /** Slots [0, slotLimit) are the only ones that may be judged. */
  readonly slotLimit: number
  readonly judged: number
  /** The last acknowledged seq of slot, 0 when none. */
  lastAcked(slot: number): number
}

function appendPlan(slotCount: number, throughSeq: number): SlotPlan {
  const judged = Math.min(throughSeq, slotCount)
  return {
    slotLimit: judged,
    judged,
    // Seqs s+1, s+1+slotCount, ... go to slot s; the last of them at or below throughSeq.
    lastAcked: (slot) => (slot < judged ? slot + 1 + Math.floor((throughSeq - slot - 1) / slotCount) * slotCount : 0),
  }
}

function overwritePlan(key: RunKey, meta: RunMeta, throughSeq: number): SlotPlan {
  const last = new Float64Array(meta.slotCount)
  let judged = 0
  const walkLimit = meta.slotCount * overwriteWalkFactor + 1_000_000
  let walked = 0
  for (let seq = throughSeq; seq >= 1 && judged < meta.slotCount; seq--) {
    if (++walked > walkLimit) {
      throw runtimeError(
        `run ${meta.runId}: ${walkLimit} seqs did not reach every one of its ${meta.slotCount} slots; its metadata cannot be right`,
      )
    }
    const slot = slotOf(key, 'overwrite', seq, meta.slotCount)
    if (last[slot] === 0) {
      last[slot] = seq
      judged++
    }
  }
  return { slotLimit: meta.slotCount, judged, lastAcked: (slot) => last[slot]! }
}

// --- failed seqs, packed -------------------------------------------------------------------------

const tornCode = 254
const corruptCode = 255
const maxReasonCodes = 250

/** Failed seqs fromSeq..toSeq, all with one reason code (a loss reason, torn or corrupt). */
interface FailedRun {
  readonly fromSeq: number
  readonly toSeq: number
  readonly code: number
}

/**
 * Failed seqs as runs: (first seq * 256 + code, length) in two growing Float64Arrays, 16 bytes per run.
 * Append judges slots in order, so its failed seqs come in at most two ascending stretches (the latest
 * lap of the file, then the lap before it) and a loss of any size that is contiguous in seq is one
 * run: memory follows the number of lost ranges, not lost records. Overwrite's seqs come in slot
 * order, which is random in seq: one run per seq, sorted natively (slotCount bounds their number).
 */
class FailedSeqs {
  private starts = new Float64Array(1024)
  private lengths = new Float64Array(1024)
  length = 0
  private readonly reasons: string[] = []
  private readonly reasonCodes = new Map<string, number>()

  constructor(private readonly coalesce: boolean) {}

  reasonCode(reason: string): number {
    let code = this.reasonCodes.get(reason)
    if (code === undefined) {
      if (this.reasons.length >= maxReasonCodes) return this.reasonCode('lost')
      code = this.reasons.length
      this.reasons.push(reason)
      this.reasonCodes.set(reason, code)
    }
    return code
  }

  reason(code: number): string {
    return this.reasons[code]!
  }

  push(seq: number, code: number): void {
    const last = this.length - 1
    if (
      this.coalesce &&
      last >= 0 &&
      this.starts[last]! % 256 === code &&
      (this.starts[last]! - code) / 256 + this.lengths[last]! === seq
    ) {
      this.lengths[last]!++
      return
    }
    if (this.length === this.starts.length) {
      this.starts = grown(this.starts)
      this.lengths = grown(this.lengths)
    }
    this.starts[this.length] = seq * 256 + code
    this.lengths[this.length++] = 1
  }

  /** The runs in ascending seq order. */
  *ascending(): Generator<FailedRun> {
    const starts = this.starts.subarray(0, this.length)
    const descents: number[] = []
    for (let i = 1; i < starts.length && descents.length < 2; i++) if (starts[i - 1]! > starts[i]!) descents.push(i)
    let order: Iterable<number>
    if (descents.length === 0) order = indices(0, starts.length)
    else if (descents.length === 1 && starts.at(-1)! < starts[0]!)
      order = [...indices(descents[0]!, starts.length), ...indices(0, descents[0]!)] // two ascending stretches
    else if (this.lengths.subarray(0, this.length).every((n) => n === 1)) order = indices(0, starts.sort().length)
    else order = Array.from(indices(0, starts.length)).sort((a, b) => starts[a]! - starts[b]!)
    for (const i of order) {
      const code = starts[i]! % 256
      const fromSeq = (starts[i]! - code) / 256
      yield { fromSeq, toSeq: fromSeq + this.lengths[i]! - 1, code }
    }
  }
}

function grown(values: Float64Array<ArrayBuffer>): Float64Array<ArrayBuffer> {
  const larger = new Float64Array(values.length * 2)
  larger.set(values)
  return larger
}

function* indices(from: number, to: number): Generator<number> {
  for (let i = from; i < to; i++) yield i
}

/** Seqs fromSeq..toSeq (inclusive) all lost for one reason: slots past the end of an append file, or no file. */
interface BulkLoss {
  readonly fromSeq: number
  readonly toSeq: number
  readonly code: number
}

// --- judging -------------------------------------------------------------------------------------

/**
 * How long the run went on by the listener's clock (the machine that kept power): from its
 * announcement to its last ack or its end. Bounds the write times of its records (runLayout).
 */
function listenedRunMs(run: StoredRun): number {
  // A long run's spans may be left out of the reply (read page by page): its lastAckMs says the same.
  const lastMs = Math.max(run.end?.atMs ?? 0, run.spans.at(-1)?.[3] ?? 0, run.lastAckMs ?? 0)
  return Math.max(0, lastMs - run.announcedMs)
}

export async function judgeRun(run: StoredRun, options: JudgeOptions = {}): Promise<RunReport> {
  const meta = run.meta
  const key = runKey(meta.runId)
  const recordSize = meta.recordSizeBytes
  const nowMs = options.nowMs ?? Date.now()

  const acks = options.acks ?? timelineOfSpans(meta.runId, run.spans)
  const throughSeq = acks.throughSeq
  if (throughSeq > maxJudgedSeq)
    throw runtimeError(`the listener sent seq ${throughSeq} for run ${meta.runId}, more than any writer can have written`)
  const acked = throughSeq
  const plan = meta.pattern === 'append' ? appendPlan(meta.slotCount, throughSeq) : overwritePlan(key, meta, throughSeq)

  const failed = new FailedSeqs(meta.pattern === 'append')
  const bulk: BulkLoss[] = []
  const torn: RecordFinding[] = []
  const corrupt: RecordFinding[] = []
  const interrupted: RecordFinding[] = []
  let intact = 0
  let lostCount = 0
  let tornCount = 0
  let corruptCount = 0
  let interruptedCount = 0
  let maxSurvivingSeq = 0

  /** Slots [first, plan.slotLimit) all lost for reason. */
  const loseFrom = (first: number, reason: string): void => {
    const code = failed.reasonCode(reason)
    if (meta.pattern === 'append') {
      lostCount += addAppendBulk(bulk, meta.slotCount, throughSeq, first, plan.slotLimit, code)
      return
    }
    for (let slot = first; slot < plan.slotLimit; slot++) {
      const seq = plan.lastAcked(slot)
      if (seq === 0) continue
      failed.push(seq, code)
      lostCount++
    }
  }

  let superblock: { kind: string; detail: string; runId?: string } = { kind: 'missing', detail: 'the data file does not exist' }
  const fd = openDataFile(meta.path)
  if (fd === null) {
    loseFrom(0, 'the data file is missing')
  } else {
    try {
      let fileSizeBytes: number
      try {
        fileSizeBytes = fstatSync(fd).size
      } catch (error) {
        throw runtimeError(`could not stat ${meta.path}: ${describeSystemError(error)}`)
      }
      const reading = readSuperblockFd(fd, meta.path)
      superblock =
        reading.kind === 'valid'
          ? reading.meta.runId === meta.runId
            ? { kind: 'valid', detail: `superblock of run ${meta.runId}` }
            : {
                kind: 'other-run',
                runId: reading.meta.runId,
                detail: `the file holds run ${reading.meta.runId} (created ${new Date(reading.meta.createdMs).toISOString()}), not run ${meta.runId}: the new file did not survive`,
              }
          : { kind: reading.kind, detail: reading.detail }

      // Slots from here on start at or past the end of the file.
      const firstSlotPastEnd = Math.max(0, Math.ceil(fileSizeBytes / recordSize) - 1)
      const readLimit = Math.min(plan.slotLimit, firstSlotPastEnd)
      // The slow path, for the slots the whole-record check did not accept.
      const classifier = new Classifier(key, recordSize, runLayout(meta, nowMs, listenedRunMs(run)), { fastPath: false })
      const readChunkBytes = options.readChunkBytes ?? defaultReadChunkBytes
      const chunkBytes = readChunkBytes - (readChunkBytes % recordSize) || recordSize
      const judgeChunk = ({ firstSlot, lastSlot, offsetBytes: chunkOffset }: SlotChunk, chunk: Buffer, accepted: Float64Array): void => {
        const got = chunk.length
        for (let slot = firstSlot; slot <= lastSlot; slot++) {
          const seq = plan.lastAcked(slot)
          if (seq === 0) continue
          const start = (slot - firstSlot) * recordSize
          const found = accepted[slot - firstSlot]!
          const verdict: SlotVerdict =
            found > 0
              ? wholeVerdict(found, seq)
              : classifier.classify(chunk.subarray(start, Math.max(start, Math.min(got, start + recordSize))), slot, seq)
          if (verdict.kind === 'intact') {
            intact++
            maxSurvivingSeq = Math.max(maxSurvivingSeq, verdict.foundSeq ?? seq)
            continue
          }
          const finding: RecordFinding = { seq, slot, offsetBytes: chunkOffset + start, lengthBytes: recordSize, detail: verdict.detail }
          switch (verdict.kind) {
            case 'interrupted':
              interruptedCount++
              maxSurvivingSeq = Math.max(maxSurvivingSeq, seq)
              if (interrupted.length < detailListLimit) interrupted.push(finding)
              break
            case 'lost':
              lostCount++
              failed.push(seq, failed.reasonCode(lossReason(verdict)))
              break
            case 'torn':
              tornCount++
              failed.push(seq, tornCode)
              if (torn.length < detailListLimit) torn.push(finding)
              break
            case 'corrupt':
              corruptCount++
              failed.push(seq, corruptCode)
              if (corrupt.length < detailListLimit) corrupt.push(finding)
              break
          }
        }
      }
      const threads = scanThreadCount(readLimit * recordSize, chunkBytes)
      const checker: ChunkChecker =
        threads > 0
          ? startScanThreads({ runId: meta.runId, recordSizeBytes: recordSize, pattern: meta.pattern, slotCount: meta.slotCount }, threads)
          : inThreadChecker(new WholeRecordCheck(key, recordSize, meta.pattern, meta.slotCount))
      try {
        // Chunks out to the threads, judged in file order: each stays unread-over while it is held.
        const heldChunks = threads + 1
        const held: { request: SlotChunk; bytes: Buffer; accepted: Promise<Float64Array> }[] = []
        const judgeOldest = async (): Promise<void> => {
          const { request, bytes, accepted } = held.shift()!
          judgeChunk(request, bytes, await accepted)
        }
        const buffers = chunkBuffers(readsInFlight + heldChunks, chunkBytes, threads > 0)
        for await (const { request, bytes } of readAhead(
          fd,
          meta.path,
          chunksToRead(plan, recordSize, readLimit, chunkBytes),
          buffers,
          readsInFlight,
        )) {
          held.push({ request, bytes, accepted: checker.check(bytes, request.firstSlot, request.lastSlot - request.firstSlot + 1) })
          if (held.length === heldChunks) await judgeOldest()
        }
        while (held.length > 0) await judgeOldest()
      } finally {
        await checker.close()
      }
      if (readLimit < plan.slotLimit) loseFrom(readLimit, 'past the end of the file')
    } finally {
      closeSync(fd)
    }
  }

  const { count: lostRangeCount, ranges: lostRanges } = await withAckTimes(toRanges(failed, bulk), acks)
  const reordering = reorderingOf(failed, bulk, maxSurvivingSeq)
  const role = roleOf(meta.method)
  const verdict = runVerdict(
    role,
    findingOf(acked, lostCount + tornCount + corruptCount, superblock.kind === 'valid', run.end?.reason === 'storage-lost'),
  )
  return {
    runId: meta.runId,
    groupId: meta.groupId,
    method: meta.method,
    role,
    direct: meta.direct,
    recordSize,
    pattern: meta.pattern,
    path: meta.path,
    createdMs: meta.createdMs,
    ended: run.end === undefined ? null : run.end.reason,
    rebootedSinceWrite: options.rebootedSinceWrite ?? null,
    acked,
    superseded: acked - plan.judged,
    intact,
    lost: lostCount,
    torn: tornCount,
    corrupt: corruptCount,
    interrupted: interruptedCount,
    verdict,
    superblock,
    lostRangeCount,
    lostRanges,
    tornRecords: torn,
    corruptRecords: corrupt,
    interruptedRecords: interrupted,
    reordering,
  }
}

interface SlotChunk extends ChunkRequest {
  readonly firstSlot: number
  readonly lastSlot: number
}

/** Whole-record chunks of slots [0, readLimit), skipping those without an acknowledged seq to judge. */
function* chunksToRead(plan: SlotPlan, recordSize: number, readLimit: number, chunkBytes: number): Generator<SlotChunk> {
  const slotsPerChunk = chunkBytes / recordSize
  for (let windowFirst = 0; windowFirst < readLimit; windowFirst += slotsPerChunk) {
    const windowLast = Math.min(readLimit, windowFirst + slotsPerChunk) - 1
    // Only the stretch from the window's first acknowledged slot to its last is read: a few records
    // acknowledged in a large overwrite file cost their own bytes, not a whole chunk each.
    let firstSlot = windowFirst
    while (firstSlot <= windowLast && plan.lastAcked(firstSlot) === 0) firstSlot++
    if (firstSlot > windowLast) continue
    let lastSlot = windowLast
    while (plan.lastAcked(lastSlot) === 0) lastSlot--
    yield { firstSlot, lastSlot, offsetBytes: slotOffsetBytes(recordSize, firstSlot), lengthBytes: (lastSlot - firstSlot + 1) * recordSize }
  }
}

/**
 * Append: the seqs judged at slots [first, limit) as at most two ranges. The judged seqs are the last
 * `limit` ones, throughSeq - limit + 1 .. throughSeq; seq q sits at slot (q - 1) % slotCount.
 */
function addAppendBulk(bulk: BulkLoss[], slotCount: number, throughSeq: number, first: number, limit: number, code: number): number {
  if (first >= limit) return 0
  const lowest = throughSeq - limit + 1
  // Walk the judged seqs' slots in seq order: they start at slot (lowest - 1) % slotCount and wrap once at most.
  const startSlot = (lowest - 1) % slotCount
  const pieces: Array<[number, number]> = []
  // Slots startSlot..limit-1 hold seqs lowest.., then slots 0..startSlot-1 hold the rest.
  const firstRun: [number, number] = [startSlot, limit - 1]
  const secondRun: [number, number] = [0, startSlot - 1]
  let seqAt = lowest
  for (const [a, b] of [firstRun, secondRun]) {
    if (b < a) continue
    const from = Math.max(a, first)
    if (from <= b) pieces.push([seqAt + (from - a), seqAt + (b - a)])
    seqAt += b - a + 1
  }
  let count = 0
  for (const [fromSeq, toSeq] of pieces) {
    bulk.push({ fromSeq, toSeq, code })
    count += toSeq - fromSeq + 1
  }
  return count
}

function lossReason(verdict: SlotVerdict): string {
  // Group older-seq losses under one reason so ranges stay long; the exact older seq is in the detail only.
  return verdict.detail.startsWith('older data') || verdict.detail.startsWith('holds older')
    ? 'older data: the write vanished'
    : verdict.detail
}

/**
 * Lost seqs (packed entries with a reason code, and bulk ranges) merged in seq order into ranges; the
 * first detailListLimit kept, their acknowledgement windows not yet known (withAckTimes).
 */
function toRanges(failed: FailedSeqs, bulk: readonly BulkLoss[]): { count: number; ranges: SeqRange[] } {
  const ranges: SeqRange[] = []
  let count = 0
  let open: { fromSeq: number; toSeq: number; code: number } | null = null
  const flush = (): void => {
    if (open === null) return
    count++
    if (ranges.length < detailListLimit) {
      ranges.push({
        fromSeq: open.fromSeq,
        toSeq: open.toSeq,
        count: open.toSeq - open.fromSeq + 1,
        reason: failed.reason(open.code),
        ackedFromMs: Number.NaN,
        ackedToMs: Number.NaN,
      })
    }
    open = null
  }
  const add = (fromSeq: number, toSeq: number, code: number): void => {
    if (open !== null && open.code === code && fromSeq === open.toSeq + 1) {
      open.toSeq = toSeq
      return
    }
    flush()
    open = { fromSeq, toSeq, code }
  }
  const bulkSorted = [...bulk].sort((a, b) => a.fromSeq - b.fromSeq)
  let b = 0
  for (const { fromSeq, toSeq, code } of failed.ascending()) {
    if (code === tornCode || code === corruptCode) continue
    while (b < bulkSorted.length && bulkSorted[b]!.fromSeq < fromSeq) {
      add(bulkSorted[b]!.fromSeq, bulkSorted[b]!.toSeq, bulkSorted[b]!.code)
      b++
    }
    add(fromSeq, toSeq, code)
  }
  for (; b < bulkSorted.length; b++) add(bulkSorted[b]!.fromSeq, bulkSorted[b]!.toSeq, bulkSorted[b]!.code)
  flush()
  return { count, ranges }
}

/** Every failed seq (lost, torn or corrupt) below the highest surviving one, counted exactly. */
function reorderingOf(failed: FailedSeqs, bulk: readonly BulkLoss[], survivedSeq: number): RunReport['reordering'] {
  if (survivedSeq === 0) return null
  let count = 0
  let earliest = Number.POSITIVE_INFINITY
  for (const range of failed.ascending()) {
    if (range.fromSeq >= survivedSeq) break
    count += Math.min(range.toSeq, survivedSeq - 1) - range.fromSeq + 1
    earliest = Math.min(earliest, range.fromSeq)
  }
  for (const range of bulk) {
    if (range.fromSeq >= survivedSeq) continue
    count += Math.min(range.toSeq, survivedSeq - 1) - range.fromSeq + 1
    earliest = Math.min(earliest, range.fromSeq)
  }
  return count === 0 ? null : { count, survivedSeq, earliestLostSeq: earliest }
}

/** The ranges with the window in which the listener received their acks: from the first ack of the first seq to the last of the last. */
async function withAckTimes(
  lost: { count: number; ranges: SeqRange[] },
  acks: AckTimeline,
): Promise<{ count: number; ranges: SeqRange[] }> {
  const windows = await acks.windows(lost.ranges.flatMap((r) => [r.fromSeq, r.toSeq]))
  return {
    count: lost.count,
    ranges: lost.ranges.map((r, i) => ({ ...r, ackedFromMs: windows[2 * i]![0], ackedToMs: windows[2 * i + 1]![1] })),
  }
}
