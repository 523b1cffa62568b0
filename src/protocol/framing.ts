/**
 * Frames: a 4-byte big-endian length, then that many bytes of msgpack. Frames are self-contained
 * (no shared msgpack record structures), so any frame can be decoded alone.
 */
import { Packr } from 'msgpackr'
import type { z } from 'zod'

/** Client frames are small (acks, queries); 64 KiB is generous and bounds what a peer can make us buffer. */
export const maxClientFrameBytes = 64 * 1024
/** Server frames carry a run's ack spans for verify. */
export const maxServerFrameBytes = 256 * 1024 * 1024
export const frameHeaderBytes = 4

const packr = new Packr({ useRecords: false, int64AsType: 'number', mapsAsObjects: true })

export function encodeFrame(message: object): Buffer {
  const body = packr.pack(message)
  const frame = Buffer.allocUnsafe(frameHeaderBytes + body.length)
  frame.writeUInt32BE(body.length, 0)
  body.copy(frame, frameHeaderBytes)
  return frame
}

export class FrameError extends Error {
  constructor(
    readonly code: 'bad-frame' | 'too-large',
    message: string,
  ) {
    super(message)
  }
}

/**
 * Accumulates stream bytes and yields validated messages. Throws FrameError on an oversized frame,
 * undecodable msgpack or a message the schema rejects; the caller then drops the connection.
 */
export class FrameDecoder<T> {
  private pending: Buffer = Buffer.alloc(0)

  constructor(
    private readonly schema: z.ZodType<T>,
    private readonly maxFrameBytes: number,
  ) {}

  push(chunk: Buffer): T[] {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk])
    const messages: T[] = []
    let offset = 0
    while (this.pending.length - offset >= frameHeaderBytes) {
      const length = this.pending.readUInt32BE(offset)
      if (length > this.maxFrameBytes) {
        throw new FrameError('too-large', `frame of ${length} bytes exceeds the ${this.maxFrameBytes}-byte limit`)
      }
      if (this.pending.length - offset - frameHeaderBytes < length) break
      const body = this.pending.subarray(offset + frameHeaderBytes, offset + frameHeaderBytes + length)
      offset += frameHeaderBytes + length
      messages.push(this.decode(body))
    }
    this.pending = offset === this.pending.length ? Buffer.alloc(0) : this.pending.subarray(offset)
    return messages
  }

  private decode(body: Buffer): T {
    let value: unknown
    try {
      value = packr.unpack(body)
    } catch {
      throw new FrameError('bad-frame', 'frame is not valid msgpack')
    }
    const parsed = this.schema.safeParse(value)
    if (!parsed.success) {
      const issue = parsed.error.issues[0]
      const where = issue && issue.path.length > 0 ? ` at ${issue.path.join('.')}` : ''
      throw new FrameError('bad-frame', `invalid message${where}: ${issue?.message ?? 'rejected'}`)
    }
    return parsed.data
  }
}

/**
 * Ack frames for the write loop, encoded by hand into one reused buffer: the same message as
 * encodeFrame({ type: 'ack', runId, fromSeq, toSeq }) in plain msgpack (a 4-entry map), without a
 * general-purpose encoder on the path between "sync returned" and "ack sent".
 */
export class AckFrameEncoder {
  private readonly frame = Buffer.alloc(128)
  private readonly prefixBytes: number

  constructor(runId: string) {
    const f = this.frame
    let at = frameHeaderBytes
    f[at++] = 0x84 // fixmap, 4 entries
    at = writeFixStr(f, at, 'type')
    at = writeFixStr(f, at, 'ack')
    at = writeFixStr(f, at, 'runId')
    at = writeFixStr(f, at, runId)
    this.prefixBytes = at
  }

  /** The frame for fromSeq..toSeq; valid until the next call. */
  encode(fromSeq: number, toSeq: number): Buffer {
    const f = this.frame
    let at = writeFixStr(f, this.prefixBytes, 'fromSeq')
    at = writeUint(f, at, fromSeq)
    at = writeFixStr(f, at, 'toSeq')
    at = writeUint(f, at, toSeq)
    f.writeUInt32BE(at - frameHeaderBytes, 0)
    return f.subarray(0, at)
  }
}

function writeFixStr(buf: Buffer, at: number, text: string): number {
  if (text.length > 31) throw new Error(`fixstr too long: ${text}`)
  buf[at] = 0xa0 | text.length
  buf.write(text, at + 1, 'latin1')
  return at + 1 + text.length
}

/** msgpack's smallest unsigned integer form for a safe non-negative integer. */
function writeUint(buf: Buffer, at: number, value: number): number {
  if (value < 0x80) {
    buf[at] = value
    return at + 1
  }
  if (value < 0x100) {
    buf[at] = 0xcc
    buf[at + 1] = value
    return at + 2
  }
  if (value < 0x10000) {
    buf[at] = 0xcd
    buf.writeUInt16BE(value, at + 1)
    return at + 3
  }
  if (value < 0x1_0000_0000) {
    buf[at] = 0xce
    buf.writeUInt32BE(value, at + 1)
    return at + 5
  }
  buf[at] = 0xcf
  buf.writeUInt32BE(Math.floor(value / 0x1_0000_0000), at + 1)
  buf.writeUInt32BE(value >>> 0, at + 5)
  return at + 9
}
