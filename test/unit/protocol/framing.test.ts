/** Framing: the hand-encoded ack frames decode to what they say, and bad streams are refused. */
import t from 'tap'
import { AckFrameEncoder, FrameDecoder, encodeFrame, maxClientFrameBytes } from '../../../src/protocol/framing.js'
import { clientMessageSchema } from '../../../src/protocol/messages.js'

t.test('hand-encoded ack frames decode exactly, at every integer width', async (t) => {
  const encoder = new AckFrameEncoder('0123456789abcdef')
  const decoder = new FrameDecoder(clientMessageSchema, maxClientFrameBytes)
  const values = [1, 127, 128, 255, 256, 65535, 65536, 2 ** 32 - 1, 2 ** 32, 2 ** 40 + 3, Number.MAX_SAFE_INTEGER]
  for (const fromSeq of values) {
    const toSeq = Math.min(Number.MAX_SAFE_INTEGER, fromSeq + 1)
    const frame = Buffer.from(encoder.encode(fromSeq, toSeq))
    t.same(decoder.push(frame), [{ type: 'ack', runId: '0123456789abcdef', fromSeq, toSeq }], `seq ${fromSeq}`)
  }
})

t.test('frames split across chunks reassemble; oversized and garbage frames are refused', async (t) => {
  const decoder = new FrameDecoder(clientMessageSchema, maxClientFrameBytes)
  const frame = encodeFrame({ type: 'hello', protocol: 2, role: 'writer' })
  t.same(decoder.push(frame.subarray(0, 3)), [])
  t.same(decoder.push(frame.subarray(3, 7)), [])
  t.same(decoder.push(Buffer.concat([frame.subarray(7), frame])), [
    { type: 'hello', protocol: 2, role: 'writer' },
    { type: 'hello', protocol: 2, role: 'writer' },
  ])
  t.throws(() => new FrameDecoder(clientMessageSchema, 16).push(Buffer.from([0, 0, 0, 17])), { code: 'too-large' })
  t.throws(() => new FrameDecoder(clientMessageSchema, 16).push(Buffer.from([0, 0, 0, 1, 0xc1])), { code: 'bad-frame' })
  t.throws(() => new FrameDecoder(clientMessageSchema, 64).push(encodeFrame({ type: 'ack', runId: 'x' })), {
    code: 'bad-frame',
    message: /invalid message at runId/,
  })
})

t.test('a 64 KiB frame sent one byte at a time is reassembled with linear copying', async (t) => {
  const decoder = new FrameDecoder(clientMessageSchema, maxClientFrameBytes)
  const detail = 'x'.repeat(maxClientFrameBytes - 200)
  const frame = encodeFrame({ type: 'end', runId: '0123456789abcdef', reason: 'error', detail: detail.slice(0, 4096) })
  // A frame of the maximum size: schema-invalid (detail too long), but it must be reassembled first.
  const big = encodeFrame({ type: 'end', runId: '0123456789abcdef', reason: 'error', detail })
  t.ok(big.length > 60_000 && big.length <= maxClientFrameBytes + 4)
  let early = 0
  for (let i = 0; i < big.length - 1; i++) early += decoder.push(big.subarray(i, i + 1)).length
  t.equal(early, 0, 'nothing decoded before the last byte')
  t.throws(() => decoder.push(big.subarray(big.length - 1)), { code: 'bad-frame', message: /detail/ })
  t.ok(
    decoder.copiedBytes < 4 * big.length,
    `copied ${decoder.copiedBytes} bytes for a ${big.length}-byte frame (quadratic would be ~${Math.round(big.length ** 2 / 2 / 1e6)} MB)`,
  )

  const again = new FrameDecoder(clientMessageSchema, maxClientFrameBytes)
  for (let i = 0; i < frame.length - 1; i++) again.push(frame.subarray(i, i + 1))
  t.match(again.push(frame.subarray(frame.length - 1)), [{ type: 'end', detail: detail.slice(0, 4096) }])
})

t.test('any split of a stream of frames decodes to the same messages', async (t) => {
  const messages = Array.from({ length: 300 }, (_, i) =>
    i % 3 === 0
      ? { type: 'ack', runId: '0123456789abcdef', fromSeq: i + 1, toSeq: i + 1 }
      : { type: 'query', host: 'h', requestedPath: '/p'.repeat(1 + (i % 50)) },
  )
  const stream = Buffer.concat(messages.map(encodeFrame))
  let seed = 12345
  const random = (n: number): number => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31
    return seed % n
  }
  for (let trial = 0; trial < 50; trial++) {
    const decoder = new FrameDecoder(clientMessageSchema, maxClientFrameBytes)
    const got: unknown[] = []
    for (let at = 0; at < stream.length; ) {
      const n = 1 + random(trial % 2 === 0 ? 16 : 2000)
      got.push(...decoder.push(stream.subarray(at, at + n)))
      at += n
    }
    t.same(got, messages, `split ${trial}`) || t.bailout()
  }
})
