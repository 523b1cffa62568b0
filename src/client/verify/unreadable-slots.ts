/**
 * A chunk of the data file the storage would not return (read-ahead.ts: EIO, EBADMSG, ...), read
 * again one slot at a time, so that each acknowledged record the storage cannot give back is named and
 * every record it can is still judged. A record that cannot be read back is lost: the storage
 * acknowledged its sync and cannot return it.
 *
 * Fault model: a dying disk may fail every read, and each failed read may take seconds. So the slot
 * reads are bounded per run (maxSlotRereads failed ones): past that, the acknowledged slots of a chunk
 * that fails are counted unreadable without being read again, their reason saying so. Slots no
 * acknowledged seq is judged by are never read again: a read error there changes nothing.
 */
import { readSync } from 'node:fs'
import { describeSystemError, runtimeError } from '../../base/errors.js'
import { isUnreadable } from './read-ahead.js'
import type { SlotChunk, SlotPlan } from './slot-plan.js'

/** Failed slot reads per run before the rest of the unreadable chunks are counted without reading them again. */
export const maxSlotRereads = 1000
/** Overrides maxSlotRereads (a whole number); for tests, which show the bound on a small file. */
export const maxSlotRereadsEnv = 'PLUGCHECK_VERIFY_MAX_REREADS'

/** What a run's slot-by-slot reading may still spend: failed slot reads left, of limit. */
export interface RereadBudget {
  readonly limit: number
  failedReadsLeft: number
}

export function rereadBudget(): RereadBudget {
  const override = process.env[maxSlotRereadsEnv]
  const limit = override !== undefined && /^\d+$/.test(override) ? Number(override) : maxSlotRereads
  return { limit, failedReadsLeft: limit }
}

export interface RereadChunk {
  /** The chunk's bytes, read slot by slot; an unreadable slot's bytes are zeros (never judged). */
  readonly bytes: Buffer
  /** Per unreadable acknowledged slot, why: the errno of its read, or of its chunk's read when it was not read again. */
  readonly unreadable: ReadonlyMap<number, string>
}

/** Reads each acknowledged slot of chunk again into bytes (the chunk's buffer, request.lengthBytes long). */
export function rereadChunk(
  fd: number,
  path: string,
  plan: SlotPlan,
  recordSize: number,
  chunk: { readonly request: SlotChunk; readonly bytes: Buffer; readonly chunkError: unknown },
  budget: RereadBudget,
): RereadChunk {
  const { request, bytes, chunkError } = chunk
  const unreadable = new Map<number, string>()
  bytes.fill(0)
  let got = bytes.length
  for (let slot = request.firstSlot; slot <= request.lastSlot; slot++) {
    if (plan.lastAcked(slot) === 0) continue
    const start = (slot - request.firstSlot) * recordSize
    if (budget.failedReadsLeft === 0) {
      unreadable.set(
        slot,
        `the storage could not read it back: ${describeSystemError(chunkError)} reading its stretch of the file (not read again record by record after ${budget.limit} unreadable records)`,
      )
      continue
    }
    const read = readSlot(fd, path, bytes, start, recordSize, request.offsetBytes + start)
    if (typeof read !== 'number') {
      budget.failedReadsLeft--
      bytes.fill(0, start, start + recordSize)
      unreadable.set(slot, `the storage could not read it back: ${describeSystemError(read.error)}`)
    } else if (read < recordSize) {
      // The end of the file: nothing past it is read.
      got = start + read
      break
    }
  }
  return { bytes: bytes.subarray(0, got), unreadable }
}

/** Reads one slot's bytes; the bytes read (short at the end of the file), or the error that makes it unreadable. */
function readSlot(
  fd: number,
  path: string,
  bytes: Buffer,
  start: number,
  recordSize: number,
  offsetBytes: number,
): number | { readonly error: unknown } {
  let done = 0
  try {
    while (done < recordSize) {
      const n = readSync(fd, bytes, start + done, recordSize - done, offsetBytes + done)
      if (n === 0) break
      done += n
    }
  } catch (error) {
    if (isUnreadable(error)) return { error }
    throw runtimeError(`could not read ${path} at offset ${offsetBytes + done}: ${describeSystemError(error)}`)
  }
  return done
}
