/**
 * The listener's journal, <dir>/journal/<8-digit segment>.wal: every commit round of every run is ONE
 * framed, checksummed, numbered entry, made durable by one write and one fdatasync, however many runs
 * it carries (group commit across runs, like a database's write-ahead log).
 *
 *   entry    [u32 LE body length][u64 LE xxh64 of body][body: msgpack]   (the ack log's framing)
 *   header   { k: 'journal', version: 1, segment, firstRound }          first entry of each segment
 *     firstRound  the number its first round gets: one more than the last round before it, so the
 *            segments of a directory chain up (a segment from an earlier state of the directory,
 *            put back beside later ones, breaks the chain and is refused; the newest segment is
 *            never deleted, not even by a clean stop, so the chain always has its end)
 *   round    { k: 'round', r, a: [{ id, m }], c: [{ id, at, f }] }
 *     r      the round's number, one more than the previous round's, across segments
 *     a      announcements: the run id and the exact bytes of its sealed meta.msgpack
 *     c      per-run commits: the exact commit frame (frameCommit) that goes into runs/<id>/acks.log
 *            at byte offset `at` when the segment is folded
 * The per-run files (ack-log.ts, meta.msgpack) keep their formats: the fold (store-fold.ts, fold.ts) copies
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
import { frameLogEntry } from './ack-log.js'
import { runIdSchema } from '../record/run-id.js'
import { describeSystemError, runtimeError } from '../base/errors.js'

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
const headerSchema = z.object({
  k: z.literal('journal'),
  version: z.number().int().nonnegative(),
  segment: z.number().int().nonnegative(),
  firstRound: z.number().int().positive().max(Number.MAX_SAFE_INTEGER),
})
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

/** A journal entry is framed as an ack log's entry: length, xxh64, msgpack body. */
export const frameJournalEntry = frameLogEntry

export function segmentHeader(segment: number, firstRound: number): Buffer {
  return frameJournalEntry({ k: 'journal', version: journalFormatVersion, segment, firstRound })
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
  /** The number of its first round (its header's word for a segment with none yet). */
  readonly firstRound: number
}

/**
 * Reads one segment whole; expectedRound is the number its first round must have, which its header
 * must say too (0: any, for the oldest segment). A bad entry is a torn tail only in the last segment
 * and only when it can be that last round (tornTailProblem); anything else is damage, thrown naming
 * the file and byte.
 */
export async function readSegment(path: string, segment: number, isLast: boolean, expectedRound: number): Promise<SegmentRead> {
  const bytes = await readWhole(path)
  const rounds: JournalRound[] = []
  let at = 0
  let nextRound = expectedRound
  while (at < bytes.length) {
    const bad = badEntryAt(bytes, at)
    if (bad !== undefined) {
      // A segment's header is fsynced before any round goes there, and the segment before it is kept
      // until then: the newest segment's header may be torn by a crash (it holds nothing), no other's.
      const problem = !isLast
        ? 'only the last round of the last segment can be torn by a crash'
        : at === 0
          ? headerTornProblem(bytes)
          : tornTailProblem(bytes, at)
      if (problem !== undefined) throw damagedSegment(path, at, `the entry there ${bad}, and ${problem}`)
      return { rounds, validBytes: at, tornTail: { atByte: at, bytes: bytes.length - at }, firstRound: nextRound }
    }
    const length = bytes.readUInt32LE(at)
    const body = bytes.subarray(at + entryHeaderBytes, at + entryHeaderBytes + length)
    if (at === 0) {
      const header = headerProblem(body, segment, expectedRound)
      if (typeof header === 'string') throw damagedSegment(path, at, `the entry there ${header}`)
      nextRound = header.firstRound
    } else {
      const problem = roundProblem(body, nextRound, rounds)
      if (problem !== undefined) throw damagedSegment(path, at, `the entry there ${problem}`)
      nextRound = rounds.at(-1)!.r + 1
    }
    at += entryHeaderBytes + length
  }
  if (at === 0 && !isLast) throw damagedSegment(path, 0, 'it is empty, where a segment starts with its header')
  if (at === 0) return { rounds, validBytes: 0, tornTail: { atByte: 0, bytes: 0 }, firstRound: expectedRound }
  return { rounds, validBytes: at, tornTail: null, firstRound: rounds[0]?.r ?? nextRound }
}

/** Why the entry at `at` does not check out (undefined: it does). */
function badEntryAt(bytes: Buffer, at: number): string | undefined {
  if (bytes.length - at < entryHeaderBytes) return 'is cut short by the end of the file'
  const length = bytes.readUInt32LE(at)
  if (length === 0 || length > maxRoundBodyBytes) return 'has a length no entry has'
  if (bytes.length - at - entryHeaderBytes < length) return 'is cut short by the end of the file'
  if (xxh64(bytes.subarray(at + entryHeaderBytes, at + entryHeaderBytes + length)) !== bytes.readBigUInt64LE(at + 4))
    return 'does not match its checksum'
  return undefined
}

/**
 * When the bytes from a bad entry on cannot be the last round torn by a crash: more bytes than one
 * round, a whole entry that checks out after it (so it was not the last: a damaged length field,
 * zeroed or flipped, must not hide the rounds after it), or data after the end its length field
 * gives (a length is torn toward zero, never up).
 */
function tornTailProblem(bytes: Buffer, at: number): string | undefined {
  const tailBytes = bytes.length - at
  if (tailBytes > entryHeaderBytes + maxRoundBodyBytes)
    return `${tailBytes} bytes run from there to the end of the file, more than one round: recorded rounds are missing there`
  const after = wholeEntryAfter(bytes, at)
  if (after !== undefined) return `a whole entry that checks out starts at byte ${after} after it: recorded rounds follow the damage`
  if (tailBytes < entryHeaderBytes) return undefined
  const length = bytes.readUInt32LE(at)
  if (length > maxRoundBodyBytes) return `its length field reads ${length} bytes, more than any round has (a crash never leaves that)`
  let dataEnd = bytes.length
  while (dataEnd > at && bytes[dataEnd - 1] === 0) dataEnd--
  if (length > 0 && at + entryHeaderBytes + length < dataEnd)
    return `${dataEnd - (at + entryHeaderBytes + length)} bytes of data follow its end (only the last round can be torn by a crash)`
  return undefined
}

/** When the bytes of a newest segment cannot be its header torn by a crash: more than a header, or a round after it. */
function headerTornProblem(bytes: Buffer): string | undefined {
  if (bytes.length > entryHeaderBytes + 256) return `${bytes.length} bytes where a torn header would be, more than a header`
  const after = wholeEntryAfter(bytes, 0)
  return after === undefined
    ? undefined
    : `a whole entry that checks out starts at byte ${after} after it: recorded rounds follow the damage`
}

/** Whether a body's first byte can start a msgpack map (every entry's body is one). */
function startsAMap(byte: number | undefined): boolean {
  return byte !== undefined && ((byte & 0xf0) === 0x80 || byte === 0xde || byte === 0xdf)
}
/** Bytes checksummed while looking for a whole entry after a bad one, at most; beyond, the tail is refused (never read as fewer rounds). */
const maxScannedBytes = 256 * 1024 * 1024

/**
 * The first offset after `at` where a whole entry that checks out starts, if any. Only offsets whose
 * length field fits in the file and whose body starts as a round's does are checksummed; should
 * that take more than maxScannedBytes, the first candidate is taken as found (a refusal, the safe side).
 * A round's own commit frames are framed like rounds: a candidate must decode as a round.
 */
function wholeEntryAfter(bytes: Buffer, at: number): number | undefined {
  let scanned = 0
  for (let next = at + 1; next + entryHeaderBytes < bytes.length; next++) {
    const length = bytes.readUInt32LE(next)
    if (length === 0 || length > maxRoundBodyBytes || next + entryHeaderBytes + length > bytes.length) continue
    if (!startsAMap(bytes[next + entryHeaderBytes])) continue
    scanned += length
    if (scanned > maxScannedBytes) return next
    const body = bytes.subarray(next + entryHeaderBytes, next + entryHeaderBytes + length)
    // A round holds its runs' commit frames, framed the same way: only a whole journal round counts.
    if (xxh64(body) === bytes.readBigUInt64LE(next + 4) && isRound(body)) return next
  }
  return undefined
}

function isRound(body: Buffer): boolean {
  const decoded = decodeBody(body)
  return decoded !== undefined && roundSchema.safeParse(decoded.value).success
}

function decodeBody(body: Buffer): { value: unknown } | undefined {
  try {
    return { value: packr.unpack(body) }
  } catch {
    return undefined
  }
}

/** The segment's header checked: its segment number and, after another segment, the round it starts at. */
function headerProblem(body: Buffer, segment: number, expectedRound: number): string | { firstRound: number } {
  const decoded = decodeBody(body)
  if (decoded === undefined) return 'matches its checksum but is not msgpack'
  const header = headerSchema.safeParse(decoded.value)
  if (!header.success) return 'is not a journal segment header'
  if (header.data.version !== journalFormatVersion)
    return `is the header of a journal of format ${header.data.version}, which this plugcheck does not read`
  if (header.data.segment !== segment) return `is the header of segment ${header.data.segment}, not of segment ${segment} its name says`
  if (expectedRound !== 0 && header.data.firstRound !== expectedRound) {
    return `is the header of a segment starting at round ${header.data.firstRound}, where the segment before it ends before round ${expectedRound} (a segment from another state of the directory, or one missing)`
  }
  return { firstRound: header.data.firstRound }
}

function roundProblem(body: Buffer, nextRound: number, rounds: JournalRound[]): string | undefined {
  const decoded = decodeBody(body)
  if (decoded === undefined) return 'matches its checksum but is not msgpack'
  const round = roundSchema.safeParse(decoded.value)
  if (!round.success) return 'matches its checksum but is not a journal round'
  if (round.data.r !== nextRound)
    return `is round ${round.data.r}, where round ${nextRound} was expected (a round out of order, repeated or missing)`
  rounds.push({
    k: 'round',
    r: round.data.r,
    a: round.data.a.map((a) => ({ id: a.id, m: Buffer.from(a.m) })),
    c: round.data.c.map((c) => ({ id: c.id, at: c.at, f: Buffer.from(c.f) })),
  })
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
    if (stats.size > maxSegmentReadBytes)
      throw damagedSegment(path, 0, `it is ${stats.size} bytes, more than any segment this listener writes`)
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
  return runtimeError(
    `could not read ${path}: ${describeSystemError(error)}`,
    'the listener refuses to answer from a journal it cannot read in full',
  )
}
