/**
 * The data file's on-disk format, in one place.
 *
 * File:   block 0 is the superblock; record slot i lives at recordSizeBytes * (1 + i).
 *
 * Superblock (recordSizeBytes long, rest zero), little endian:
 *   offset size field
 *   0      8    magic "PLUGCHK\0"
 *   8      2    format version (1)
 *   10     2    reserved, 0
 *   12     4    metadata length in bytes (msgpack)
 *   16     8    xxh64 of the metadata bytes
 *   24     n    metadata, msgpack: RunMeta (run id, group and place in it, method, pattern, sizes, host, path, time)
 *
 * Record (recordSizeBytes, a multiple of 512). Every 512-byte sector k starts with a stamp:
 *   0      4    sector magic "PCS1"
 *   4      4    sector index k within the record
 *   8      8    run id (8 bytes)
 *   16     8    seq (u64)
 * Sector 0 continues with the record header:
 *   24     4    record magic "PCR1"
 *   28     2    format version (1)
 *   30     2    reserved, 0
 *   32     4    record size in bytes
 *   36     4    reserved, 0
 *   40     8    slot (u64)
 *   48     8    write time, microseconds since the epoch (u64; not derivable, masked when comparing)
 * The last 8 bytes of the record: xxh64 over bytes [0, recordSizeBytes - 8) (masked when comparing).
 * Every other byte is payload: each sector's rest is a 512-byte window of a 1 MiB pseudo-random
 * pool derived from the run id, at a 4-byte-aligned offset hashed from (run id, seq, sector). The
 * pool is incompressible and every sector carries its own seq stamp, so a device can neither
 * compress nor dedup it, and verify regenerates it exactly. (Copying windows costs ~1 us per 8 KiB
 * record where hashing every word cost ~8 us, on the path between two syncs.)
 *
 * Fault model: any byte may be lost, zeroed, stale or flipped. Decoding never throws on damaged
 * bytes; it classifies (see classify.ts).
 */
import { xxh64 } from './checksum.js'
import { pack, unpack } from 'msgpackr'
import { z } from 'zod'
import { methodNames } from '../native/methods.js'
import { patterns, type Pattern } from './patterns.js'
import { maxGroupRuns, runIdSchema } from './run-id.js'

export const sectorBytes = 512
export const formatVersion = 1
export const superblockMagic = Buffer.from('PLUGCHK\0', 'latin1')
/** Magic, version, reserved, metadata length and checksum: the superblock's fixed start. */
export const superblockHeaderBytes = 24
export const sectorMagic = 0x31534350 // "PCS1" little endian
export const recordMagic = 0x31524350 // "PCR1" little endian
export const stampBytes = 24
export const writeTimeOffset = 48
export const checksumBytes = 8
export { patterns, type Pattern }

export { runIdSchema }

/** Bounds a real run stays within (verify trusts nothing it reads back beyond them). */
export const maxRecordSizeBytes = 1024 * 1024
/** append slots are judged without a per-slot table, so only the file size bounds them. */
export const maxAppendSlots = 2 ** 40
/** overwrite keeps one number per slot at verify: 2^24 slots is 128 MiB of memory (128 GiB of 8 KiB records). */
export const maxOverwriteSlots = 2 ** 24

/**
 * A member run's data file: PATH with one method, PATH.method with several; with more than one job,
 * .jobK after it (K = 1..jobs). The one layout, for the writer that creates the files and for verify,
 * which looks for every member of a group at these paths.
 */
export function memberPath(requestedPath: string, methods: readonly string[], jobs: number, job: number, method: string): string {
  const base = methods.length === 1 ? requestedPath : `${requestedPath}.${method}`
  return jobs === 1 ? base : `${base}.job${job}`
}

/**
 * A run's place in its group (absent in runs of older writers): the write planned jobs x
 * methods.length runs, one per job and method, each at memberPath; this one is job `job`'s run of
 * its method. Verify counts the group against it, so a member whose acks are missing is named.
 */
export const groupMemberSchema = z.object({
  job: z.number().int().min(1).max(maxGroupRuns),
  jobs: z.number().int().min(1).max(maxGroupRuns),
  methods: z.array(z.enum(methodNames)).min(1).max(methodNames.length),
})
export type GroupMember = z.infer<typeof groupMemberSchema>

export const runMetaSchema = z
  .object({
    runId: runIdSchema,
    /** Runs started together by one `write --method a,b` share a group id. */
    groupId: runIdSchema,
    method: z.enum(methodNames),
    direct: z.boolean(),
    pattern: z.enum(patterns),
    recordSizeBytes: z.number().int().positive().multipleOf(sectorBytes).max(maxRecordSizeBytes),
    slotCount: z.number().int().positive().max(maxAppendSlots),
    host: z.string().min(1).max(255),
    /** Absolute path of this run's data file. */
    path: z.string().min(1).max(4096),
    /** Absolute path the user gave to --file (differs from path when several methods run at once). */
    requestedPath: z.string().min(1).max(4096),
    createdMs: z.number().int().min(946_684_800_000).max(7_258_118_400_000),
    member: groupMemberSchema.optional(),
  })
  .refine((m) => m.pattern === 'append' || m.slotCount <= maxOverwriteSlots, {
    message: `overwrite runs have at most ${maxOverwriteSlots} slots`,
    path: ['slotCount'],
  })
  .refine((m) => Number.isSafeInteger(m.recordSizeBytes * (m.slotCount + 1)), { message: 'file size out of range', path: ['slotCount'] })
  .superRefine((m, ctx) => {
    const problem = memberProblem(m)
    if (problem !== null) ctx.addIssue({ code: 'custom', path: ['member', problem.field], message: problem.message })
  })
export type RunMeta = z.infer<typeof runMetaSchema>

/** What makes a run's place in its group impossible: a plan no write makes, or a path off its layout. */
function memberProblem(m: Pick<RunMeta, 'method' | 'path' | 'requestedPath' | 'member'>): { field: string; message: string } | null {
  const member = m.member
  if (member === undefined) return null
  if (member.job > member.jobs) return { field: 'job', message: `job ${member.job} of ${member.jobs} jobs` }
  if (new Set(member.methods).size !== member.methods.length) return { field: 'methods', message: 'a method is listed twice' }
  if (!member.methods.includes(m.method)) return { field: 'methods', message: `the run's method ${m.method} is not one of the group's` }
  if (member.jobs * member.methods.length > maxGroupRuns)
    return { field: 'jobs', message: `${member.jobs} jobs x ${member.methods.length} methods is more than ${maxGroupRuns} runs` }
  const path = memberPath(m.requestedPath, member.methods, member.jobs, member.job, m.method)
  if (m.path !== path) return { field: 'job', message: `the run's path is not its place in the group's layout (${path})` }
  return null
}

// --- superblock ------------------------------------------------------------------------------

export function encodeSuperblock(meta: RunMeta): Buffer {
  const block = Buffer.alloc(meta.recordSizeBytes)
  const metaBytes = pack(meta)
  if (24 + metaBytes.length > block.length) throw new Error('run metadata does not fit in the superblock')
  superblockMagic.copy(block, 0)
  block.writeUInt16LE(formatVersion, 8)
  block.writeUInt32LE(metaBytes.length, 12)
  block.writeBigUInt64LE(xxh64(metaBytes), 16)
  metaBytes.copy(block, 24)
  return block
}

export type SuperblockReading =
  | { readonly kind: 'valid'; readonly meta: RunMeta }
  | { readonly kind: 'absent' | 'zero' | 'foreign' | 'damaged'; readonly detail: string }

/** Reads a superblock from the first bytes of a file; never throws. */
export function decodeSuperblock(bytes: Buffer): SuperblockReading {
  if (bytes.length < 24) return { kind: 'absent', detail: `file is ${bytes.length} bytes, shorter than a superblock` }
  if (!bytes.subarray(0, 8).equals(superblockMagic)) {
    return bytes.subarray(0, 24).every((b) => b === 0)
      ? { kind: 'zero', detail: 'superblock is zeros' }
      : { kind: 'foreign', detail: 'not a plugcheck data file (no superblock magic)' }
  }
  const version = bytes.readUInt16LE(8)
  if (version !== formatVersion) return { kind: 'damaged', detail: `unknown format version ${version}` }
  const metaLength = bytes.readUInt32LE(12)
  if (24 + metaLength > bytes.length) return { kind: 'damaged', detail: 'superblock metadata length out of range' }
  const metaBytes = bytes.subarray(24, 24 + metaLength)
  if (xxh64(metaBytes) !== bytes.readBigUInt64LE(16)) return { kind: 'damaged', detail: 'superblock checksum mismatch' }
  // Every byte of the block is accounted for: the reserved field and everything after the metadata are zeros.
  if (bytes.readUInt16LE(10) !== 0) return { kind: 'damaged', detail: 'superblock reserved field (offset 10) is not zero' }
  try {
    const parsed = runMetaSchema.safeParse(unpack(metaBytes))
    if (!parsed.success) return { kind: 'damaged', detail: `superblock metadata invalid: ${parsed.error.issues[0]?.message}` }
    // The block is recordSizeBytes long (bytes may hold less, or records after it).
    const strayAt = firstNonZero(bytes.subarray(0, Math.min(bytes.length, parsed.data.recordSizeBytes)), 24 + metaLength)
    if (strayAt >= 0) return { kind: 'damaged', detail: `superblock byte ${strayAt}, after the metadata, is not zero` }
    return { kind: 'valid', meta: parsed.data }
  } catch {
    return { kind: 'damaged', detail: 'superblock metadata is not msgpack' }
  }
}

// --- records ---------------------------------------------------------------------------------

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
 * The slot a seq is written to. append: in order, wrapping when the file is full.
 * overwrite: pseudo-random from (run, seq), as diskchecker.pl picks random offsets.
 */
export function slotOf(key: RunKey, pattern: Pattern, seq: number, slotCount: number): number {
  if (pattern === 'append') return (seq - 1) % slotCount
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

/** Offset of the first non-zero byte at or after from, or -1. */
function firstNonZero(bytes: Buffer, from: number): number {
  for (let i = from; i < bytes.length; i++) if (bytes[i] !== 0) return i
  return -1
}

export function isZero(bytes: Buffer): boolean {
  for (let i = 0; i < bytes.length; i++) if (bytes[i] !== 0) return false
  return true
}
