/**
 * A verdict that counts fewer acknowledged records than the listener recorded for the run is refused,
 * like one that counts more: a run that acknowledged 3,270 records, every one of which the verifier
 * would find lost, must never be shown as "pass" on the strength of a verdict that judged 10 of them.
 * After the run ended (here: its writer vanished), its acks are final, and a verifier that sends
 * superseded and interrupted accounts for every acknowledged record: acked is the listener's count.
 */
import t from 'tap'
import { Listener } from '../../src/server/listen/listener.js'
import { protocolVersion, type ServerMessage } from '../../src/protocol/messages.js'
import { tempDir } from '../fixtures/cli.js'
import { Peer, runIdOf, runMeta } from '../fixtures/peer.js'
import { verdictOf } from '../fixtures/verdict-fixture.js'

const acked = 3270

t.test('a pass that judged 10 of 3,270 acknowledged records is refused, and never listed', async (t) => {
  const dir = tempDir(t)
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir })
  t.teardown(() => listener.close())
  const port = listener.address().port
  const runId = runIdOf(0xa15)
  const writer = await Peer.open(port)
  writer.send({ type: 'hello', protocol: protocolVersion, role: 'writer' })
  writer.send({ type: 'run', meta: runMeta(runId, { host: 'box', requestedPath: '/mnt/test/p.dat' }) })
  await writer.next('run-ok')
  writer.send({ type: 'ack', runId, fromSeq: 1, toSeq: acked })
  await writer.next('recorded')
  writer.close() // the cut
  for (let i = 0; i < 200 && listener.isLive(runId); i++) await new Promise((resolve) => setTimeout(resolve, 25))
  t.equal(listener.store.lastAckedSeq(runId), acked)

  const verifier = await Peer.open(port)
  verifier.send({ type: 'hello', protocol: protocolVersion, role: 'verifier' })
  await verifier.next('welcome')
  const forged = verdictOf({
    verdict: 'pass',
    acked: 10,
    intact: 10,
    lost: 0,
    torn: 0,
    corrupt: 0,
    superseded: 0,
    interrupted: 0,
    superblockValid: true,
    lossWindowMs: null,
    lostRanges: [],
    summary: 'PASS: fdatasync kept every acknowledged record.',
  })
  verifier.send({ type: 'verdict', runId, result: forged })
  const deadline = Date.now() + 5000
  while (Date.now() < deadline && !verifier.messages.some((m) => m.type === 'error' || m.type === 'verdict-ok'))
    await new Promise((resolve) => setTimeout(resolve, 5))
  const reply = verifier.messages.find((m) => m.type === 'error' || m.type === 'verdict-ok') as ServerMessage | undefined
  t.match(
    reply,
    { type: 'error', code: 'bad-frame', message: new RegExp(`the verdict for run ${runId} .*\\b10\\b.*\\b${acked}\\b`) },
    'refused, naming both counts',
  )
  verifier.close()
  t.equal(listener.store.runInfo(runId) !== undefined, true)
  const listed = listener.listRuns(undefined).runs.find((r) => r.runId === runId)
  t.equal(listed?.verdict ?? null, null, 'no pass is listed for the run')
})
