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
import { patterns, publishWays } from './patterns.js'
import { formatVersion, sectorBytes } from './records.js'
import { maxGroupRuns, runIdSchema } from './run-id.js'

export const superblockMagic = Buffer.from('PLUGCHK\0', 'latin1')
/** Magic, version, reserved, metadata length and checksum: the superblock's fixed start. */
export const superblockHeaderBytes = 24

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
    /**
     * A files run's way of making each record file (files-layout.ts); present exactly when pattern is
     * files. slotCount is then the number of record files kept (older ones are deleted).
     */
    files: z
      .object({ dirSync: z.boolean(), publish: z.enum(publishWays) })
      .strict()
      .optional(),
  })
  .refine((m) => (m.pattern === 'files') === (m.files !== undefined), {
    message: 'files settings are given exactly for a files run',
    path: ['files'],
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

/** Offset of the first non-zero byte at or after from, or -1. */
function firstNonZero(bytes: Buffer, from: number): number {
  for (let i = from; i < bytes.length; i++) if (bytes[i] !== 0) return i
  return -1
}
