/**
 * Replies queued for peers that do not read them stay within a global budget: non-reading queriers
 * whose replies are megabytes each are dropped (the one holding the most queued bytes first, and any
 * that left a reply unread too long), while an honest writer keeps recording and an honest verify
 * still gets its answer. A writer's connection, which only gets small 'recorded' frames, is never
 * dropped for this.
 */
import t from 'tap'
import { Listener } from '../../../../src/server/listen/listener.js'
import { tempDir, waitFor } from '../../../fixtures/cli.js'
import { Peer, bulkyGroup, runIdOf, runMeta } from '../../../fixtures/peer.js'

async function nonReadingQuerier(port: number): Promise<Peer> {
  const peer = await Peer.open(port)
  peer.socket.pause()
  peer.send({ type: 'hello', protocol: 2, role: 'verifier' })
  // Several queries: the first replies fill the kernel's socket buffers, the next ones queue in the listener.
  for (let i = 0; i < 4; i++) peer.send({ type: 'query', host: 'box', requestedPath: '/data/db' })
  return peer
}

t.test('non-reading queriers are dropped to keep queued replies within the budget', async (t) => {
  const budgetBytes = 8 * 1024 * 1024
  const lines: string[] = []
  const listener = await Listener.start({
    host: '127.0.0.1',
    port: 0,
    dir: tempDir(t),
    maxQueuedReplyBytes: budgetBytes,
    log: (l) => lines.push(l),
  })
  t.teardown(() => listener.close())
  const port = listener.address().port
  const groupWriters = [await bulkyGroup(port)]

  // An honest writer on another path, acking throughout.
  const writer = await Peer.writer(port, runMeta(runIdOf(0x7ff)))
  let seq = 0
  const ackOnce = async (): Promise<void> => {
    seq++
    writer.send({ type: 'ack', runId: runIdOf(0x7ff), fromSeq: seq, toSeq: seq })
    while (((await writer.next('recorded')) as { throughSeq: number }).throughSeq < seq);
  }

  const queriers: Peer[] = []
  let peakQueuedBytes = 0
  for (let i = 0; i < 30; i++) {
    queriers.push(await nonReadingQuerier(port))
    await ackOnce()
    peakQueuedBytes = Math.max(peakQueuedBytes, listener.queuedReplyBytes())
  }
  for (let i = 0; i < 20; i++) {
    await ackOnce()
    peakQueuedBytes = Math.max(peakQueuedBytes, listener.queuedReplyBytes())
  }
  t.ok(
    peakQueuedBytes <= budgetBytes,
    `at most ${(peakQueuedBytes / 1e6).toFixed(1)} MB queued (30 replies are ~${((30 * 64 * 17_000) / 1e6).toFixed(0)} MB)`,
  )
  const dropped = lines.filter((l) =>
    /dropped a connection from 127\.0\.0\.1: it does not read its replies and holds the most queued bytes/.test(l),
  ).length
  t.ok(dropped >= 10, `${dropped} of 30 non-reading queriers dropped`)
  t.equal(seq, 50, 'the honest writer recorded every ack meanwhile')

  const verifier = await Peer.open(port)
  verifier.send({ type: 'hello', protocol: 2, role: 'verifier' })
  verifier.send({ type: 'query', host: 'box', requestedPath: '/data/db' })
  t.match(await verifier.next('runs', 20_000), { runs: { length: 64 } }, 'an honest verify still gets its answer')
  t.notOk(writer.closed, "the writer's connection was never dropped")
  for (const p of [...queriers, ...groupWriters, verifier, writer]) p.close()
})

t.test('a reply left unread too long is dropped when another reply is to be queued', async (t) => {
  const lines: string[] = []
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: tempDir(t), replyStallMs: 200, log: (l) => lines.push(l) })
  t.teardown(() => listener.close())
  const port = listener.address().port
  const groupWriters = [await bulkyGroup(port)]
  const stalled = await nonReadingQuerier(port)
  await waitFor('its reply queued', () => listener.queuedReplyBytes() > 0)
  await new Promise((resolve) => setTimeout(resolve, 400))
  const verifier = await Peer.open(port)
  verifier.send({ type: 'hello', protocol: 2, role: 'verifier' })
  verifier.send({ type: 'query', host: 'box', requestedPath: '/data/db' })
  t.match(await verifier.next('runs', 20_000), { runs: { length: 64 } })
  t.match(lines, [/dropped a connection from 127\.0\.0\.1: it left a reply unread for over 0\.2 s while others waited/])
  await waitFor('the stalled connection gone', () => listener.connectionCount() === groupWriters.length + 1)
  for (const p of [...groupWriters, stalled, verifier]) p.close()
})
