/** Buffers aligned for O_DIRECT. Node's allocations are almost never 4096-aligned, so we over-allocate and slice. */
import { addressOf } from './libc.js'

export const directAlignmentBytes = 4096

export function alignedBuffer(sizeBytes: number, alignmentBytes = directAlignmentBytes): Buffer {
  const raw = Buffer.alloc(sizeBytes + alignmentBytes)
  const misalignment = Number(addressOf(raw) % BigInt(alignmentBytes))
  const start = misalignment === 0 ? 0 : alignmentBytes - misalignment
  return raw.subarray(start, start + sizeBytes)
}
