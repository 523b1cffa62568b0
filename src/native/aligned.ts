/** Buffers aligned for direct I/O, for both ports: Node's allocations are 8- or 16-byte aligned at best, so over-allocate and slice. */
import koffi from 'koffi'

export function alignedBuffer(sizeBytes: number, alignmentBytes: number): Buffer {
  const raw = Buffer.alloc(sizeBytes + alignmentBytes)
  const misalignment = Number(koffi.address(raw) % BigInt(alignmentBytes))
  const start = misalignment === 0 ? 0 : alignmentBytes - misalignment
  return raw.subarray(start, start + sizeBytes)
}
