/**
 * alignedBuffer: a zero-filled buffer of exactly the size asked whose first byte's address is a
 * multiple of the alignment (O_DIRECT and FILE_FLAG_NO_BUFFERING refuse anything else), inside its own
 * allocation so writing it whole touches no other buffer. Addresses are read with koffi.address.
 */
import koffi from 'koffi'
import t from 'tap'
import { alignedBuffer } from '../../../src/native/aligned.js'

const alignments = [512, 4096, 65_536]
const sizes = [1, 511, 512, 4096, 8192, 1_048_576]

t.test('every size and alignment: the size asked, aligned, zero-filled', async (t) => {
  for (const alignmentBytes of alignments) {
    for (const sizeBytes of sizes) {
      const name = `${sizeBytes} bytes at ${alignmentBytes}`
      const buffer = alignedBuffer(sizeBytes, alignmentBytes)
      t.equal(buffer.length, sizeBytes, `${name}: length`)
      t.equal(koffi.address(buffer) % BigInt(alignmentBytes), 0n, `${name}: address`)
      t.ok(
        buffer.every((b) => b === 0),
        `${name}: zeros`,
      )
    }
  }
})

t.test('an empty buffer is empty', async (t) => {
  for (const alignmentBytes of alignments) t.equal(alignedBuffer(0, alignmentBytes).length, 0)
})

t.test('many buffers in a row are each aligned: the slice depends on where each one landed', async (t) => {
  let misaligned = 0
  const kept: Buffer[] = []
  for (let i = 0; i < 200; i++) {
    // Small odd allocations between them move where the next one lands.
    kept.push(Buffer.alloc(1 + (i % 7) * 3))
    const buffer = alignedBuffer(4096, 4096)
    if (koffi.address(buffer) % 4096n !== 0n) misaligned++
    kept.push(buffer)
  }
  t.equal(misaligned, 0)
})

t.test('buffers are their own: filling one whole leaves the next untouched', async (t) => {
  const a = alignedBuffer(4096, 4096)
  const b = alignedBuffer(4096, 4096)
  a.fill(0xaa)
  t.ok(
    b.every((x) => x === 0),
    'b is still zero',
  )
  const start = koffi.address(a)
  const other = koffi.address(b)
  t.ok(other >= start + 4096n || other + 4096n <= start, 'they do not overlap')
  t.ok(
    a.every((x) => x === 0xaa),
    'a holds what was written',
  )
})
