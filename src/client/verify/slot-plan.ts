/**
 * Which seq each slot is judged by, and which stretches of the file are read for it. Nothing loops
 * over the acknowledged seqs: acks are contiguous 1..N, so in append the last acknowledged seq of each
 * slot is arithmetic, and in overwrite seqs are walked backwards from N only until every slot has its
 * last one (memory scales with the slot count, which runMetaSchema bounds).
 */
import { runtimeError } from '../../base/errors.js'
import type { RunMeta } from '../../record/format.js'
import { slotOf, slotOffsetBytes, type RunKey } from '../../record/records.js'
import type { ChunkRequest } from './read-ahead.js'

/** Overwrite: the backward walk stops once every slot has a seq; with a fair slot hash that takes ~slotCount * ln(slotCount) seqs. */
const overwriteWalkFactor = 64

/** The last acknowledged seq of each slot, without a loop over acknowledged seqs. */
export interface SlotPlan {
  /** Slots [0, slotLimit) are the only ones that may be judged. */
  readonly slotLimit: number
  readonly judged: number
  /** The last acknowledged seq of slot, 0 when none. */
  lastAcked(slot: number): number
}

export function appendPlan(slotCount: number, throughSeq: number): SlotPlan {
  const judged = Math.min(throughSeq, slotCount)
  return {
    slotLimit: judged,
    judged,
    // Seqs s+1, s+1+slotCount, ... go to slot s; the last of them at or below throughSeq.
    lastAcked: (slot) => (slot < judged ? slot + 1 + Math.floor((throughSeq - slot - 1) / slotCount) * slotCount : 0),
  }
}

export function overwritePlan(key: RunKey, meta: RunMeta, throughSeq: number): SlotPlan {
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

export interface SlotChunk extends ChunkRequest {
  readonly firstSlot: number
  readonly lastSlot: number
}

/** Whole-record chunks of slots [0, readLimit), skipping those without an acknowledged seq to judge. */
export function* chunksToRead(plan: SlotPlan, recordSize: number, readLimit: number, chunkBytes: number): Generator<SlotChunk> {
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
