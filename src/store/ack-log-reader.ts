/**
 * A run's ack log's reader (replay; the format is ack-log.ts).
 *
 * Fault model: the listener's machine may lose power at any moment, and a disk may damage what it
 * holds. A commit is one entry written by one write(), and the next commit is written only after its
 * fdatasync returned; "recorded" is sent only after that fdatasync. So a crash can tear only the last
 * entry, never reported as recorded, and leaves either its bytes cut short (zeros or the end of the
 * file where the rest should be) or zeros after the last whole entry (the file's size reached the disk
 * before its data), in all at most one commit's bytes (maxCommitBytes). Replay keeps every entry up to
 * the first that does not check out, and takes what follows as a torn tail only when it can be that
 * last entry (no longer than a commit, and tailDamageRules): anything else is damage.
 * So is an entry that checks out but cannot be true here: not an entry of this log's format, another
 * run's header, a commit repeated, missing or out of order, acks not contiguous, times or seqs no
 * writer produced. Damage is a refusal naming the file, the byte offset and what is wrong, never fewer
 * acks: acks dropped after it would turn a FAIL into a PASS.
 * Format 1 logs are judged by the same rule, without a window: a previous listener's commit of
 * several entries torn with a later entry of it intact cannot be told from damage, and is refused.
 *
 * Replay streams the log in chunks (a log of any size, memory bounded by one chunk and one entry).
 */
import { constants as fsConstants } from 'node:fs'
import { open, type FileHandle } from 'node:fs/promises'
import type { z } from 'zod'
import { xxh64 } from '../record/checksum.js'
import { describeSystemError, runtimeError } from '../base/errors.js'
import {
  logEntryHeaderBytes,
  logEntrySchema,
  logFormatVersion,
  maxCommitBytes,
  maxEntryBodyBytes,
  maxEntryBytes,
  packr,
  type LogEntry,
  type LogItem,
} from './ack-log.js'

const entryHeaderBytes = logEntryHeaderBytes
/** Replay reads the log in chunks of this size. */
const replayChunkBytes = 1024 * 1024
/**
 * A tail (from the first bad entry) longer than this is refused from the file's size alone, unread: a
 * log whose size reads a terabyte must not be read for an hour. Shorter ones are read to say what they hold.
 */
const maxTailReadBytes = 16 * replayChunkBytes

/**
 * Applies one item to the run being replayed; returns what makes it impossible here (completing "the
 * entry there ..."), or undefined when it is applied.
 */
export type ApplyItem = (item: LogItem) => string | undefined

/** What replay found at the end of a log. */
export interface LogReplay {
  readonly format: 1 | 2 | 'empty'
  /** Bytes of whole entries that checked out. */
  readonly validBytes: number
  readonly totalBytes: number
  /** Commits replayed (format 2; 0 for older logs): the next commit appended would be one more. */
  readonly commits: number
  /** Set when the log ends in a torn last entry (or zeros), which replay ignored. */
  readonly tornTail: { readonly atByte: number; readonly bytes: number; readonly what: string } | null
}

/** Opens for reading without blocking: a FIFO planted in the directory must not hang the listener. */
const readFlags = fsConstants.O_RDONLY | fsConstants.O_NONBLOCK

/**
 * Streams a run's ack log into apply, chunk by chunk. A missing log is an empty one (the listener died
 * before creating it); a log that cannot be read in full, or that is damaged, throws a runtime error
 * naming it.
 */
export async function replayLog(
  path: string,
  runId: string,
  apply: ApplyItem,
  limitBytes = Number.POSITIVE_INFINITY,
  chunkBytes = replayChunkBytes,
): Promise<LogReplay> {
  let file: FileHandle
  try {
    file = await open(path, readFlags)
  } catch (error) {
    if ((error as { code?: string }).code === 'ENOENT') return { format: 'empty', validBytes: 0, totalBytes: 0, commits: 0, tornTail: null }
    throw unreadable(path, error)
  }
  try {
    const stats = await file.stat()
    // A FIFO or a device is not a log: refused like any log that cannot be read in full.
    if (!stats.isFile()) throw unreadable(path, new Error('not a regular file'))
    // limitBytes: only the durable part (the journal's first `at` for the run); bytes past it are not read.
    return await readEntries(file, path, new LogReader(path, runId, apply), Math.min(stats.size, limitBytes), chunkBytes)
  } catch (error) {
    if ((error as { exitCode?: number }).exitCode !== undefined) throw error
    throw unreadable(path, error)
  } finally {
    await file.close().catch(() => undefined)
  }
}

/**
 * The whole entries of a log from byte fromByte (where an entry starts) to byte toByte, each given to
 * onFrame as its frame (header and body, as frameCommit made it) with its offset: a run's log read
 * back from where an earlier read ended. Bytes that are not whole, checksummed entries ending exactly
 * at toByte are damage (the caller read them as such before, or they were fsynced by a fold); a log
 * that cannot be read is refused, never read as fewer acks. onFrame returns a problem to refuse.
 */
export async function readFramesBetween(
  path: string,
  fromByte: number,
  toByte: number,
  onFrame: (frame: Buffer, atByte: number) => string | undefined,
  chunkBytes = replayChunkBytes,
): Promise<void> {
  let file: FileHandle
  try {
    file = await open(path, readFlags)
  } catch (error) {
    throw unreadable(path, error)
  }
  try {
    let pending = Buffer.alloc(0)
    let atByte = fromByte
    let position = fromByte
    const chunk = Buffer.alloc(chunkBytes)
    while (atByte < toByte) {
      let offset = 0
      while (pending.length - offset >= entryHeaderBytes) {
        const length = pending.readUInt32LE(offset)
        if (length === 0 || length > maxEntryBodyBytes)
          throw damaged(path, atByte, `the entry there has a length no entry has (${length} bytes), inside bytes read before`)
        if (pending.length - offset - entryHeaderBytes < length) break
        const frame = pending.subarray(offset, offset + entryHeaderBytes + length)
        if (xxh64(frame.subarray(entryHeaderBytes)) !== frame.readBigUInt64LE(4))
          throw damaged(path, atByte, 'the entry there does not match its checksum, inside bytes read before')
        const problem = onFrame(frame, atByte)
        if (problem !== undefined) throw damaged(path, atByte, `the entry there ${problem}`)
        offset += frame.length
        atByte += frame.length
      }
      if (atByte >= toByte) break
      if (position >= toByte) throw damaged(path, atByte, `the entry there runs past byte ${toByte}, where whole entries ended`)
      const { bytesRead } = await file.read(chunk, 0, Math.min(chunk.length, toByte - position), position)
      if (bytesRead === 0) throw damaged(path, atByte, `the log ends at byte ${position}, where it held ${toByte} bytes`)
      position += bytesRead
      pending = Buffer.concat([pending.subarray(offset), chunk.subarray(0, bytesRead)])
    }
    if (atByte !== toByte) throw damaged(path, fromByte, `its entries from there do not end at byte ${toByte}, where whole entries ended`)
  } catch (error) {
    if ((error as { exitCode?: number }).exitCode !== undefined) throw error
    throw unreadable(path, error)
  } finally {
    await file.close().catch(() => undefined)
  }
}

async function readEntries(file: FileHandle, path: string, reader: LogReader, sizeBytes: number, chunkBytes: number): Promise<LogReplay> {
  let pending = Buffer.alloc(0)
  let validBytes = 0
  let position = 0
  // Each chunk's entries are checked in one slice of the event loop: a smaller chunk, a shorter slice.
  // No larger than the log (never read past sizeBytes): 64 KiB per log of 100 bytes, over 100,000
  // logs, was 6 GB of buffers for the collector during the background check.
  const chunk = Buffer.alloc(Math.max(1, Math.min(chunkBytes, sizeBytes)))
  const finish = async (bad: BadEntry | null): Promise<LogReplay> => {
    const tornTail = bad === null ? null : await judgeTail(file, path, bad, Math.max(sizeBytes, position))
    return { format: reader.format, validBytes, totalBytes: Math.max(sizeBytes, position), commits: reader.commits, tornTail }
  }
  for (;;) {
    // Entries are taken from pending; a partial entry waits for the next chunk.
    let offset = 0
    while (pending.length - offset >= entryHeaderBytes) {
      const length = pending.readUInt32LE(offset)
      if (length > maxEntryBodyBytes) return finish({ atByte: validBytes, length, why: 'length' })
      if (pending.length - offset - entryHeaderBytes < length) break
      const body = pending.subarray(offset + entryHeaderBytes, offset + entryHeaderBytes + length)
      if (length === 0 || xxh64(body) !== pending.readBigUInt64LE(offset + 4))
        return finish({ atByte: validBytes, length, why: 'checksum' })
      reader.take(body, validBytes)
      offset += entryHeaderBytes + length
      validBytes += entryHeaderBytes + length
    }
    const { bytesRead } =
      position >= sizeBytes ? { bytesRead: 0 } : await file.read(chunk, 0, Math.min(chunk.length, sizeBytes - position), position)
    if (bytesRead === 0) {
      if (pending.length === offset) return finish(null)
      const length = pending.length - offset >= entryHeaderBytes ? pending.readUInt32LE(offset) : undefined
      return finish({ atByte: validBytes, length, why: 'incomplete' })
    }
    position += bytesRead
    pending = Buffer.concat([pending.subarray(offset), chunk.subarray(0, bytesRead)])
  }
}

/** Checks each whole, checksummed entry against the log's format and what came before it. */
class LogReader {
  format: 1 | 2 | 'empty' = 'empty'
  private nextCommit = 1

  get commits(): number {
    return this.nextCommit - 1
  }

  constructor(
    private readonly path: string,
    private readonly runId: string,
    private readonly apply: ApplyItem,
  ) {}

  take(body: Buffer, atByte: number): void {
    const problem = this.problemOf(body, atByte)
    if (problem !== undefined) throw damaged(this.path, atByte, `the entry there ${problem}`)
  }

  private problemOf(body: Buffer, atByte: number): string | undefined {
    let decoded: unknown
    try {
      decoded = packr.unpack(body)
    } catch {
      return 'matches its checksum but is not msgpack'
    }
    const parsed = logEntrySchema.safeParse(decoded)
    if (!parsed.success) return `matches its checksum but is not an ack log entry (${describeIssue(parsed.error)})`
    const entry: LogEntry = parsed.data
    if (entry.k === 'log') return this.header(entry, atByte)
    if (entry.k === 'commit') return this.commit(entry)
    // An item of its own: the previous format, which has no header.
    if (this.format === 2) return `is a single ${entry.k} entry of the previous format, inside a log of commits`
    this.format = 1
    return this.apply(entry)
  }

  private header(entry: Extract<LogEntry, { k: 'log' }>, atByte: number): string | undefined {
    if (atByte !== 0) return 'is a second header'
    if (entry.version !== logFormatVersion) return `is the header of a log of format ${entry.version}, which this plugcheck does not read`
    if (entry.runId !== this.runId) return `is the header of run ${entry.runId}'s log, not of run ${this.runId}`
    this.format = 2
    return undefined
  }

  private commit(entry: Extract<LogEntry, { k: 'commit' }>): string | undefined {
    if (this.format !== 2) return 'is a commit, in a log without a header'
    if (entry.n < this.nextCommit) return `repeats commit ${entry.n} (a duplicated entry; commit ${this.nextCommit} was expected)`
    if (entry.n > this.nextCommit)
      return `is commit ${entry.n}, where commit ${this.nextCommit} was expected (an entry out of order or missing)`
    this.nextCommit++
    for (const item of entry.e) {
      const problem = this.apply(item)
      if (problem !== undefined) return `(commit ${entry.n}) ${problem}`
    }
    return undefined
  }
}

/** The first entry that is incomplete or does not check out: the start of a torn tail, or damage. */
interface BadEntry {
  readonly atByte: number
  /** Its length field; undefined when the file ends inside it. */
  readonly length: number | undefined
  readonly why: 'length' | 'checksum' | 'incomplete'
}

/** What replay knows of the bytes from the first bad entry on. */
interface Tail extends BadEntry {
  /** One past the last non-zero byte from atByte on (atByte when only zeros follow). */
  readonly dataEnd: number
  /** Where a whole entry that checks out starts after atByte, if one does (only looked for in one entry's reach). */
  readonly wholeEntryAt: number | undefined
  readonly endOfFile: number
}

const badEntryWords: Record<BadEntry['why'], string> = {
  length: 'has a length no entry has',
  checksum: 'does not match its checksum',
  incomplete: 'is cut short by the end of the file',
}

/**
 * When the bytes from the first bad entry on are damage, not the last entry torn: the first rule that
 * applies names it. A crash tears only the last entry (see the header), and tears a length toward
 * zero (each of its bytes written or not), never up; zeros mean "not written". No rule applies: a torn
 * tail (zeros only, or one entry's bytes cut short), ignored.
 */
const tailDamageRules: ReadonlyArray<{ readonly applies: (t: Tail) => boolean; readonly says: (t: Tail) => string }> = [
  {
    applies: (t) => t.length !== undefined && t.length > maxEntryBodyBytes,
    says: (t) => `its length field reads ${t.length} bytes, more than any entry has (a crash never leaves that)`,
  },
  {
    applies: (t) => t.dataEnd - t.atByte > maxEntryBytes,
    says: (t) => `${t.dataEnd - t.atByte} bytes of data run from there, more than one entry (only the last entry can be torn by a crash)`,
  },
  {
    applies: (t) => t.length !== undefined && t.length > 0 && t.atByte + entryHeaderBytes + t.length < t.dataEnd,
    says: (t) =>
      `${t.dataEnd - (t.atByte + entryHeaderBytes + t.length!)} bytes of data follow its end (only the last entry can be torn by a crash)`,
  },
  {
    applies: (t) => t.wholeEntryAt !== undefined,
    says: (t) => `a whole entry that checks out follows it at byte ${t.wholeEntryAt} (only the last entry can be torn by a crash)`,
  },
  {
    applies: (t) => t.endOfFile - t.atByte > maxCommitBytes,
    says: (t) => tooLongWords(t.endOfFile - t.atByte),
  },
]

function tooLongWords(bytes: number): string {
  return `${bytes} bytes run from there to the end of the file, more than the largest commit (${maxCommitBytes} bytes): a crash tears only the last commit, so recorded commits are missing there`
}

/**
 * A torn tail (returned, to be ignored with a warning) or damage (thrown). A tail longer than the
 * largest commit is damage whatever it holds (the last rule); one longer than maxTailReadBytes is
 * refused from the file's size, before a byte of it is read.
 */
async function judgeTail(file: FileHandle, path: string, bad: BadEntry, sizeBytes: number): Promise<NonNullable<LogReplay['tornTail']>> {
  if (sizeBytes - bad.atByte > maxTailReadBytes)
    throw damaged(path, bad.atByte, `the entry there ${badEntryWords[bad.why]}, and ${tooLongWords(sizeBytes - bad.atByte)}`)
  const { dataEnd, endOfFile } = await endOfData(file, bad.atByte)
  const bytes = endOfFile - bad.atByte
  const onlyZeros = dataEnd === bad.atByte
  const wholeEntryAt =
    onlyZeros || dataEnd - bad.atByte > maxEntryBytes ? undefined : await wholeEntryAfter(file, bad.atByte, dataEnd, endOfFile)
  const tail: Tail = { ...bad, dataEnd, wholeEntryAt, endOfFile }
  const rule = tailDamageRules.find((r) => r.applies(tail))
  if (rule !== undefined) throw damaged(path, bad.atByte, `the entry there ${badEntryWords[bad.why]}, and ${rule.says(tail)}`)
  return { atByte: bad.atByte, bytes, what: onlyZeros ? 'zeros' : `an entry that ${badEntryWords[bad.why]}` }
}

/** One past the last non-zero byte from atByte on, and the end of the file, read in chunks. */
async function endOfData(file: FileHandle, atByte: number): Promise<{ dataEnd: number; endOfFile: number }> {
  const chunk = Buffer.alloc(replayChunkBytes)
  const zeros = Buffer.alloc(replayChunkBytes)
  let position = atByte
  let dataEnd = atByte
  for (;;) {
    const { bytesRead } = await file.read(chunk, 0, chunk.length, position)
    if (bytesRead === 0) return { dataEnd, endOfFile: position }
    const read = chunk.subarray(0, bytesRead)
    // Holes and zeros compare in one memcmp; only a chunk with data is searched byte by byte.
    if (!read.equals(zeros.subarray(0, bytesRead))) {
      let last = bytesRead - 1
      while (read[last] === 0) last--
      dataEnd = position + last + 1
    }
    position += bytesRead
  }
}

/**
 * The first offset in (atByte, dataEnd) where a whole entry that checks out starts, if any: proof that
 * the bad entry is not the last one. Only called with dataEnd within one entry of atByte.
 */
async function wholeEntryAfter(file: FileHandle, atByte: number, dataEnd: number, endOfFile: number): Promise<number | undefined> {
  const region = Buffer.alloc(Math.min(endOfFile, dataEnd + maxEntryBytes) - atByte)
  let filled = 0
  while (filled < region.length) {
    const { bytesRead } = await file.read(region, filled, region.length - filled, atByte + filled)
    if (bytesRead === 0) break
    filled += bytesRead
  }
  for (let at = 1; at < dataEnd - atByte && at + entryHeaderBytes <= filled; at++) {
    const length = region.readUInt32LE(at)
    if (length === 0 || length > filled - at - entryHeaderBytes) continue
    if (xxh64(region.subarray(at + entryHeaderBytes, at + entryHeaderBytes + length)) === region.readBigUInt64LE(at + 4)) return atByte + at
  }
  return undefined
}

function damaged(path: string, atByte: number, what: string): Error {
  return runtimeError(
    `could not read ${path}: damaged at byte ${atByte}: ${what}`,
    "the listener refuses to answer from a damaged ack log (acks after the damage would be lost, turning a FAIL into a PASS); restore the file, or move the run's directory out of runs/ if the run does not matter",
  )
}

function unreadable(path: string, error: unknown): Error {
  return runtimeError(
    `could not read ${path}: ${describeSystemError(error)}`,
    'the listener refuses to answer from an ack log it cannot read in full',
  )
}

/** The first schema problem, in a few words: which field, and what is wrong with it. */
function describeIssue(error: z.ZodError): string {
  const issue = error.issues[0]
  if (issue === undefined) return 'not valid'
  const field = issue.path.length === 0 ? 'the entry' : `field ${issue.path.join('.')}`
  return `${field}: ${issue.message.charAt(0).toLowerCase()}${issue.message.slice(1)}`
}
