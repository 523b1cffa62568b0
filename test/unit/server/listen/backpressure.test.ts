/**
 * Backpressure: a peer that sends queries but does not read the replies is not read either, so the
 * listener queues about one reply for it, not all of them; once the peer reads, every reply comes.
 */
import t from 'tap'
import { Listener } from '../../../../src/server/listen/listener.js'
import { tempDir, waitFor } from '../../../fixtures/cli.js'
import { Peer, bulkyGroup } from '../../../fixtures/peer.js'

t.test('a peer that does not read its replies is not read either', async (t) => {
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: tempDir(t) })
  t.teardown(() => listener.close())
  const port = listener.address().port
  const writers = [await bulkyGroup(port)]

  const reader = await Peer.open(port)
  reader.socket.pause() // a peer that stops reading
  reader.send({ type: 'hello', protocol: 2, role: 'verifier' })
  for (let i = 0; i < 100; i++) reader.send({ type: 'query', host: 'box', requestedPath: '/data/db' })
  let peakQueuedBytes = 0
  await waitFor('the listener to fill the socket', () => {
    peakQueuedBytes = Math.max(peakQueuedBytes, listener.queuedReplyBytes())
    return peakQueuedBytes > 0
  })
  for (let i = 0; i < 50; i++) {
    await new Promise((resolve) => setTimeout(resolve, 10))
    peakQueuedBytes = Math.max(peakQueuedBytes, listener.queuedReplyBytes())
  }
  const replyBytes = 64 * 17_000
  t.ok(
    peakQueuedBytes < 3 * replyBytes,
    `at most ${(peakQueuedBytes / 1e6).toFixed(1)} MB queued for the peer (100 replies are ${((100 * replyBytes) / 1e6).toFixed(0)} MB)`,
  )

  reader.socket.resume()
  await waitFor('every reply', () => reader.messages.filter((m) => m.type === 'runs').length === 100, 60_000)
  t.pass('once the peer reads, all 100 replies arrive')
  t.match(
    reader.messages.find((m) => m.type === 'runs'),
    { runs: { length: 64 }, claims: { length: 64 } },
  )
  reader.close()
  for (const writer of writers) writer.close()
})
