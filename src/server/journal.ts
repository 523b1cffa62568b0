/**
 * The listener's journal, <dir>/journal/<8-digit segment>.wal: every commit round of every run is ONE
 * framed, checksummed, numbered entry, made durable by one write and one fdatasync, however many runs
 * it carries (group commit across runs, like a database's write-ahead log).
 *
 *   entry    [u32 LE body length][u64 LE xxh64 of body][body: msgpack]   (the ack log's framing)
 *   header   { k: 'journal', version: 1, segment }                      first entry of each segment
 *   round    { k: 'round', r, a: [{ id, m }], c: [{ id, at, f }] }
 *     r      the round's number, one more than the previous round's, across segments
 *     a      announcements: the run id and the exact bytes of its sealed meta.msgpack
 *     c      per-run commits: the exact commit frame (frameCommit) that goes into runs/<id>/acks.log
 *            at byte offset `at` when the segment is folded
 * The per-run files (ack-log.ts, meta.msgpack) keep their formats: the fold (ack-store.ts) copies
 * these bytes there verbatim, so old directories and `verify --acks DIR` keep their meaning.
 *
 * Fault model: as the ack log's. A round is written by one write() after the previous round's
 * fdatasync returned, and 'recorded' is sent after its own fdatasync; a segment is folded (and a new
 * one started) only between rounds. So a crash can tear only the last round of the last segment,
 * never reported as recorded: ignored with a warning. Any other bad entry is damage: a refusal naming
 * the file and the byte, never fewer acks.
 */
import { constants as fsConstants } from 'node:fs'
import { open, readdir, type FileHandle } from 'node:fs/promises'
import { join } from 'node:path'
import { Packr } from 'msgpackr'
import { z } from 'zod'
import { xxh64 } from '../record/checksum.js'
import { runIdSchema } from '../record/format.js'
import { describeSystemError, runtimeError } from '../errors.js'

export const journalFormatVersion = 1
const entryHeaderBytes = 12
/**
 * A round takes what fits in this many bytes (the rest waits for the next round); its first item
 * always goes in (a meta.msgpack may reach maxMetaFileBytes, 1 MiB).
 */
export const roundTargetBytes = 1024 * 1024
/** No round entry is larger (one whole meta file plus a full round): the bound of a torn tail. */
export const maxRoundBodyBytes = 3 * roundTargetBytes
/** A segment larger than this is not one this listener wrote (it folds at tens of MiB): damage. */
const maxSegmentReadBytes = 1024 * 1024 * 1024
const packr = new Packr({ useRecords: false, int64AsType: 'number', mapsAsObjects: true })

const bytesSchema = z.instanceof(Uint8Array)
const headerSchema = z.object({ k: z.literal('journal'), version: z.number().int().nonnegative(), segment: z.number().int().nonnegative() })
const roundSchema = z.object({
  k: z.literal('round'),
  r: z.number().int().positive().max(Number.MAX_SAFE_INTEGER),
  a: z.array(z.object({ id: runIdSchema, m: bytesSchema })),
  c: z.array(z.object({ id: runIdSchema, at: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER), f: bytesSchema })),
})
export interface JournalRound {
  readonly k: 'round'
  readonly r: number
  readonly a: Array<{ readonly id: string; readonly m: Buffer }>
  readonly c: Array<{ readonly id: string; readonly at: number; readonly f: Buffer }>
}

export function frameJournalEntry(entry: object): Buffer {
  const body = packr.pack(entry)
  const framed = Buffer.allocUnsafe(entryHeaderBytes + body.length)
  framed.writeUInt32LE(body.length, 0)
  framed.writeBigUInt64LE(xxh64(body), 4)
  body.copy(framed, entryHeaderBytes)
  return framed
}

export function segmentHeader(segment: number): Buffer {
  return frameJournalEntry({ k: 'journal', version: journalFormatVersion, segment })
}

export function frameRound(round: JournalRound): Buffer {
  return frameJournalEntry(round)
}

export function segmentName(segment: number): string {
  return `${String(segment).padStart(8, '0')}.wal`
}

/** The segments in <dir>/journal, oldest first (none when the directory is missing: an older listener's). */
export async function listSegments(journalDir: string): Promise<Array<{ segment: number; path: string }>> {
  let names: string[]
  try {
    names = await readdir(journalDir)
  } catch (error) {
    if ((error as { code?: string }).code === 'ENOENT') return []
    throw runtimeError(`could not read ${journalDir}: ${describeSystemError(error)}`, 'the listener refuses to answer without its journal')
  }
  return names
    .filter((name) => /^[0-9]{8}\.wal$/.test(name))
    .map((name) => ({ segment: Number(name.slice(0, 8)), path: join(journalDir, name) }))
    .sort((a, b) => a.segment - b.segment)
}

export interface SegmentRead {
  readonly rounds: JournalRound[]
  /** Bytes of whole entries that checked out (where the next round would go). */
  readonly validBytes: number
  /** The last round torn by a crash (last segment only), ignored. */
  readonly tornTail: { readonly atByte: number; readonly bytes: number } | null
}

/**
 * Reads one segment whole; expectedRound is the number its first round must have (0: any, for the
 * oldest segment). A bad entry is a torn tail only in the last segment and only when it can be
 * that last round (tornTailProblem); anything else is damage, thrown naming the file and byte.
 */
export async function readSegment(path: string, segment: number, isLast: boolean, expectedRound: number): Promise<SegmentRead> {
  const bytes = await readWhole(path)
  const rounds: JournalRound[] = []
  let at = 0
  let nextRound = expectedRound
  while (at < bytes.length) {
    const bad = badEntryAt(bytes, at)
    if (bad !== undefined) {
      const problem = isLast ? tornTailProblem(bytes, at) : 'only the last round of the last segment can be torn by a crash'
      if (problem !== undefined) throw damagedSegment(path, at, `the entry there ${bad}, and ${problem}`)
      return { rounds, validBytes: at, tornTail: { atByte: at, bytes: bytes.length - at } }
    }
    const length = bytes.readUInt32LE(at)
    const problem = entryProblem(bytes.subarray(at + entryHeaderBytes, at + entryHeaderBytes + length), at, segment, nextRound, rounds)
    if (problem !== undefined) throw damagedSegment(path, at, `the entry there ${problem}`)
    if (at > 0) nextRound = rounds.at(-1)!.r + 1
    at += entryHeaderBytes + length
  }
  return { rounds, validBytes: at, tornTail: null }
}

/** Why the entry at `at` does not check out (undefined: it does). */
function badEntryAt(bytes: Buffer, at: number): string | undefined {
  if (bytes.length - at < entryHeaderBytes) return 'is cut short by the end of the file'
  const length = bytes.readUInt32LE(at)
  if (length === 0 || length > maxRoundBodyBytes) return 'has a length no entry has'
  if (bytes.length - at - entryHeaderBytes < length) return 'is cut short by the end of the file'
  if (xxh64(bytes.subarray(at + entryHeaderBytes, at + entryHeaderBytes + length)) !== bytes.readBigUInt64LE(at + 4)) return 'does not match its checksum'
  return undefined
}

/**
 * When the bytes from a bad entry on cannot be the last round torn by a crash: more bytes than one
 * round, or data after the end its length field gives (a length is torn toward zero, never up).
 */
function tornTailProblem(bytes: Buffer, at: number): string | undefined {
  const tailBytes = bytes.length - at
  if (tailBytes > entryHeaderBytes + maxRoundBodyBytes) return `${tailBytes} bytes run from there to the end of the file, more than one round: recorded rounds are missing there`
  if (tailBytes < entryHeaderBytes) return undefined
  const length = bytes.readUInt32LE(at)
  if (length > maxRoundBodyBytes) return `its length field reads ${length} bytes, more than any round has (a crash never leaves that)`
  let dataEnd = bytes.length
  while (dataEnd > at && bytes[dataEnd - 1] === 0) dataEnd--
  if (length > 0 && at + entryHeaderBytes + length < dataEnd) return `${dataEnd - (at + entryHeaderBytes + length)} bytes of data follow its end (only the last round can be torn by a crash)`
  return undefined
}

function entryProblem(body: Buffer, at: number, segment: number, nextRound: number, rounds: JournalRound[]): string | undefined {
  let decoded: unknown
  try {
    decoded = packr.unpack(body)
  } catch {
    return 'matches its checksum but is not msgpack'
  }
  if (at === 0) {
    const header = headerSchema.safeParse(decoded)
    if (!header.success) return 'is not a journal segment header'
    if (header.data.version !== journalFormatVersion) return `is the header of a journal of format ${header.data.version}, which this plugcheck does not read`
    if (header.data.segment !== segment) return `is the header of segment ${header.data.segment}, not of segment ${segment} its name says`
    return undefined
  }
  const round = roundSchema.safeParse(decoded)
  if (!round.success) return 'matches its checksum but is not a journal round'
  if (nextRound !== 0 && round.data.r !== nextRound) return `is round ${round.data.r}, where round ${nextRound} was expected (a round out of order, repeated or missing)`
  rounds.push({ k: 'round', r: round.data.r, a: round.data.a.map((a) => ({ id: a.id, m: Buffer.from(a.m) })), c: round.data.c.map((c) => ({ id: c.id, at: c.at, f: Buffer.from(c.f) })) })
  return undefined
}

async function readWhole(path: string): Promise<Buffer> {
  let file: FileHandle
  try {
    file = await open(path, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK)
  } catch (error) {
    throw unreadableSegment(path, error)
  }
  try {
    const stats = await file.stat()
    if (!stats.isFile()) throw unreadableSegment(path, new Error('not a regular file'))
    if (stats.size > maxSegmentReadBytes) throw damagedSegment(path, 0, `it is ${stats.size} bytes, more than any segment this listener writes`)
    const bytes = Buffer.alloc(stats.size)
    let filled = 0
    while (filled < bytes.length) {
      const { bytesRead } = await file.read(bytes, filled, bytes.length - filled, filled)
      if (bytesRead === 0) break
      filled += bytesRead
    }
    return bytes.subarray(0, filled)
  } catch (error) {
    if ((error as { exitCode?: number }).exitCode !== undefined) throw error
    throw unreadableSegment(path, error)
  } finally {
    await file.close().catch(() => undefined)
  }
}

export function damagedSegment(path: string, atByte: number, what: string): Error {
  return runtimeError(
    `could not read ${path}: damaged at byte ${atByte}: ${what}`,
    'the listener refuses to answer from a damaged journal (rounds after the damage would be lost, turning a FAIL into a PASS); restore the file from a copy of the directory',
  )
}

function unreadableSegment(path: string, error: unknown): Error {
  return runtimeError(`could not read ${path}: ${describeSystemError(error)}`, 'the listener refuses to answer from a journal it cannot read in full')
}
