/**
 * The fast ack decoder against msgpack + the schema on every unsigned integer width for both seqs
 * (non-minimal encodings included), on values around 2^32 and 2^53, and with one decoder reused
 * across two run ids: whatever the fast path accepts, the general path accepts with the same value.
 */
import t from 'tap'
import { Packr } from 'msgpackr'
import { ackFastDecoder } from '../../src/protocol/ack-frame.js'
import { AckFrameEncoder } from '../../src/protocol/framing.js'
import { clientMessageSchema } from '../../src/protocol/messages.js'

const packr = new Packr({ useRecords: false, int64AsType: 'number', mapsAsObjects: true })
function general(body: Buffer): unknown {
  try {
    const parsed = clientMessageSchema.safeParse(packr.unpack(body))
    return parsed.success ? parsed.data : undefined
  } catch {
    return undefined
  }
}

/** value as a msgpack unsigned integer with the given tag (0xcc..0xcf), any width that holds it. */
function uint(tag: 0xcc | 0xcd | 0xce | 0xcf, value: bigint): Buffer {
  const size = { 204: 1, 205: 2, 206: 4, 207: 8 }[tag]
  const bytes = Buffer.alloc(size + 1)
  bytes[0] = tag
  let v = value
  for (let i = size; i >= 1; i--) {
    bytes[i] = Number(v & 0xffn)
    v >>= 8n
  }
  return bytes
}

const runId = '0123456789abcdef'
const head = Buffer.from(new AckFrameEncoder(runId).encode(1, 1)).subarray(4, 4 + 1 + 5 + 4 + 6 + 17 + 8) // through the fromSeq key
const toKey = Buffer.from([0xa5, ...Buffer.from('toSeq')])
const values = [
  0n,
  1n,
  127n,
  128n,
  255n,
  256n,
  65_535n,
  65_536n,
  2n ** 32n - 1n,
  2n ** 32n,
  2n ** 53n - 1n,
  2n ** 53n,
  2n ** 53n + 1n,
  2n ** 64n - 1n,
]
const tags = [0xcc, 0xcd, 0xce, 0xcf] as const

t.test('every width of both seqs: the fast path never accepts more, nor another value', async (t) => {
  const decode = ackFastDecoder()
  let accepted = 0
  let checked = 0
  for (const fromTag of tags)
    for (const toTag of tags)
      for (const from of values)
        for (const to of values) {
          const fromBytes = { 204: 1n, 205: 2n, 206: 4n, 207: 8n }[fromTag]
          const toBytes = { 204: 1n, 205: 2n, 206: 4n, 207: 8n }[toTag]
          if (from >= 1n << (8n * fromBytes) || to >= 1n << (8n * toBytes)) continue
          const body = Buffer.concat([head, uint(fromTag, from), toKey, uint(toTag, to)])
          const fast = decode(Buffer.from(body))
          const slow = general(Buffer.from(body))
          checked++
          if (fast === undefined) continue
          accepted++
          if (JSON.stringify(fast) !== JSON.stringify(slow))
            t.fail(`fast ${JSON.stringify(fast)} vs general ${JSON.stringify(slow)} for ${body.toString('hex')}`)
        }
  t.ok(accepted > 0 && accepted < checked, `fast path accepted ${accepted} of ${checked} encodings, each as the general path does`)
})

t.test('one decoder, two run ids in turn: each ack keeps its own run id', async (t) => {
  const decode = ackFastDecoder()
  const encoders = [new AckFrameEncoder(runId), new AckFrameEncoder('fedcba9876543210')]
  for (let i = 0; i < 8; i++) {
    for (const [k, encoder] of encoders.entries()) {
      const body = Buffer.from(encoder.encode(i + 1, i + 2)).subarray(4)
      t.same(decode(body), general(body), `ack ${i + 1} of run ${k + 1}`)
    }
  }
})
