/**
 * A record's bytes, as format.ts's header lays them out: the sector stamps, the header, the payload
 * windows of the run's pool and the checksum; where a seq goes (slotOf) and where a slot lies. Apart
 * from the superblock's metadata schema (format.ts, which re-exports all of this) so that verify's
 * scan threads (client/verify/scan-worker.ts) load only this, the checksum and the patterns: no zod,
 * no msgpack, in every thread started.
 */
import { xxh64 } from './checksum.js'
import type { Pattern } from './patterns.js'

export const sectorBytes = 512
export const formatVersion = 1
export const sectorMagic = 0x31534350 // "PCS1" little endian
export const recordMagic = 0x31524350 // "PCR1" little endian
export const stampBytes = 24
export const writeTimeOffset = 48
export const checksumBytes = 8

export function slotOffsetBytes(recordSizeBytes: number, slot: number): number {
  return recordSizeBytes * (1 + slot)
}

function fmix32(x: number): number {
  x ^= x >>> 16
  x = Math.imul(x, 0x85ebca6b)
  x ^= x >>> 13
  x = Math.imul(x, 0xc2b2ae35)
  x ^= x >>> 16
  return x >>> 0
}

/** Run id as two 32-bit halves, the form the hot loops use, and the run's payload pool. */
export interface RunKey {
  readonly runId: string
  readonly idBytes: Buffer
  readonly hi: number
  readonly lo: number
  readonly pool: Uint32Array
  /**
   * The pool followed by the fill's scratch area (fillChunkSectors sectors), in one array: the fill
   * copies windows with copyWithin, which allocates nothing, where a subarray per sector did.
   */
  readonly poolAndScratch: Uint32Array
}

export const payloadPoolBytes = 1024 * 1024
const poolWindowCount = (payloadPoolBytes - sectorBytes) / 4 + 1
const poolWords = payloadPoolBytes / 4
/** Sectors the fill builds in the scratch area before copying them into the record at once (8 KiB). */
const fillChunkSectors = 16

export function runKey(runId: string): RunKey {
  const idBytes = Buffer.from(runId, 'hex')
  const hi = idBytes.readUInt32LE(4)
  const lo = idBytes.readUInt32LE(0)
  const poolAndScratch = payloadPool(hi, lo)
  return { runId, idBytes, hi, lo, pool: poolAndScratch.subarray(0, poolWords), poolAndScratch }
}

/** 1 MiB of pseudo-random words from the run id (a counter through murmur3's finaliser), then the fill's scratch area. */
function payloadPool(hi: number, lo: number): Uint32Array {
  const words = new Uint32Array(poolWords + fillChunkSectors * (sectorBytes / 4))
  const k0 = fmix32(lo ^ 0x6a09e667)
  const k1 = fmix32(hi ^ 0xbb67ae85) | 1
  for (let i = 0; i < poolWords; i++) words[i] = fmix32((k0 + Math.imul(i, k1)) >>> 0)
  return words
}

/**
 * The slot a seq is written to. append: in order, wrapping when the file is full. files: as append,
 * the record file's place in the kept window (files-layout.ts), so its bytes are an append record's.
 * overwrite: pseudo-random from (run, seq), as diskchecker.pl picks random offsets.
 */
export function slotOf(key: RunKey, pattern: Pattern, seq: number, slotCount: number): number {
  if (pattern !== 'overwrite') return (seq - 1) % slotCount
  const seqLo = seq >>> 0
  const seqHi = Math.floor(seq / 0x1_0000_0000)
  const h = fmix32(fmix32(key.lo ^ seqLo) ^ Math.imul(key.hi ^ seqHi, 0x9e3779b1))
  return h % slotCount
}

/** Writes a complete record for (run, seq, slot) into out (length recordSizeBytes, 4-byte aligned). */
export function fillRecord(out: Buffer, key: RunKey, seq: number, slot: number, writeTimeUs: number): void {
  fillPayloadAndStamps(out, key, seq)
  out.writeUInt32LE(recordMagic, 24)
  out.writeUInt16LE(formatVersion, 28)
  out.writeUInt16LE(0, 30)
  out.writeUInt32LE(out.length, 32)
  out.writeUInt32LE(0, 36)
  writeU64(out, slot, 40)
  writeU64(out, writeTimeUs, writeTimeOffset)
  out.writeBigUInt64LE(xxh64(out.subarray(0, out.length - checksumBytes)), out.length - checksumBytes)
}

function writeU64(out: Buffer, value: number, offset: number): void {
  out.writeUInt32LE(value >>> 0, offset)
  out.writeUInt32LE(Math.floor(value / 0x1_0000_0000), offset + 4)
}

export function readU64(bytes: Buffer, offset: number): number {
  return bytes.readUInt32LE(offset) + bytes.readUInt32LE(offset + 4) * 0x1_0000_0000
}

const wordsPerSector = sectorBytes / 4

function fillPayloadAndStamps(out: Buffer, key: RunKey, seq: number): void {
  if (out.byteOffset % 4 !== 0) throw new Error('record buffers must be 4-byte aligned')
  const words = new Uint32Array(out.buffer, out.byteOffset, out.length >>> 2)
  const seqLo = seq >>> 0
  const seqHi = Math.floor(seq / 0x1_0000_0000)
  const seqKey = payloadSeqKey(key, seq)
  const all = key.poolAndScratch
  for (let k = 0, w = 0; w < words.length; ) {
    const chunkWords = Math.min(words.length - w, fillChunkSectors * wordsPerSector)
    for (let s = poolWords; s < poolWords + chunkWords; s += wordsPerSector, k++) {
      const window = payloadWindowWord(seqKey, k)
      all.copyWithin(s, window, window + wordsPerSector)
      all[s] = sectorMagic
      all[s + 1] = k
      all[s + 2] = key.lo
      all[s + 3] = key.hi
      all[s + 4] = seqLo
      all[s + 5] = seqHi
    }
    words.set(all.subarray(poolWords, poolWords + chunkWords), w)
    w += chunkWords
  }
}

/**
 * What fillRecord puts in record seq's payload, for readers that compare without regenerating:
 * sector k's 512 bytes are the pool's words [payloadWindowWord(payloadSeqKey(key, seq), k), +128)
 * before the stamp, header and checksum overwrite their parts. (The fill above uses these two.)
 */
export function payloadSeqKey(key: RunKey, seq: number): number {
  return fmix32(fmix32((seq >>> 0) ^ key.lo) ^ Math.imul(Math.floor(seq / 0x1_0000_0000) ^ key.hi, 0x9e3779b1))
}

export function payloadWindowWord(seqKey: number, sector: number): number {
  return fmix32((seqKey + Math.imul(sector, 0x85ebca6b)) >>> 0) % poolWindowCount
}

export function recordChecksumValid(bytes: Buffer): boolean {
  const end = bytes.length - checksumBytes
  return xxh64(bytes.subarray(0, end)) === bytes.readBigUInt64LE(end)
}

/** A sector's stamp, or null when the sector does not start with one. */
export interface SectorStamp {
  readonly sectorIndex: number
  readonly runLo: number
  readonly runHi: number
  readonly seq: number
}

export function readStamp(bytes: Buffer, sectorStart: number): SectorStamp | null {
  if (bytes.readUInt32LE(sectorStart) !== sectorMagic) return null
  return {
    sectorIndex: bytes.readUInt32LE(sectorStart + 4),
    runLo: bytes.readUInt32LE(sectorStart + 8),
    runHi: bytes.readUInt32LE(sectorStart + 12),
    seq: readU64(bytes, sectorStart + 16),
  }
}

export function isZero(bytes: Buffer): boolean {
  for (let i = 0; i < bytes.length; i++) if (bytes[i] !== 0) return false
  return true
}
