/**
 * The listener's fast ack decoder agrees with msgpack + zod on every frame: the same accept or refuse
 * (with the same error message), and the same value. Frames are valid acks and every mutation of
 * them: each byte replaced, truncations, extensions, seqs near 2^53, negative and float seqs,
 * other run ids, other key orders and extra keys, plus seeded random bytes behind a valid prefix.
 */
import t, { type Test } from 'tap'
import { AckFrameEncoder, FrameDecoder, encodeFrame, maxClientFrameBytes } from '../../../src/protocol/framing.js'
import { ackFastDecoder, decodeAckFast } from '../../../src/protocol/ack-frame.js'
import { clientMessageSchema } from '../../../src/protocol/messages.js'

type Outcome = { ok: unknown } | { refused: string }

function outcome(decoder: FrameDecoder<unknown>, frame: Buffer): Outcome {
  try {
    return { ok: decoder.push(frame) }
  } catch (error) {
    return { refused: `${(error as { code?: string }).code}: ${(error as Error).message}` }
  }
}

/** A frame around body (the length header says its true length). */
function framed(body: Buffer): Buffer {
  const frame = Buffer.alloc(4 + body.length)
  frame.writeUInt32BE(body.length, 0)
  body.copy(frame, 4)
  return frame
}

/** Decodes body both ways, on fresh decoders, and checks they agree; returns whether the fast path took it. */
function agree(t: Test, body: Buffer, what: string): boolean {
  const slow = outcome(new FrameDecoder(clientMessageSchema, maxClientFrameBytes), framed(body))
  const fast = outcome(new FrameDecoder(clientMessageSchema, maxClientFrameBytes, ackFastDecoder()), framed(body))
  const direct = decodeAckFast(body)
  const same = JSON.stringify(slow) === JSON.stringify(fast)
  if (!same) t.fail(`${what}: slow ${JSON.stringify(slow)}, fast ${JSON.stringify(fast)} (body ${body.toString('hex')})`)
  if (direct !== undefined && !('ok' in slow && JSON.stringify(slow.ok) === JSON.stringify([direct]))) {
    t.fail(`${what}: the fast path took a body the slow path decodes otherwise: ${JSON.stringify(slow)} vs ${JSON.stringify(direct)}`)
  }
  return direct !== undefined
}

/** xorshift32, seeded: every run checks the same frames. */
function random(seed: number): () => number {
  let x = seed >>> 0 || 1
  return () => {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    return (x >>> 0) / 0x1_0000_0000
  }
}

const runId = '0123456789abcdef'
const seqs = [1, 2, 127, 128, 255, 256, 65535, 65536, 2 ** 32 - 1, 2 ** 32, 2 ** 40 + 3, 2 ** 53 - 2, Number.MAX_SAFE_INTEGER]

function ackBody(fromSeq: number, toSeq: number, id = runId): Buffer {
  return Buffer.from(new AckFrameEncoder(id).encode(fromSeq, toSeq).subarray(4))
}

t.test('valid ack frames take the fast path and decode as msgpack + zod decode them', async (t) => {
  let fast = 0
  for (const fromSeq of seqs) {
    for (const toSeq of seqs) {
      if (agree(t, ackBody(fromSeq, toSeq), `ack ${fromSeq}-${toSeq}`)) fast++
    }
  }
  // Every pair with toSeq >= fromSeq is valid; the others are refused by the slow path.
  t.equal(fast, (seqs.length * (seqs.length + 1)) / 2)
})

t.test('every byte of a valid frame replaced, every truncation and extension: both paths agree', async (t) => {
  const next = random(0x5eed)
  let cases = 0
  for (const [fromSeq, toSeq] of [
    [1, 1],
    [300, 70_000],
    [2 ** 32, 2 ** 40],
    [2 ** 53 - 2, Number.MAX_SAFE_INTEGER],
  ] as const) {
    const body = ackBody(fromSeq, toSeq)
    for (let i = 0; i < body.length; i++) {
      const replacements = new Set([
        0x00,
        0x01,
        0x7f,
        0x80,
        0xff,
        body[i]! ^ 0x01,
        body[i]! ^ 0x20,
        body[i]! ^ 0x80,
        (body[i]! + 1) & 0xff,
        (body[i]! - 1) & 0xff,
      ])
      for (let r = 0; r < 6; r++) replacements.add(Math.floor(next() * 256))
      for (const value of [
        ...replacements,
        ...[0xcc, 0xcd, 0xce, 0xcf, 0xd0, 0xd1, 0xd2, 0xd3, 0xca, 0xcb, 0xc0, 0xc2, 0xc3, 0xa0, 0xd9],
      ]) {
        const mutated = Buffer.from(body)
        mutated[i] = value
        agree(t, mutated, `byte ${i} = ${value}`)
        cases++
      }
    }
    for (let length = 0; length < body.length; length++) {
      agree(t, body.subarray(0, length), `truncated to ${length}`)
      cases++
    }
    for (const tail of [[0x00], [0xc0], [0x01, 0x02], [0xa0], [0x80], Array.from({ length: 9 }, () => Math.floor(next() * 256))]) {
      agree(t, Buffer.concat([body, Buffer.from(tail)]), `extended by ${tail}`)
      cases++
    }
  }
  t.ok(cases > 1000, `${cases} mutated frames`)
})

t.test('seqs out of range, negative, float, or beyond 2^53; other run ids, key orders and extra keys', async (t) => {
  const encoded = [
    { type: 'ack', runId, fromSeq: 0, toSeq: 1 },
    { type: 'ack', runId, fromSeq: -1, toSeq: 1 },
    { type: 'ack', runId, fromSeq: 1.5, toSeq: 2 },
    { type: 'ack', runId, fromSeq: 1, toSeq: 2 ** 53 },
    { type: 'ack', runId, fromSeq: 1, toSeq: 2 ** 64 },
    { type: 'ack', runId, fromSeq: 1, toSeq: Number.NaN },
    { type: 'ack', runId, fromSeq: 5, toSeq: 4 },
    { type: 'ack', runId: '0123456789ABCDEF', fromSeq: 1, toSeq: 1 },
    { type: 'ack', runId: '0123456789abcde', fromSeq: 1, toSeq: 1 },
    { type: 'ack', runId: '0123456789abcdeg', fromSeq: 1, toSeq: 1 },
    { type: 'ack', runId: '0123456789abcdéf', fromSeq: 1, toSeq: 1 },
    { type: 'ack', runId, fromSeq: '1', toSeq: 1 },
    { type: 'ack', runId, toSeq: 2, fromSeq: 1 },
    { runId, type: 'ack', fromSeq: 1, toSeq: 2 },
    { type: 'ack', runId, fromSeq: 1, toSeq: 2, extra: true },
    { type: 'ack', runId, fromSeq: 1 },
    { type: 'end', runId, reason: 'duration' },
  ]
  for (const message of encoded) agree(t, encodeFrame(message).subarray(4), JSON.stringify(message))
  // Hand-made encodings msgpack allows and the encoder never makes: signed and wider-than-needed integers, float64.
  const prefix = ackBody(1, 1).subarray(0, -8) // up to the fromSeq key
  const toKey = Buffer.from([0xa5, ...Buffer.from('toSeq')])
  const variants: Array<[string, number[], number[]]> = [
    ['int8 fromSeq', [0xd0, 0x05], [0x06]],
    ['int8 negative', [0xd0, 0xff], [0x06]],
    ['uint16 small', [0xcd, 0x00, 0x05], [0xcd, 0x00, 0x06]],
    ['uint64 small', [0xcf, 0, 0, 0, 0, 0, 0, 0, 5], [0x06]],
    ['uint64 2^53', [0x01], [0xcf, 0, 0x20, 0, 0, 0, 0, 0, 0]],
    ['uint64 2^53-1', [0x01], [0xcf, 0, 0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]],
    ['uint64 max', [0x01], [0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]],
    ['float64 seq', [0xcb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0], [0x02]],
    ['float32 seq', [0xca, 0x3f, 0x80, 0, 0], [0x02]],
    ['negative fixint', [0xff], [0x02]],
    ['nil seq', [0xc0], [0x02]],
  ]
  for (const [what, from, to] of variants) agree(t, Buffer.concat([prefix, Buffer.from(from), toKey, Buffer.from(to)]), what)
})

t.test('a connection decoder that reuses the run id string still returns each frame its own run id', async (t) => {
  const decoder = new FrameDecoder(clientMessageSchema, maxClientFrameBytes, ackFastDecoder())
  const a = new AckFrameEncoder('0123456789abcdef')
  const b = new AckFrameEncoder('0123456789abcdee')
  const frames = Buffer.concat([Buffer.from(a.encode(1, 1)), Buffer.from(b.encode(1, 2)), Buffer.from(a.encode(2, 3))])
  t.same(decoder.push(frames), [
    { type: 'ack', runId: '0123456789abcdef', fromSeq: 1, toSeq: 1 },
    { type: 'ack', runId: '0123456789abcdee', fromSeq: 1, toSeq: 2 },
    { type: 'ack', runId: '0123456789abcdef', fromSeq: 2, toSeq: 3 },
  ])
})
