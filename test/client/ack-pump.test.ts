/**
 * The writer's send thread (ack-pump.ts) over real TCP on 127.0.0.1: every byte queued arrives once
 * and in order, across the ring's wrap-around and while the thread is busy (frames then leave
 * coalesced); a peer that goes away stops the pump with the socket's error, seen by the next push or
 * flush; stop() hands the descriptor back only once the thread is done with it.
 */
import t from 'tap'
import { createServer, type Server, type Socket } from 'node:net'
import { nativePort } from '../../src/native/index.js'
import { AckPump } from '../../src/client/ack-pump.js'

const timeoutMs = 10_000

interface Peer {
  readonly server: Server
  readonly port: number
  readonly received: Buffer[]
  readonly connected: Promise<Socket>
}

async function peer(): Promise<Peer> {
  const received: Buffer[] = []
  let connected!: (socket: Socket) => void
  const server = createServer((socket) => {
    socket.on('data', (chunk: Buffer) => received.push(chunk)).on('error', () => socket.destroy())
    connected(socket)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as { port: number }).port
  return { server, port, received, connected: new Promise((resolve) => (connected = resolve)) }
}

const connect = (port: number) => nativePort().connect({ family: 4, address: '127.0.0.1', port, scopeId: 0 }, timeoutMs, `127.0.0.1:${port}`)
const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))

/** Frame i: 1 to 200 bytes, each byte naming its frame and position, so a lost, doubled or reordered byte shows. */
function frame(i: number): Buffer {
  const bytes = Buffer.alloc(1 + ((i * 37) % 200))
  for (let j = 0; j < bytes.length; j++) bytes[j] = (i * 31 + j) & 0xff
  return bytes
}

t.test('every queued byte arrives once, in order, across many wrap-arounds of the ring', async (t) => {
  const p = await peer()
  const socket = connect(p.port)
  t.ok(socket.fd !== undefined && socket.fd >= 0, 'a POSIX socket offers its descriptor')
  const pump = AckPump.start(socket.fd!, timeoutMs)
  const sent: Buffer[] = []
  // 6,000 frames of ~100 bytes: ~600 KB, ~9 times round the 64 KiB ring; the event loop turns every
  // 500 frames so the peer keeps reading.
  for (let i = 0; i < 6000; i++) {
    const f = frame(i)
    pump.push(f)
    sent.push(f)
    if (i % 500 === 499) await turn()
  }
  pump.flush()
  const expected = Buffer.concat(sent)
  for (let i = 0; i < 1000 && Buffer.concat(p.received).length < expected.length; i++) await new Promise((resolve) => setTimeout(resolve, 10))
  t.ok(Buffer.concat(p.received).equals(expected), `${expected.length} bytes arrived in order`)
  t.ok(p.received.length < sent.length, `coalesced: ${sent.length} frames arrived in ${p.received.length} reads`)
  t.equal(pump.failed(), undefined, 'no failure')
  t.equal(pump.stop(), true, 'the pump is done with the descriptor')
  socket.close()
  p.server.close()
})

t.test('a peer that goes away stops the pump; the next push or flush throws its error', async (t) => {
  const p = await peer()
  const socket = connect(p.port)
  const pump = AckPump.start(socket.fd!, timeoutMs)
  pump.push(frame(1))
  pump.flush()
  const accepted = await p.connected
  accepted.resetAndDestroy()
  let thrown: unknown
  // Bounded: the reset reaches our socket at once, so within a few writes (the first may still succeed).
  for (let i = 0; i < 2000 && thrown === undefined; i++) {
    try {
      pump.push(frame(i))
      pump.flush()
    } catch (error) {
      thrown = error
    }
    await turn()
  }
  t.match(thrown, { code: /^(EPIPE|ECONNRESET)$/ }, 'the socket error, with its code')
  t.match(pump.failed(), { code: /^(EPIPE|ECONNRESET)$/ }, 'failed() says the same')
  t.equal(pump.stop(), true, 'a failed pump is done with the descriptor')
  socket.close()
  p.server.close()
})
