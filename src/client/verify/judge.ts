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
 * (memory scales with the slot count, which runMetaSchema bounds: slot-plan.ts). Slots past the end of
 * an append file are counted as ranges, not one by one. Failed seqs are kept packed in a Float64Array
 * (failed-seqs.ts). The report's shape is run-report.ts; the file is read by data-file-read.ts.
 */
import { closeSync, fstatSync } from 'node:fs'
import type { StoredRun } from '../../protocol/messages.js'
import { timelineOfSpans, type AckTimeline } from './ack-timeline.js'
import { Classifier, runLayout, wholeVerdict, type RunLayout, type SlotVerdict } from '../../record/classify.js'
import type { RunMeta, SuperblockReading } from '../../record/format.js'
import { runKey, type RunKey } from '../../record/records.js'
import { describeSystemError, runtimeError } from '../../base/errors.js'
import { assert } from '../../base/assert.js'
import { WholeRecordCheck } from '../../record/scan.js'
import { readAhead } from './read-ahead.js'
import { findingOf, roleOf, runVerdict } from './verdict-rules.js'
import { chunkBuffers, inThreadChecker, scanThreadCount, startScanThreads, type ChunkChecker } from './scan-threads.js'
import { maxDetailList, type RecordFinding, type RunReport, type SeqRange } from './run-report.js'
import { openDataFile, readSuperblockFd, type UnreadableFile } from './data-file-read.js'
import { appendPlan, chunksToRead, overwritePlan, type SlotChunk, type SlotPlan } from './slot-plan.js'
import { rereadBudget, rereadChunk, type RereadBudget } from './unreadable-slots.js'
import { addAppendBulk, corruptCode, FailedSeqs, reorderingOf, toRanges, tornCode, type BulkLoss } from './failed-seqs.js'

/**
 * Large reads, several in flight (read-ahead.ts): the disk streams while earlier chunks are checked,
 * on other threads when there are cores for them (scan-threads.ts).
 */
const defaultReadChunkBytes = 16 * 1024 * 1024
const readsInFlight = 2
/**
 * Seqs above this cannot be real: 2^45 is more than a year at a million records a second (the fastest
 * writer reaches ~40k/s). It also keeps (seq, code) packable into one double.
 */
export const maxJudgedSeq = 2 ** 45

export interface JudgeOptions {
  readonly nowMs?: number
  readonly rebootedSinceWrite?: boolean | null
  /** Tests: smaller reads, so a small file spans many chunks (rounded down to whole records). */
  readonly readChunkBytes?: number
  /** The run's acks, when its spans are not in run.spans (a long run's, read page by page: ack-timeline.ts). */
  readonly acks?: AckTimeline
}

/**
 * How long the run went on by the listener's clock (the machine that kept power): from its
 * announcement to its last ack or its end. Bounds the write times of its records (runLayout).
 */
export function listenedRunMs(run: StoredRun): number {
  // A long run's spans may be left out of the reply (read page by page): its lastAckMs says the same.
  const lastMs = Math.max(run.end?.atMs ?? 0, run.spans.at(-1)?.[3] ?? 0, run.lastAckMs ?? 0)
  return Math.max(0, lastMs - run.announcedMs)
}

/** What judging a run's slots has found so far: exact counts, the first maxDetailList findings of each kind, the failed seqs packed. */
interface SlotTally {
  readonly failed: FailedSeqs
  readonly bulk: BulkLoss[]
  readonly torn: RecordFinding[]
  readonly corrupt: RecordFinding[]
  readonly interrupted: RecordFinding[]
  /** Records the storage would not return (a read failed with EIO, EBADMSG, ...): counted in lostCount too. */
  readonly unreadable: RecordFinding[]
  intact: number
  lostCount: number
  unreadableCount: number
  tornCount: number
  corruptCount: number
  interruptedCount: number
  maxSurvivingSeq: number
}

/** A tally with nothing found yet; coalesce: failed seqs come in seq order (append), so runs of them pack into one entry. */
function emptyTally(coalesce: boolean): SlotTally {
  return {
    failed: new FailedSeqs(coalesce),
    bulk: [],
    torn: [],
    corrupt: [],
    interrupted: [],
    unreadable: [],
    intact: 0,
    lostCount: 0,
    unreadableCount: 0,
    tornCount: 0,
    corruptCount: 0,
    interruptedCount: 0,
    maxSurvivingSeq: 0,
  }
}

/** One run being judged: its metadata, which seq each slot is judged by, and the tally so far. */
interface Judging {
  readonly meta: RunMeta
  readonly key: RunKey
  readonly recordSize: number
  readonly throughSeq: number
  readonly plan: SlotPlan
  readonly tally: SlotTally
  /** Slot-by-slot reads left for chunks the storage would not return (unreadable-slots.ts). */
  readonly rereads: RereadBudget
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
  // A files run has no data file: judge-files.ts judges its directory (verify.ts chooses).
  assert(meta.pattern !== 'files', () => `judgeRun was given files run ${meta.runId}`)
  const plan = meta.pattern === 'append' ? appendPlan(meta.slotCount, throughSeq) : overwritePlan(key, meta, throughSeq)

  const tally = emptyTally(meta.pattern === 'append')
  const judging: Judging = { meta, key, recordSize, throughSeq, plan, tally, rereads: rereadBudget() }

  let superblock: { kind: string; detail: string; runId?: string } = { kind: 'missing', detail: 'the data file does not exist' }
  const fd = openDataFile(meta.path)
  if (fd === null) {
    loseFrom(judging, 0, 'the data file is missing')
  } else if (typeof fd !== 'number') {
    // The storage lost the file's inode (EBADMSG, EIO at open): every record is as gone as with no file.
    superblock = fd
    tally.unreadableCount += loseFrom(judging, 0, `the storage could not read it back: ${fd.detail}`)
  } else {
    try {
      superblock = await judgeFile(judging, fd, runLayout(meta, nowMs, listenedRunMs(run)), options.readChunkBytes ?? defaultReadChunkBytes)
    } finally {
      closeSync(fd)
    }
  }

  const { failed, bulk } = tally
  const { count: lostRangeCount, ranges: lostRanges } = await withAckTimes(toRanges(failed, bulk), acks)
  const reordering = reorderingOf(failed, bulk, tally.maxSurvivingSeq)
  const role = roleOf(meta.method)
  const verdict = runVerdict(
    role,
    findingOf(
      acked,
      tally.lostCount + tally.tornCount + tally.corruptCount,
      superblock.kind === 'valid',
      run.end?.reason === 'storage-lost',
    ),
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
    intact: tally.intact,
    lost: tally.lostCount,
    unreadable: tally.unreadableCount,
    torn: tally.tornCount,
    corrupt: tally.corruptCount,
    interrupted: tally.interruptedCount,
    verdict,
    superblock,
    lostRangeCount,
    lostRanges,
    tornRecords: tally.torn,
    corruptRecords: tally.corrupt,
    interruptedRecords: tally.interrupted,
    unreadableRecords: tally.unreadable,
    reordering,
  }
}

/** Slots [first, plan.slotLimit) all lost for reason: counted as ranges in append, one seq per slot in overwrite. Returns how many. */
function loseFrom({ meta, plan, throughSeq, tally }: Judging, first: number, reason: string): number {
  const code = tally.failed.reasonCode(reason)
  if (meta.pattern === 'append') {
    const lost = addAppendBulk(tally.bulk, meta.slotCount, throughSeq, first, plan.slotLimit, code)
    tally.lostCount += lost
    return lost
  }
  let lost = 0
  for (let slot = first; slot < plan.slotLimit; slot++) {
    const seq = plan.lastAcked(slot)
    if (seq === 0) continue
    tally.failed.push(seq, code)
    lost++
  }
  tally.lostCount += lost
  return lost
}

/** What the superblock says of the run being judged: its own, another run's, damaged or unreadable. */
export function superblockFinding(
  reading: SuperblockReading | UnreadableFile | { readonly kind: 'missing'; readonly detail: string },
  meta: RunMeta,
): { kind: string; detail: string; runId?: string } {
  return reading.kind === 'valid'
    ? reading.meta.runId === meta.runId
      ? { kind: 'valid', detail: `superblock of run ${meta.runId}` }
      : {
          kind: 'other-run',
          runId: reading.meta.runId,
          detail: `the file holds run ${reading.meta.runId} (created ${new Date(reading.meta.createdMs).toISOString()}), not run ${meta.runId}: the new file did not survive`,
        }
    : { kind: reading.kind, detail: reading.detail }
}

/** Judges every slot of an open data file, in file order; slots past its end are lost. Returns what its superblock says. */
async function judgeFile(
  judging: Judging,
  fd: number,
  layout: RunLayout,
  readChunkBytes: number,
): Promise<{ kind: string; detail: string; runId?: string }> {
  const { meta, key, recordSize, plan } = judging
  let fileSizeBytes: number
  try {
    fileSizeBytes = fstatSync(fd).size
  } catch (error) {
    throw runtimeError(`could not stat ${meta.path}: ${describeSystemError(error)}`)
  }
  const superblock = superblockFinding(readSuperblockFd(fd, meta.path), meta)

  // Slots from here on start at or past the end of the file.
  const firstSlotPastEnd = Math.max(0, Math.ceil(fileSizeBytes / recordSize) - 1)
  const readLimit = Math.min(plan.slotLimit, firstSlotPastEnd)
  // The slow path, for the slots the whole-record check did not accept.
  const classifier = new Classifier(key, recordSize, layout, { fastPath: false })
  const chunkBytes = readChunkBytes - (readChunkBytes % recordSize) || recordSize
  await scanChunks(judging, fd, readLimit, chunkBytes, (request, chunk, accepted, unreadable) =>
    judgeChunk(judging, classifier, request, chunk, accepted, unreadable),
  )
  if (readLimit < plan.slotLimit) loseFrom(judging, readLimit, 'past the end of the file')
  return superblock
}

/**
 * Reads slots [0, readLimit) a chunk at a time, several reads in flight, each chunk's whole-record
 * check on the scan threads when there are cores for them, and hands each chunk to judge in file order.
 */
async function scanChunks(
  { meta, key, recordSize, plan, rereads }: Judging,
  fd: number,
  readLimit: number,
  chunkBytes: number,
  judgeChunk: (request: SlotChunk, chunk: Buffer, accepted: Float64Array, unreadable: ReadonlyMap<number, string> | null) => void,
): Promise<void> {
  const threads = scanThreadCount(readLimit * recordSize, chunkBytes)
  const checker: ChunkChecker =
    threads > 0
      ? startScanThreads({ runId: meta.runId, recordSizeBytes: recordSize, pattern: meta.pattern, slotCount: meta.slotCount }, threads)
      : inThreadChecker(new WholeRecordCheck(key, recordSize, meta.pattern, meta.slotCount))
  try {
    // Chunks out to the threads, judged in file order: each stays unread-over while it is held.
    const heldChunks = threads + 1
    const held: {
      request: SlotChunk
      bytes: Buffer
      unreadable: ReadonlyMap<number, string> | null
      accepted: Promise<Float64Array>
    }[] = []
    const judgeOldest = async (): Promise<void> => {
      const { request, bytes, unreadable, accepted } = held.shift()!
      judgeChunk(request, bytes, await accepted, unreadable)
    }
    // No chunk is longer than the slots there are to read: a small file gets small buffers, not 16 MiB ones.
    const bufferBytes = Math.min(chunkBytes, Math.max(1, readLimit) * recordSize)
    const buffers = chunkBuffers(readsInFlight + heldChunks, bufferBytes, threads > 0)
    for await (const chunk of readAhead(fd, meta.path, chunksToRead(plan, recordSize, readLimit, chunkBytes), buffers, readsInFlight)) {
      const { request } = chunk
      // A stretch the storage would not return is read again slot by slot: each record it cannot give back is unreadable.
      const reread =
        chunk.unreadable === undefined
          ? null
          : rereadChunk(fd, meta.path, plan, recordSize, { request, bytes: chunk.bytes, chunkError: chunk.unreadable.error }, rereads)
      const bytes = reread?.bytes ?? chunk.bytes
      held.push({
        request,
        bytes,
        unreadable: reread?.unreadable ?? null,
        accepted: checker.check(bytes, request.firstSlot, request.lastSlot - request.firstSlot + 1),
      })
      if (held.length === heldChunks) await judgeOldest()
    }
    while (held.length > 0) await judgeOldest()
  } finally {
    await checker.close()
  }
}

/**
 * Classifies each slot of one chunk by its last acknowledged seq: the whole-record check's answer
 * where it accepted the slot, else the Classifier's; and tallies what it found.
 */
function judgeChunk(
  { plan, recordSize, tally }: Judging,
  classifier: Classifier,
  { firstSlot, lastSlot, offsetBytes: chunkOffset }: SlotChunk,
  chunk: Buffer,
  accepted: Float64Array,
  unreadable: ReadonlyMap<number, string> | null,
): void {
  const { failed, torn, corrupt, interrupted } = tally
  const got = chunk.length
  for (let slot = firstSlot; slot <= lastSlot; slot++) {
    const seq = plan.lastAcked(slot)
    if (seq === 0) continue
    const start = (slot - firstSlot) * recordSize
    const unreadableWhy = unreadable?.get(slot)
    if (unreadableWhy !== undefined) {
      // Acknowledged and not returned by the storage: lost, and counted apart as unreadable.
      tally.lostCount++
      tally.unreadableCount++
      failed.push(seq, failed.reasonCode(unreadableWhy))
      if (tally.unreadable.length < maxDetailList)
        tally.unreadable.push({ seq, slot, offsetBytes: chunkOffset + start, lengthBytes: recordSize, detail: unreadableWhy })
      continue
    }
    const found = accepted[slot - firstSlot]!
    const verdict: SlotVerdict =
      found > 0
        ? wholeVerdict(found, seq)
        : classifier.classify(chunk.subarray(start, Math.max(start, Math.min(got, start + recordSize))), slot, seq)
    if (verdict.kind === 'intact') {
      tally.intact++
      tally.maxSurvivingSeq = Math.max(tally.maxSurvivingSeq, verdict.foundSeq ?? seq)
      continue
    }
    const finding: RecordFinding = { seq, slot, offsetBytes: chunkOffset + start, lengthBytes: recordSize, detail: verdict.detail }
    switch (verdict.kind) {
      case 'interrupted':
        tally.interruptedCount++
        tally.maxSurvivingSeq = Math.max(tally.maxSurvivingSeq, seq)
        if (interrupted.length < maxDetailList) interrupted.push(finding)
        break
      case 'lost':
        tally.lostCount++
        failed.push(seq, failed.reasonCode(lossReason(verdict)))
        break
      case 'torn':
        tally.tornCount++
        failed.push(seq, tornCode)
        if (torn.length < maxDetailList) torn.push(finding)
        break
      case 'corrupt':
        tally.corruptCount++
        failed.push(seq, corruptCode)
        if (corrupt.length < maxDetailList) corrupt.push(finding)
        break
    }
  }
}

function lossReason(verdict: SlotVerdict): string {
  // Group older-seq losses under one reason so ranges stay long; the exact older seq is in the detail only.
  return verdict.detail.startsWith('older data') || verdict.detail.startsWith('holds older')
    ? 'older data: the write vanished'
    : verdict.detail
}

/** The ranges with the window in which the listener received their acks: from the first ack of the first seq to the last of the last. */
export async function withAckTimes(
  lost: { count: number; ranges: SeqRange[] },
  acks: AckTimeline,
): Promise<{ count: number; ranges: SeqRange[] }> {
  const windows = await acks.windows(lost.ranges.flatMap((r) => [r.fromSeq, r.toSeq]))
  return {
    count: lost.count,
    ranges: lost.ranges.map((r, i) => ({ ...r, ackedFromMs: windows[2 * i]![0], ackedToMs: windows[2 * i + 1]![1] })),
  }
}
