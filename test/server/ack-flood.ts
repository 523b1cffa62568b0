/**
 * Test helper, run as a child process: N synthetic writers that each announce a run and then stream
 * single-seq acks to the listener as fast as the socket takes them (reading and dropping the replies).
 * Prints "ready" once every run is announced; runs until killed.
 *   node --import tsx test/server/ack-flood.ts PORT WRITERS
 */
import { connect, type Socket } from 'node:net'
import { randomBytes } from 'node:crypto'
import { AckFrameEncoder, FrameDecoder, encodeFrame, maxServerFrameBytes } from '../../src/protocol/framing.js'
import { serverMessageSchema } from '../../src/protocol/messages.js'

const port = Number(process.argv[2])
const writers = Number(process.argv[3] ?? 8)
const framesPerWrite = 512

async function writer(index: number): Promise<void> {
  const runId = randomBytes(8).toString('hex')
  const socket: Socket = connect({ host: '127.0.0.1', port })
  await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject))
  socket.setNoDelay(true)
  const decoder = new FrameDecoder(serverMessageSchema, maxServerFrameBytes)
  let announced: () => void
  const runOk = new Promise<void>((resolve) => (announced = resolve))
  socket.on('data', (chunk) => {
    for (const m of decoder.push(chunk)) {
      if (m.type === 'run-ok') announced()
      if (m.type === 'error') {
        process.stderr.write(`flood writer ${index}: ${m.message}\n`)
        process.exit(3)
      }
    }
  })
  socket.write(encodeFrame({ type: 'hello', protocol: 2, role: 'writer' }))
  const now = Date.now()
  const path = `/flood/${index}`
  socket.write(
    encodeFrame({
      type: 'run',
      meta: { runId, groupId: runId, method: 'fdatasync', direct: false, pattern: 'append', recordSizeBytes: 8192, slotCount: 1_000_000, host: 'flood', path, requestedPath: path, createdMs: now },
    }),
  )
  await runOk
  const encoder = new AckFrameEncoder(runId)
  let seq = 0
  const pump = (): void => {
    for (;;) {
      const frames: Buffer[] = []
      for (let i = 0; i < framesPerWrite; i++, seq++) frames.push(Buffer.from(encoder.encode(seq + 1, seq + 1)))
      if (!socket.write(Buffer.concat(frames))) return void socket.once('drain', pump)
    }
  }
  setImmediate(pump)
}

await Promise.all(Array.from({ length: writers }, (_, i) => writer(i)))
process.stdout.write('ready\n')
