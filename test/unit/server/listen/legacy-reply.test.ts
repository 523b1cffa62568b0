/**
 * A protocol 2 or 3 runs reply is built a page of spans at a time (legacy-reply.ts): its bytes must
 * decode to exactly the message one encodeFrame of every span inline gives, whatever the sizes (array
 * headers of 4, 16 and 32 bits, seqs and times of every msgpack width), and its length header must
 * be the body's.
 */
import t from 'tap'
import { join } from 'node:path'
import { unpack } from 'msgpackr'
import { AckStore } from '../../../../src/store/ack-store.js'
import { legacyRunsReply, Turns } from '../../../../src/server/listen/legacy-reply.js'
import { encodeFrame } from '../../../../src/protocol/framing.js'
import { craftLongRun } from '../../../fixtures/long-run-store.js'
import { tempDir } from '../../../fixtures/cli.js'
import { runIdOf, runMeta } from '../../../fixtures/peer.js'

async function bothReplies(store: AckStore, host: string, requestedPath: string): Promise<{ streamed: Buffer; whole: Buffer }> {
  const claims = (): ReturnType<AckStore['claims']> => store.claims(host, requestedPath)
  const heads = await store.queryAsync(host, requestedPath, undefined, { maxInlineSpans: 0 })
  const pieces = await legacyRunsReply(
    heads,
    claims,
    (runId, afterSeq, throughSeq, maxCount) => store.spanPageAsync(runId, afterSeq, throughSeq, maxCount),
    () => false,
  )
  const whole = encodeFrame({ type: 'runs', runs: await store.queryAsync(host, requestedPath), claims: claims() })
  return { streamed: Buffer.concat(pieces!), whole }
}

/** The frame's message; throws if its length header is not its body's length. */
function decoded(frame: Buffer): unknown {
  if (frame.readUInt32BE(0) !== frame.length - 4)
    throw new Error(`a length header of ${frame.readUInt32BE(0)} on a body of ${frame.length - 4} bytes`)
  return unpack(frame.subarray(4))
}

t.test('a long group read back from its logs (more than 65,535 spans a run)', async (t) => {
  const dir = tempDir(t)
  const long = craftLongRun({ dir, file: join(dir, 'data'), methods: ['fdatasync', 'fsync'], spansPerRun: 70_000 })
  const store = await AckStore.open(dir)
  t.teardown(() => store.close())
  const { streamed, whole } = await bothReplies(store, long.metas[0]!.host, join(dir, 'data'))
  const message = decoded(streamed) as { runs: Array<{ spans: unknown[] }> }
  t.same(
    message.runs.map((r) => r.spans.length),
    [70_000, 70_000],
    'every span of both runs',
  )
  t.same(message, decoded(whole), 'the same message as one encode of every span')
})

t.test('live runs with a few spans, sixteen, and none', async (t) => {
  const dir = tempDir(t)
  const store = await AckStore.open(dir)
  t.teardown(() => store.close())
  const groupId = runIdOf(0x1e6a)
  const announcedMs = Date.now()
  const spansOf = [3, 16, 0, 17]
  const runIds = spansOf.map((_, i) => runIdOf(0x1e6a + 1 + i))
  for (const [i, runId] of runIds.entries()) {
    await store.createRun(
      runMeta(runId, {
        groupId,
        host: 'box',
        requestedPath: '/data/db',
        path: `/data/db.${i}`,
        method: (['fsync', 'fdatasync', 'open_sync', 'open_datasync'] as const)[i]!,
      }),
      announcedMs,
    )
  }
  // Acks further apart than a span's window each start a span (stamped by the listener's clock); the seqs grow past 255 and 65,535.
  for (let k = 0; k < Math.max(...spansOf); k++) {
    for (const [i, runId] of runIds.entries()) if (k < spansOf[i]!) store.appendAck(runId, k * 5000 + 1, (k + 1) * 5000, Date.now())
    await new Promise((resolve) => setTimeout(resolve, 130))
  }
  const { streamed, whole } = await bothReplies(store, 'box', '/data/db')
  const message = decoded(streamed) as { runs: Array<{ spans: unknown[] }> }
  t.same(
    message.runs.map((r) => r.spans.length).sort((a, b) => a - b),
    [...spansOf].sort((a, b) => a - b),
    `each run with its spans: ${JSON.stringify(message.runs.map((r) => r.spans.length))}`,
  )
  t.same(message, decoded(whole), 'the same message as one encode of every span')
})

t.test('turns: at most two at once, the rest in order', async (t) => {
  const turns = new Turns(2)
  const order: number[] = []
  const first = await turns.take()
  const second = await turns.take()
  const waiting = [3, 4].map((n) =>
    turns.take().then((giveBack) => {
      order.push(n)
      return giveBack
    }),
  )
  await new Promise((resolve) => setImmediate(resolve))
  t.same(order, [], 'nobody past two')
  first()
  first() // giving back twice gives one turn
  const third = await waiting[0]!
  t.same(order, [3], 'the first waiting one, once')
  second()
  ;(await waiting[1]!)()
  third()
  t.same(order, [3, 4])
  const again = await turns.take()
  again()
})
