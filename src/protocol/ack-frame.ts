/**
 * The listener's fast path for ack frames, the bulk of its traffic: reads the exact bytes
 * AckFrameEncoder sends (a 4-entry fixmap: type "ack", runId, fromSeq, toSeq, in that order, keys and
 * run id as fixstr, seqs as msgpack unsigned integers) at fixed offsets, with no general decoder and
 * no schema walk.
 *
 * It only ever accepts a subset of what msgpack + ackSchema accept, with the same value: a body that
 * is not exactly this shape (other key order, other encodings, signed or float seqs, unknown keys,
 * trailing bytes, any value out of range) returns undefined, and the caller decodes it the slow way,
 * which accepts or refuses it with the usual error. So a refusal always comes from the one general
 * path, with its message. test/unit/protocol/ack-frame.test.ts checks the agreement on mutated frames.
 */
import type { ClientMessage } from './messages.js'

type Ack = Extract<ClientMessage, { type: 'ack' }>

/** 0x84 fixmap(4), fixstr "type", fixstr "ack", fixstr "runId", then 0xb0 (fixstr of 16 bytes). */
const prefix = Buffer.from([0x84, 0xa4, ...Buffer.from('type'), 0xa3, ...Buffer.from('ack'), 0xa5, ...Buffer.from('runId'), 0xb0])
const runIdAt = prefix.length
const runIdBytes = 16
const fromKey = Buffer.from([0xa7, ...Buffer.from('fromSeq')])
const toKey = Buffer.from([0xa5, ...Buffer.from('toSeq')])
const twoTo32 = 0x1_0000_0000
/** The shortest fast-shape body: one-byte seqs. */
const minBodyBytes = runIdAt + runIdBytes + fromKey.length + 1 + toKey.length + 1

/**
 * A decoder for one connection: fn(body) is the ack in body, or undefined when body is anything but
 * the exact fast shape with valid values. The run id string of the previous ack is reused when the
 * bytes are the same (a writer acks one run, or a few, over and over).
 */
export function ackFastDecoder(): (body: Buffer) => Ack | undefined {
  const lastRunIdBytes = Buffer.alloc(runIdBytes)
  let lastRunId: string | undefined
  return (body) => {
    if (body.length < minBodyBytes || !matches(body, 0, prefix)) return undefined
    let sameRunId = lastRunId !== undefined
    for (let i = 0; i < runIdBytes; i++) {
      const c = body[runIdAt + i]!
      // Lower-case hex digits only, as runIdSchema's /^[0-9a-f]{16}$/.
      if (!((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66))) return undefined
      if (c !== lastRunIdBytes[i]) sameRunId = false
    }
    let at = runIdAt + runIdBytes
    if (!matches(body, at, fromKey)) return undefined
    at += fromKey.length
    const fromSeq = readSeq(body, at)
    if (fromSeq === undefined) return undefined
    at += uintBytes(body[at]!)
    if (at + toKey.length > body.length || !matches(body, at, toKey)) return undefined
    at += toKey.length
    const toSeq = readSeq(body, at)
    if (toSeq === undefined || at + uintBytes(body[at]!) !== body.length || toSeq < fromSeq) return undefined
    if (!sameRunId) {
      body.copy(lastRunIdBytes, 0, runIdAt, runIdAt + runIdBytes)
      lastRunId = body.toString('latin1', runIdAt, runIdAt + runIdBytes)
    }
    return { type: 'ack', runId: lastRunId!, fromSeq, toSeq }
  }
}

/** One call per frame: a stateless decoder, for tests and one-off use. */
export function decodeAckFast(body: Buffer): Ack | undefined {
  return ackFastDecoder()(body)
}

/** body[at..] starts with expected (the caller checked that body is long enough). */
function matches(body: Buffer, at: number, expected: Buffer): boolean {
  for (let i = 0; i < expected.length; i++) if (body[at + i] !== expected[i]) return false
  return true
}

/** Bytes of the msgpack unsigned integer starting with byte b (0 if b starts no unsigned integer). */
function uintBytes(b: number): number {
  if (b < 0x80) return 1
  if (b === 0xcc) return 2
  if (b === 0xcd) return 3
  if (b === 0xce) return 5
  if (b === 0xcf) return 9
  return 0
}

/** A seq as ackSchema takes it (an integer 1..MAX_SAFE_INTEGER) encoded as an unsigned integer at `at`; else undefined. */
function readSeq(body: Buffer, at: number): number | undefined {
  const b = body[at]!
  const size = uintBytes(b)
  if (size === 0 || at + size > body.length) return undefined
  let value: number
  if (size === 1) value = b
  else if (size === 2) value = body[at + 1]!
  else if (size === 3) value = body.readUInt16BE(at + 1)
  else if (size === 5) value = body.readUInt32BE(at + 1)
  else value = body.readUInt32BE(at + 1) * twoTo32 + body.readUInt32BE(at + 5)
  return value >= 1 && value <= Number.MAX_SAFE_INTEGER ? value : undefined
}
