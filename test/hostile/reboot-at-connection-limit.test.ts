/**
 * A fleet sized to --max-connections: every slot is held by a writer when the power is cut. The dead
 * writers' connections stay open on the listener for many minutes (TCP keepalive), and the listener
 * knows how to end them: a hello naming the machine with a new boot id ends that machine's earlier
 * boot's runs and closes their connection (endRunsOfEarlierBoot). But the slot check comes first: the
 * rebooted machine's verify is refused ('limit', "connections open") because of its own dead
 * connection, and stays refused until keepalive gives up on it (~11 minutes with Linux's defaults).
 * The hello of a rebooted machine must free its earlier boot's slot and be served.
 */
import t from 'tap'
import { Listener } from '../../src/server/listen/listener.js'
import { tempDir } from '../fixtures/cli.js'
import { protocolVersion } from '../../src/protocol/messages.js'
import { Peer, runIdOf, runMeta } from '../fixtures/peer.js'

t.test('a rebooted machine says hello while its dead connection holds the last slot', async (t) => {
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: tempDir(t), maxConnections: 2, rebootSilenceMs: 0 })
  t.teardown(() => listener.close())
  const port = listener.address().port

  // Two machines' writers hold both slots; box's machine then loses power (its connection just goes silent).
  const boxRun = runIdOf(0x16b0)
  const box = await Peer.announce(port, runMeta(boxRun, { host: 'box', requestedPath: '/data/a', path: '/data/a' }), {
    writer: { bootId: 'boot-before', fingerprint: null },
  })
  t.teardown(() => box.peer.close())
  t.equal(box.reply.type, 'run-ok')
  box.peer.send({ type: 'ack', runId: boxRun, fromSeq: 1, toSeq: 5 })
  await box.peer.next('recorded')
  const other = await Peer.announce(port, runMeta(runIdOf(0x16b1), { host: 'other', requestedPath: '/data/b', path: '/data/b' }), {
    writer: { bootId: 'other-boot', fingerprint: null },
  })
  t.teardown(() => other.peer.close())
  t.equal(other.reply.type, 'run-ok')
  await new Promise((resolve) => setTimeout(resolve, 100))

  // box rebooted: its verify says hello with the machine's new boot id, from the same address.
  const verifier = await Peer.open(port)
  t.teardown(() => verifier.close())
  verifier.send({ type: 'hello', protocol: protocolVersion, role: 'verifier', machine: { host: 'box', bootId: 'boot-after' } })
  const deadline = Date.now() + 20_000 // a loaded machine's listener may be slow to answer; a refusal ends the wait at once
  while (Date.now() < deadline && !verifier.messages.some((m) => m.type === 'welcome' || m.type === 'error'))
    await new Promise((resolve) => setTimeout(resolve, 5))
  const answer = verifier.messages.find((m) => m.type === 'welcome' || m.type === 'error')
  t.match(answer, { type: 'welcome' }, `the rebooted machine is served, not refused: ${JSON.stringify(answer)}`)
  t.ok(await box.peer.waitClosed(20_000), "the earlier boot's dead connection was closed")
  t.equal(listener.isLive(boxRun), false, "box's run ended as vanished")
  t.equal(listener.isLive(runIdOf(0x16b1)), true, "the other machine's writer is untouched")
})
