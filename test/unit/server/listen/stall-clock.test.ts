/**
 * The 30 s unread rule (replyStallMs) drops a verifier whose peer took nothing of its reply for that
 * long. Time the listener's own thread was held up is not the peer's: it could neither be fed nor be
 * seen taking anything. Here the listener shares its thread with the reader, and the thread is held
 * for three times replyStallMs while the reader's reply waits (the reader had paused half of
 * replyStallMs before); another query then asks for room.
 */
import t from 'tap'
import { connect, type Socket } from 'node:net'
import { join } from 'node:path'
import { Listener } from '../../../../src/server/listen/listener.js'
import { encodeFrame } from '../../../../src/protocol/framing.js'
import { craftLongRun } from '../../../fixtures/long-run-store.js'
import { tempDir } from '../../../fixtures/cli.js'

const replyStallMs = 1000

async function verifier(
  port: number,
  protocol: number,
): Promise<{ socket: Socket; bytes: () => number; closed: () => boolean; frames: () => number }> {
  const socket = connect({ host: '127.0.0.1', port })
  await new Promise((resolve) => socket.once('connect', resolve))
  let bytes = 0
  let closed = false
  const chunks: Buffer[] = []
  socket.on('data', (c: Buffer) => {
    bytes += c.length
    chunks.push(c)
  })
  /** Complete frames received so far. */
  const frames = (): number => {
    const all = Buffer.concat(chunks)
    let count = 0
    for (let at = 0; at + 4 <= all.length && at + 4 + all.readUInt32BE(at) <= all.length; at += 4 + all.readUInt32BE(at)) count++
    return count
  }
  socket.on('error', () => (closed = true))
  socket.on('close', () => (closed = true))
  socket.write(encodeFrame({ type: 'hello', protocol, role: 'verifier' }))
  return { socket, bytes: () => bytes, closed: () => closed, frames }
}

t.test("the listener's own blocking does not count as a reader's stall", async (t) => {
  const dir = tempDir(t)
  const long = craftLongRun({ dir, file: join(dir, 'data'), methods: ['fdatasync'], spansPerRun: 499_000 }) // ~14 MB: more than loopback's receive buffer holds
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir, replyStallMs })
  t.teardown(() => listener.close())
  const port = listener.address().port
  const reader = await verifier(port, 3)
  t.teardown(() => reader.socket.destroy())
  const asker = await verifier(port, 4)
  t.teardown(() => asker.socket.destroy())
  await new Promise((resolve) => setTimeout(resolve, 100))
  const welcomeBytes = reader.bytes()

  reader.socket.write(encodeFrame({ type: 'query', host: long.metas[0]!.host, requestedPath: join(dir, 'data') }))
  for (let waited = 0; reader.bytes() === welcomeBytes && waited < 20_000; waited += 5)
    await new Promise((resolve) => setTimeout(resolve, 5))
  t.ok(reader.bytes() > welcomeBytes, 'the reply is being read')
  // The thread is held (a long synchronous step): the reader, on the same thread, takes nothing meanwhile.
  // It stops reading a moment first (a verifier busy with what it has), well within replyStallMs (long enough for the kernel to have acknowledged what it holds for the reader).
  reader.socket.pause()
  await new Promise((resolve) => setTimeout(resolve, replyStallMs / 2))
  const askerBefore = asker.bytes()
  asker.socket.write(encodeFrame({ type: 'list' }))
  listener.queuedReplyBytes() // the listener has just seen what the reader took: its stall clock starts now
  const heldUntil = performance.now() + 3 * replyStallMs
  while (performance.now() < heldUntil) {
    // held
  }
  setImmediate(() => reader.socket.resume())
  for (let waited = 0; asker.bytes() === askerBefore && waited < 5000; waited += 5) await new Promise((resolve) => setTimeout(resolve, 5))
  t.ok(asker.bytes() > askerBefore, 'the other query was answered')
  for (let waited = 0; !reader.closed() && waited < 10_000 && reader.frames() < 2; waited += 20)
    await new Promise((resolve) => setTimeout(resolve, 20))
  t.notOk(reader.closed(), 'the reader was not dropped')
  t.equal(reader.frames(), 2, `the reader read its whole reply after the welcome (${reader.bytes()} bytes)`)
})
