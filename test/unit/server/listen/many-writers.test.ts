/**
 * A fleet: 256 writers on real TCP connections to one listener, each announcing a run and sending its
 * acks in batches of frames per write (some frames split across writes), all recorded in full with
 * no refusal. And batching keeps per-ack exactness: in one chunk, the acks before a bad one are
 * stored and the bad one is refused with the message it would get alone.
 */
import t from 'tap'
import { AckFrameEncoder } from '../../../../src/protocol/framing.js'
import { Listener } from '../../../../src/server/listen/listener.js'
import { tempDir, waitFor } from '../../../fixtures/cli.js'
import { Peer, runIdOf, runMeta } from '../../../fixtures/peer.js'

const writerCount = 256
const acksPerWriter = 300
const framesPerWrite = 25

/** Acks fromSeq..toSeq, one seq per frame, as one buffer. */
function ackFrames(runId: string, fromSeq: number, toSeq: number): Buffer {
  const encoder = new AckFrameEncoder(runId)
  const frames: Buffer[] = []
  for (let seq = fromSeq; seq <= toSeq; seq++) frames.push(Buffer.from(encoder.encode(seq, seq)))
  return Buffer.concat(frames)
}

t.test(`${writerCount} writers at once: every ack of every run is recorded, no connection refused`, async (t) => {
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: tempDir(t) })
  t.teardown(() => listener.close())
  const port = listener.address().port
  const peers = await Promise.all(Array.from({ length: writerCount }, () => Peer.open(port)))
  t.teardown(() =>
    peers.forEach((p) => {
      p.close()
    }),
  )
  const runIds = peers.map((_, i) => runIdOf(0x1000 + i))
  peers.forEach((peer, i) => {
    peer.send({ type: 'hello', protocol: 3, role: 'writer' })
    peer.send({
      type: 'run',
      meta: { ...runMeta(runIds[i]!), path: `/fleet/${i}`, requestedPath: `/fleet/${i}` },
      writer: { bootId: null, fingerprint: null },
    })
  })
  await Promise.all(peers.map((peer) => peer.next('run-ok', 60_000)))
  t.equal(listener.connectionCount(), writerCount)

  // Round-robin over the writers, a batch each, so the listener sees all of them interleaved; every
  // third batch is cut in the middle of a frame and finished by the next write.
  for (let fromSeq = 1; fromSeq <= acksPerWriter; fromSeq += framesPerWrite) {
    const toSeq = Math.min(acksPerWriter, fromSeq + framesPerWrite - 1)
    peers.forEach((peer, i) => {
      const batch = ackFrames(runIds[i]!, fromSeq, toSeq)
      if ((fromSeq + i) % 3 === 0) {
        peer.socket.write(batch.subarray(0, 7))
        peer.socket.write(batch.subarray(7))
      } else {
        peer.socket.write(batch)
      }
    })
  }
  const recordedThrough = (peer: Peer, runId: string): number =>
    Math.max(0, ...peer.messages.flatMap((m) => (m.type === 'recorded' && m.runId === runId ? [m.throughSeq] : [])))
  await waitFor(
    'every run recorded through its last ack',
    () => peers.every((peer, i) => recordedThrough(peer, runIds[i]!) === acksPerWriter),
    120_000,
  )
  for (const [i, peer] of peers.entries()) {
    if (peer.closed || peer.messages.some((m) => m.type === 'error'))
      t.fail(`writer ${i} was refused: ${JSON.stringify(peer.messages.filter((m) => m.type === 'error'))}`)
    const [run] = listener.store.query('testhost', `/fleet/${i}`, runIds[i])
    t.same(
      run?.spans.map((s) => [s[0], s[1]]).reduce((n, [from, to]) => n + to! - from! + 1, 0),
      acksPerWriter,
      `run ${i} holds acks 1-${acksPerWriter}`,
    )
  }
  t.equal(listener.connectionCount(), writerCount, 'every writer still connected')
})

t.test('in one chunk, the acks before a bad one are stored and the bad one is refused as if alone', async (t) => {
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: tempDir(t) })
  t.teardown(() => listener.close())
  const cases = [
    {
      what: 'a gap',
      tail: (runId: string) => ackFrames(runId, 12, 12),
      error: /^ack 12-12 of run [0-9a-f]{16} out of order: expected seq 11 next$/,
    },
    {
      what: 'an implausible seq',
      tail: (runId: string) => Buffer.from(new AckFrameEncoder(runId).encode(11, 2 ** 50)),
      error: /^ack of seq 1125899906842624 for run [0-9a-f]{16}: more records than a writer can have written since the run was announced$/,
    },
    {
      what: 'another run',
      tail: () => ackFrames(runIdOf(0x9999), 1, 1),
      error: /^ack for run 0{12}9999, which this connection did not announce$/,
    },
  ]
  for (const [i, c] of cases.entries()) {
    const peer = await Peer.open(listener.address().port)
    t.teardown(() => peer.close())
    const runId = runIdOf(0x2000 + i)
    peer.send({ type: 'hello', protocol: 3, role: 'writer' })
    peer.send({ type: 'run', meta: { ...runMeta(runId), path: `/bad/${i}`, requestedPath: `/bad/${i}` } })
    await peer.next('run-ok')
    peer.socket.write(Buffer.concat([ackFrames(runId, 1, 10), c.tail(runId), ackFrames(runId, 11, 20)]))
    const error = await peer.next('error')
    t.match(
      error,
      { code: c.what === 'a gap' ? 'out-of-order' : c.what === 'another run' ? 'unknown-run' : 'bad-frame', message: c.error },
      c.what,
    )
    await peer.waitClosed()
    t.equal(listener.store.lastAckedSeq(runId), 10, `${c.what}: acks 1-10 before it are stored, none after it`)
  }
})
