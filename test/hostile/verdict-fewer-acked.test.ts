/**
 * A stored verdict must agree with the run it is about: a "pass" that counts 5 acknowledged records
 * for a run whose listener holds thousands judged 5 and says nothing of the rest. The listener must
 * refuse it (bad-frame, naming both counts), so `runs` and `report` never show it as the run's pass.
 */
import t from 'tap'
import { connect } from 'node:net'
import { join } from 'node:path'
import { listRuns } from '../../src/client/verify/listener-client.js'
import { parseEndpoint, type Endpoint } from '../../src/protocol/endpoint.js'
import { FrameDecoder, encodeFrame } from '../../src/protocol/framing.js'
import { protocolVersion, serverMessageSchema, type ServerMessage, type StoredVerdict } from '../../src/protocol/messages.js'
import { startListener, tempDir, writeThenKill } from '../fixtures/cli.js'
import { runsEnded } from '../fixtures/runs-ended.js'

async function sendVerdict(port: number, runId: string, result: StoredVerdict): Promise<ServerMessage[]> {
  const socket = connect(port, '127.0.0.1')
  const decoder = new FrameDecoder(serverMessageSchema, 64 * 1024 * 1024)
  const replies: ServerMessage[] = []
  socket.on('data', (c: Buffer) => {
    for (const m of decoder.push(c)) replies.push(m)
  })
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve)
    socket.once('error', reject)
  })
  socket.write(encodeFrame({ type: 'hello', protocol: protocolVersion, role: 'verifier' }))
  socket.write(encodeFrame({ type: 'verdict', runId, result }))
  const deadline = Date.now() + 10_000
  while (!replies.some((r) => r.type === 'verdict-ok' || r.type === 'error') && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 20))
  socket.destroy()
  return replies
}

t.test('a pass counting fewer acknowledged records than the listener holds is refused', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'data.plugcheck')
  await writeThenKill(listener.server, file, ['--size', '16MiB'], 500)
  const endpoint = parseEndpoint(listener.server) as Endpoint
  // The writer's vanishing is answered once the round holding its end is recorded (a moment after the kill).
  const run = (await runsEnded(listener.server, file))[0]!
  t.ok(run.ackedThroughSeq > 100, `the listener holds ${run.ackedThroughSeq} acks`)
  t.equal(run.live, false, 'the run ended (vanished)')

  const replies = await sendVerdict(listener.port, run.runId, {
    verdict: 'pass',
    acked: 5,
    intact: 5,
    lost: 0,
    torn: 0,
    corrupt: 0,
    superseded: 0,
    interrupted: 0,
    superblockValid: true,
    lossWindowMs: null,
    reordered: false,
    lostRanges: [],
    rebootedSinceWrite: true,
    summary: 'PASS: all 5 acknowledged records survived intact.',
    bootId: null,
    fingerprint: null,
    atMs: Date.now(),
  })
  t.match(
    replies.at(-1),
    {
      type: 'error',
      code: 'bad-frame',
      message: new RegExp(`5 acknowledged.*${run.ackedThroughSeq}|${run.ackedThroughSeq}.*5 acknowledged`),
    },
    JSON.stringify(replies),
  )
  const after = (await listRuns(endpoint, undefined, 10_000)).runs[0]!
  t.equal(after.verdict, null, `no verdict stored (stored: ${JSON.stringify(after.verdict)})`)
})
