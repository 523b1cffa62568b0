/** Framing: the hand-encoded ack frames decode to what they say, and bad streams are refused. */
import t from 'tap'
import { AckFrameEncoder, FrameDecoder, encodeFrame, maxClientFrameBytes } from '../../src/protocol/framing.js'
import { clientMessageSchema } from '../../src/protocol/messages.js'

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
  t.throws(() => new FrameDecoder(clientMessageSchema, 64).push(encodeFrame({ type: 'ack', runId: 'x' })), { code: 'bad-frame', message: /invalid message at runId/ })
})
