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
 *
 * Bytes wait in one buffer that grows by doubling and is compacted only when full, so a frame that
 * arrives one byte at a time costs O(frame size) copying, not O(size^2). The buffer never holds more
 * than one frame's header and body beyond what a single chunk brings (the length is checked as soon as
 * its 4 bytes are in).
 */
export class FrameDecoder<T> {
  private buffer: Buffer = Buffer.alloc(0)
  private start = 0
  private end = 0
  /** Bytes copied into the reassembly buffer so far (for tests of the copying cost). */
  copiedBytes = 0

  /**
   * fastDecode, when given, is tried on every frame body first: it returns the message for the
   * bodies it recognises (a subset of what msgpack + schema accept, with the same value) and
   * undefined for anything else, which is then decoded and validated the general way.
   */
  constructor(
    private readonly schema: z.ZodType<T>,
    private readonly maxFrameBytes: number,
    private readonly fastDecode?: (body: Buffer) => T | undefined,
  ) {}

  push(chunk: Buffer): T[] {
    const messages: T[] = []
    let input = chunk
    let offset = 0
    if (this.end > this.start) {
      // Complete the buffered frame (or at least its header) from the chunk, then go on in the chunk.
      offset = this.fill(chunk, 0)
      const buffered = this.end - this.start
      if (buffered < frameHeaderBytes) return messages
      const length = this.checkedLength(this.buffer, this.start)
      if (buffered < frameHeaderBytes + length) {
        offset = this.fill(chunk, offset)
        if (this.end - this.start < frameHeaderBytes + length) return messages
      }
      messages.push(this.decode(this.buffer.subarray(this.start + frameHeaderBytes, this.start + frameHeaderBytes + length)))
      this.start = this.end = 0
      input = chunk
    }
    while (input.length - offset >= frameHeaderBytes) {
      const length = this.checkedLength(input, offset)
      if (input.length - offset - frameHeaderBytes < length) break
      const body = input.subarray(offset + frameHeaderBytes, offset + frameHeaderBytes + length)
      offset += frameHeaderBytes + length
      messages.push(this.decode(body))
    }
    if (offset < input.length) this.append(input.subarray(offset))
    return messages
  }

  /**
   * Copies from chunk[offset..] just enough to complete the buffered header, or then the buffered
   * frame; returns the new offset in chunk.
   */
  private fill(chunk: Buffer, offset: number): number {
    const buffered = this.end - this.start
    const wanted =
      buffered < frameHeaderBytes ? frameHeaderBytes - buffered : frameHeaderBytes + this.checkedLength(this.buffer, this.start) - buffered
    const taken = Math.min(wanted, chunk.length - offset)
    this.append(chunk.subarray(offset, offset + taken))
    return offset + taken
  }

  private append(bytes: Buffer): void {
    if (bytes.length === 0) return
    if (this.end + bytes.length > this.buffer.length) {
      const kept = this.end - this.start
      const needed = kept + bytes.length
      if (needed > this.buffer.length) {
        const grown = Buffer.allocUnsafe(Math.max(needed, this.buffer.length * 2, 256))
        this.buffer.copy(grown, 0, this.start, this.end)
        this.copiedBytes += kept
        this.buffer = grown
      } else {
        this.buffer.copy(this.buffer, 0, this.start, this.end)
        this.copiedBytes += kept
      }
      this.start = 0
      this.end = kept
    }
    bytes.copy(this.buffer, this.end)
    this.copiedBytes += bytes.length
    this.end += bytes.length
  }

  private checkedLength(bytes: Buffer, at: number): number {
    const length = bytes.readUInt32BE(at)
    if (length > this.maxFrameBytes) {
      throw new FrameError('too-large', `frame of ${length} bytes exceeds the ${this.maxFrameBytes}-byte limit`)
    }
    return length
  }

  private decode(body: Buffer): T {
    const fast = this.fastDecode?.(body)
    if (fast !== undefined) return fast
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
