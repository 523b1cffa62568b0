/**
 * The fast path of verify: is this slot exactly one whole, checksum-valid record of our run, written
 * for this slot? Almost every slot of a healthy file is, so the question is answered by comparing
 * the bytes read with the run's payload pool where they lie (stamps and header word by word, the
 * payload windows copied from the pool and compared with one memcmp) and hashing them once for the checksum, without
 * regenerating the record into a buffer and without hashing it twice.
 *
 * It is only a filter: `null` means "not provably whole", and the caller then classifies the slot the
 * slow way (Classifier), which decides every damaged case. A non-null answer is given exactly when
 * the slow way finds a whole record of that seq with a valid checksum, so the verdict is the same
 * either way (test/unit/record/scan.test.ts compares the two on randomly damaged files).
 */
import { xxh64 } from './checksum.js'
import {
  checksumBytes,
  formatVersion,
  payloadSeqKey,
  payloadWindowWord,
  recordMagic,
  sectorBytes,
  sectorMagic,
  slotOf,
  type RunKey,
} from './records.js'
import type { Pattern } from './patterns.js'

const wordsPerSector = sectorBytes / 4
const stampWords = 6
/** Sector 0's words [6, 12) are the header, [12, 14) the write time (checked by the checksum only). */
const headerEndWords = 14
const checksumWords = checksumBytes / 4
/** Above this a seq is not a safe integer: such a record is left to the slow path, which never finds it whole. */
const maxSeqHi = 2 ** 21

export class WholeRecordCheck {
  /** The run's pool followed by one record's scratch area, in one array: windows are copied with copyWithin, which allocates nothing. */
  private readonly poolAndScratch: Uint32Array
  private readonly scratchWord: number
  private readonly scratchBytes: Buffer

  constructor(
    private readonly key: RunKey,
    private readonly recordSizeBytes: number,
    private readonly pattern: Pattern,
    private readonly slotCount: number,
  ) {
    this.scratchWord = key.pool.length
    this.poolAndScratch = new Uint32Array(key.pool.length + recordSizeBytes / 4)
    this.poolAndScratch.set(key.pool)
    this.scratchBytes = Buffer.from(this.poolAndScratch.buffer, this.scratchWord * 4, recordSizeBytes)
  }

  /**
   * seqOf for each of `slots` slots from firstSlot, the chunk holding them back to back from its
   * start (shorter when the file ends inside it): the record's seq, or 0 where seqOf gives null (no
   * record has seq 0). What verify's threads return for a chunk (client/verify/scan-threads.ts). One word
   * view of the whole chunk, no view per record.
   */
  seqsOf(chunk: Buffer, firstSlot: number, slots: number): Float64Array<ArrayBuffer> {
    const seqs = new Float64Array(slots)
    if (chunk.byteOffset % 4 !== 0) return seqs
    const words = new Uint32Array(chunk.buffer, chunk.byteOffset, chunk.length >>> 2)
    const size = this.recordSizeBytes
    for (let i = 0, start = 0; i < slots && start + size <= chunk.length; i++, start += size)
      seqs[i] = this.seqAt(chunk, words, start, firstSlot + i) ?? 0
    return seqs
  }

  /** The seq of the record bytes hold when they are exactly one of ours for slot with a valid checksum; else null. */
  seqOf(bytes: Buffer, slot: number): number | null {
    if (bytes.length !== this.recordSizeBytes || bytes.byteOffset % 4 !== 0) return null
    return this.seqAt(bytes, new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.length >>> 2), 0, slot)
  }

  /** seqOf of the record at byte offset start of bytes (whose words are `words`). */
  private seqAt(bytes: Buffer, words: Uint32Array, start: number, slot: number): number | null {
    const size = this.recordSizeBytes
    const w0 = start >>> 2
    const wEnd = w0 + (size >>> 2)
    const { lo, hi } = this.key
    if (words[w0] !== sectorMagic || words[w0 + 1] !== 0 || words[w0 + 2] !== lo || words[w0 + 3] !== hi) return null
    const seqLo = words[w0 + 4]!
    const seqHi = words[w0 + 5]!
    if (seqHi >= maxSeqHi || (seqLo === 0 && seqHi === 0)) return null
    const seq = seqHi * 0x1_0000_0000 + seqLo
    if (slotOf(this.key, this.pattern, seq, this.slotCount) !== slot) return null
    // Sector 0's header: record magic, version and reserved u16 (0), size, reserved, slot (u64).
    if (words[w0 + 6] !== recordMagic || words[w0 + 7] !== formatVersion || words[w0 + 8] !== size || words[w0 + 9] !== 0) return null
    if (words[w0 + 10] !== slot >>> 0 || words[w0 + 11] !== Math.floor(slot / 0x1_0000_0000)) return null
    for (let w = w0 + wordsPerSector, k = 1; w < wEnd; w += wordsPerSector, k++) {
      if (
        words[w] !== sectorMagic ||
        words[w + 1] !== k ||
        words[w + 2] !== lo ||
        words[w + 3] !== hi ||
        words[w + 4] !== seqLo ||
        words[w + 5] !== seqHi
      )
        return null
    }
    // The payload: the pool's windows copied into scratch (copyWithin in one array), the checked
    // fields taken from the bytes themselves (the write time and checksum are what the hash below
    // checks), then one memcmp. Copying measured faster than a memcmp per sector or a word loop,
    // and hashes nothing.
    const all = this.poolAndScratch
    const base = this.scratchWord
    const seqKey = payloadSeqKey(this.key, seq)
    for (let k = 0, w = 0; w0 + w < wEnd; k++, w += wordsPerSector) {
      const window = payloadWindowWord(seqKey, k)
      all.copyWithin(base + w + stampWords, window + stampWords, window + wordsPerSector)
      for (let i = w; i < w + stampWords; i++) all[base + i] = words[w0 + i]!
    }
    for (let i = stampWords; i < headerEndWords; i++) all[base + i] = words[w0 + i]!
    for (let i = (size >>> 2) - checksumWords; i < size >>> 2; i++) all[base + i] = words[w0 + i]!
    if (bytes.compare(this.scratchBytes, 0, size, start, start + size) !== 0) return null
    const end = start + size - checksumBytes
    return xxh64(new Uint8Array(bytes.buffer, bytes.byteOffset + start, size - checksumBytes)) === bytes.readBigUInt64LE(end) ? seq : null
  }
}
