/**
 * A runs reply for a protocol 2 or 3 verifier, which takes every span of the group in one frame (up
 * to maxLegacyReplySpans, ~30 MB): built a page of spans at a time, yielding to the event loop between
 * pages, so that hellos and acks are served meanwhile (one synchronous encode held the loop for
 * seconds). The bytes decode to the same message as encodeFrame({ type: 'runs', runs, claims }) with
 * every span inline: msgpack is assembled by hand around values msgpackr packs (maps, arrays and
 * their headers are standard msgpack, whatever order the pieces were packed in).
 */
import { setImmediate as nextTurn } from 'node:timers/promises'
import { Packr } from 'msgpackr'
import { frameHeaderBytes } from '../../protocol/framing.js'
import { spanPageEntryBytes, type Claim, type StoredRun } from '../../protocol/messages.js'

/** The same options as framing.ts's packer: the pieces decode as encodeFrame's would. */
const packr = new Packr({ useRecords: false, int64AsType: 'number', mapsAsObjects: true })

/** Spans per page read and packed between yields: ~240 KB of msgpack, about a millisecond. */
export const legacySlicesSpans = 8192

/** Reads the spans of a run holding seqs afterSeq+1..throughSeq, at most maxCount, as a span-page; undefined if the run no longer has them. */
export type PageReader = (runId: string, afterSeq: number, throughSeq: number, maxCount: number) => Promise<Buffer | undefined>

/**
 * The frame's pieces, in order (the 4-byte length first): write them one after another. heads are the
 * runs without their spans (ackedThroughSeq says how far each goes); every span through there is read
 * with readPage. Throws if a run's spans end short of its ackedThroughSeq (the caller refuses the query).
 */
export async function legacyRunsReply(
  heads: readonly StoredRun[],
  claims: () => readonly Claim[],
  readPage: PageReader,
  aborted: () => boolean,
): Promise<Buffer[] | undefined> {
  const pieces: Buffer[] = [
    Buffer.alloc(frameHeaderBytes),
    mapHeader(3),
    pack('type'),
    pack('runs'),
    pack('runs'),
    arrayHeader(heads.length),
  ]
  for (const head of heads) {
    const spans = await spanPieces(head, readPage, aborted)
    if (spans === undefined) return undefined
    const fields = Object.entries(head).filter(([key]) => key !== 'spans')
    pieces.push(mapHeader(fields.length + 1))
    for (const [key, value] of fields) pieces.push(pack(key), pack(value))
    pieces.push(pack('spans'), arrayHeader(spans.count), ...spans.pieces)
  }
  pieces.push(pack('claims'), pack(claims()))
  const bodyBytes = pieces.reduce((sum, piece) => sum + piece.length, 0) - frameHeaderBytes
  pieces[0]!.writeUInt32BE(bodyBytes, 0)
  return pieces
}

/** A run's spans through its ackedThroughSeq, as packed array items without the array's header. */
async function spanPieces(
  head: StoredRun,
  readPage: PageReader,
  aborted: () => boolean,
): Promise<{ count: number; pieces: Buffer[] } | undefined> {
  const runId = head.meta.runId
  const throughSeq = head.ackedThroughSeq ?? 0
  const pieces: Buffer[] = []
  let count = 0
  let afterSeq = 0
  while (afterSeq < throughSeq) {
    await nextTurn()
    if (aborted()) return undefined
    const page = await readPage(runId, afterSeq, throughSeq, legacySlicesSpans)
    const spans = page === undefined ? 0 : page.length / spanPageEntryBytes
    if (spans === 0) throw new Error(`the spans of run ${runId} end at seq ${afterSeq}, before seq ${throughSeq}, its last acknowledged`)
    const packed = packSpanPage(page!, afterSeq)
    pieces.push(packed.bytes)
    count += spans
    afterSeq = packed.throughSeq
  }
  return { count, pieces }
}

/**
 * A span-page's spans as msgpack array items, each [fromSeq, toSeq, firstAckMs, lastAckMs] (the span
 * before it ends at fromSeq - 1): written straight from the page, no array or object per span.
 */
function packSpanPage(page: Buffer, afterSeq: number): { bytes: Buffer; throughSeq: number } {
  const out = Buffer.allocUnsafe((page.length / spanPageEntryBytes) * maxPackedSpanBytes)
  let at = 0
  let fromSeq = afterSeq + 1
  for (let entry = 0; entry < page.length; entry += spanPageEntryBytes) {
    const toSeq = page.readDoubleLE(entry)
    out[at++] = 0x94 // an array of 4
    at = packNumber(out, at, fromSeq)
    at = packNumber(out, at, toSeq)
    at = packNumber(out, at, page.readDoubleLE(entry + 8))
    at = packNumber(out, at, page.readDoubleLE(entry + 16))
    fromSeq = toSeq + 1
  }
  return { bytes: out.subarray(0, at), throughSeq: fromSeq - 1 }
}

/** A span's array header and four numbers of at most 9 bytes each. */
const maxPackedSpanBytes = 1 + 4 * 9

/** A number as msgpack: an unsigned integer in the shortest form up to 32 bits, anything else a float64 (which decodes to the same number). */
function packNumber(out: Buffer, at: number, value: number): number {
  if (!Number.isInteger(value) || value < 0 || value > 0xffffffff) {
    out[at] = 0xcb
    out.writeDoubleBE(value, at + 1)
    return at + 9
  }
  if (value < 0x80) {
    out[at] = value
    return at + 1
  }
  if (value < 0x100) {
    out[at] = 0xcc
    out[at + 1] = value
    return at + 2
  }
  if (value < 0x10000) {
    out[at] = 0xcd
    out.writeUInt16BE(value, at + 1)
    return at + 3
  }
  out[at] = 0xce
  out.writeUInt32BE(value, at + 1)
  return at + 5
}

/** A copy: msgpackr's result may share its buffer with a later pack. */
function pack(value: unknown): Buffer {
  return Buffer.from(packr.pack(value))
}

function arrayHeader(count: number): Buffer {
  return header(count, 0x90, 0xdc, 0xdd)
}

function mapHeader(count: number): Buffer {
  return header(count, 0x80, 0xde, 0xdf)
}

/** msgpack's fix, 16-bit and 32-bit forms of an array's or a map's length. */
function header(count: number, fix: number, with16: number, with32: number): Buffer {
  if (count < 16) return Buffer.of(fix | count)
  if (count < 0x10000) return Buffer.of(with16, count >> 8, count & 0xff)
  const bytes = Buffer.alloc(5)
  bytes[0] = with32
  bytes.writeUInt32BE(count, 1)
  return bytes
}

/** At most `max` holders at once; the rest wait their turn in order (legacy replies each hold ~30 MB while built). */
export class Turns {
  private holders = 0
  private readonly waiting: Array<() => void> = []

  constructor(private readonly max: number) {}

  /** Resolves with the function that gives the turn back (call it exactly once). */
  async take(): Promise<() => void> {
    if (this.holders >= this.max) await new Promise<void>((resolve) => this.waiting.push(resolve))
    else this.holders++
    let given = false
    return () => {
      if (given) return
      given = true
      const next = this.waiting.shift()
      if (next === undefined) this.holders--
      else next() // the turn passes on: holders stays
    }
  }
}
