/**
 * A run's ack log, runs/<runId>/acks.log: its format (its reader, replay, is ack-log-reader.ts).
 *
 * Format 2 (this version): a header entry, written and fsynced when the run is created, then exactly
 * one entry per group commit:
 *   entry    [u32 LE body length][u64 LE xxh64 of body][body: msgpack]
 *   header   { k: 'log', version: 2, runId }
 *   commit   { k: 'commit', n, e: [item, ...] }   n = 1, 2, 3, ...: the commit's number in this log
 *   item     { k: 'ack', fromSeq, toSeq, firstMs, lastMs } | { k: 'steady', atMs } | { k: 'end', reason, detail?, atMs }
 * Format 1 (listeners before this one): no header, and each item an entry of its own, several per
 * commit. Such logs still replay (a previous listener's directory loads); nothing is appended to them.
 */
import { Packr } from 'msgpackr'
import { z } from 'zod'
import { xxh64 } from '../record/checksum.js'
import { runIdSchema } from '../record/run-id.js'
import { endReasons, epochMsSchema } from '../protocol/messages.js'

export const logFormatVersion = 2
export const logEntryHeaderBytes = 12
const entryHeaderBytes = logEntryHeaderBytes
/**
 * No entry any listener wrote comes near this (earlier ones wrote commits of up to 16 items, an end's
 * detail up to 12 KiB of UTF-8): the bound of an entry read back, in logs of this and earlier versions.
 */
export const maxEntryBodyBytes = 64 * 1024
export const maxEntryBytes = entryHeaderBytes + maxEntryBodyBytes
/** A commit takes at most this many queued items; the rest wait for the next commit. */
export const maxItemsPerCommit = 16
/**
 * The largest commit entry (its 12 header bytes included) this listener writes: a commit takes the
 * queued items that fit, the rest wait for the next round, and an end's detail is cut to fit
 * (maxEndDetailBytes). It bounds a torn tail: a crash leaves at most the last commit's bytes torn or
 * zero, so a longer tail is damage (refused), not acks a crash never let be recorded.
 */
export const maxCommitBytes = 4 * 1024
/** An end's detail is logged cut to this many bytes of UTF-8, so that an end alone fits a commit. */
export const maxEndDetailBytes = 3 * 1024
export const packr = new Packr({ useRecords: false, int64AsType: 'number', mapsAsObjects: true })

const seqSchema = z.number().int().positive().max(Number.MAX_SAFE_INTEGER)
export const logItemSchema = z.discriminatedUnion('k', [
  z.object({ k: z.literal('ack'), fromSeq: seqSchema, toSeq: seqSchema, firstMs: epochMsSchema, lastMs: epochMsSchema }),
  z.object({
    k: z.literal('end'),
    reason: z.enum([...endReasons, 'vanished']),
    detail: z.string().max(4096).optional(),
    atMs: epochMsSchema,
  }),
  /** The writer said it has run long enough to be cut (first one only). */
  z.object({ k: z.literal('steady'), atMs: epochMsSchema }),
])
export type LogItem = z.infer<typeof logItemSchema>

export const logEntrySchema = z.discriminatedUnion('k', [
  z.object({ k: z.literal('log'), version: z.number().int().nonnegative(), runId: runIdSchema }),
  z.object({ k: z.literal('commit'), n: seqSchema, e: z.array(logItemSchema).min(1).max(maxItemsPerCommit) }),
  ...logItemSchema.options,
])
export type LogEntry = z.infer<typeof logEntrySchema>

/** One entry as written: length, xxh64, msgpack body. Exported for tests that craft logs (of either format). */
export function frameLogEntry(entry: object): Buffer {
  const body = packr.pack(entry)
  const framed = Buffer.allocUnsafe(entryHeaderBytes + body.length)
  framed.writeUInt32LE(body.length, 0)
  framed.writeBigUInt64LE(xxh64(body), 4)
  body.copy(framed, entryHeaderBytes)
  return framed
}

/** The first entry of a run's log: its format and the run it belongs to (a log copied into another run's directory is refused). */
export function logHeader(runId: string): Buffer {
  return frameLogEntry({ k: 'log', version: logFormatVersion, runId })
}

/** Commit number n of a log: the items one group commit makes durable, as one entry (tests craft hostile ones too). */
export function frameCommit(n: number, items: readonly object[]): Buffer {
  return frameLogEntry({ k: 'commit', n, e: items })
}

/**
 * The commit number and items of one commit frame as frameCommit made it (the journal carries them),
 * or what is wrong with it.
 */
export function parseCommitFrame(frame: Buffer): { n: number; items: LogItem[] } | { problem: string } {
  if (frame.length < entryHeaderBytes || frame.readUInt32LE(0) !== frame.length - entryHeaderBytes)
    return { problem: 'is not one whole commit entry' }
  const body = frame.subarray(entryHeaderBytes)
  if (xxh64(body) !== frame.readBigUInt64LE(4)) return { problem: 'does not match its checksum' }
  let decoded: unknown
  try {
    decoded = packr.unpack(body)
  } catch {
    return { problem: 'matches its checksum but is not msgpack' }
  }
  const parsed = logEntrySchema.safeParse(decoded)
  if (!parsed.success || parsed.data.k !== 'commit') return { problem: 'is not a commit entry' }
  if (frame.length > maxCommitBytes) return { problem: `is ${frame.length} bytes, over the commit bound of ${maxCommitBytes}` }
  return { n: parsed.data.n, items: parsed.data.e }
}
