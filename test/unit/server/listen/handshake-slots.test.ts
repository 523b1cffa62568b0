/**
 * Connections that have not said hello cannot keep honest clients out, even with --token: they are
 * capped on their own, and a newcomer beyond the cap evicts the oldest of them ('limit'), so a client
 * whose hello comes promptly always gets in. Connections past hello count against --max-connections.
 */
import t from 'tap'
import { connect, type Socket } from 'node:net'
import { Listener } from '../../../../src/server/listen/listener.js'
import { tempDir, waitFor } from '../../../fixtures/cli.js'
import { Peer, runIdOf, runMeta } from '../../../fixtures/peer.js'

t.test('tokenless peers holding every slot without hello do not keep a writer with the token out', async (t) => {
  const listener = await Listener.start({
    host: '127.0.0.1',
    port: 0,
    dir: tempDir(t),
    token: 's3cret',
    maxConnections: 8,
    maxPendingHandshakes: 16,
  })
  t.teardown(() => listener.close())
  const port = listener.address().port
  // 40 hostile peers that never say hello and reconnect as soon as they are closed (bounded: 2,000 connects).
  let stop = false
  let connects = 0
  const live = new Set<Socket>()
  const hostile = async (): Promise<void> => {
    while (!stop && connects < 2000) {
      connects++
      const socket = connect({ host: '127.0.0.1', port })
      live.add(socket)
      socket.on('data', () => undefined)
      await new Promise((resolve) => socket.once('close', resolve).once('error', () => undefined))
      live.delete(socket)
    }
  }
  const attackers = Array.from({ length: 40 }, hostile)
  await waitFor('every attacker connected', () => connects >= 40 && listener.connectionCount() >= 8)
  await new Promise((resolve) => setTimeout(resolve, 200))

  for (let i = 0; i < 5; i++) {
    const writer = await Peer.open(port)
    writer.send({ type: 'hello', protocol: 2, role: 'writer', token: 's3cret' })
    writer.send({ type: 'run', meta: runMeta(runIdOf(0x500 + i)) })
    t.match(await writer.next('run-ok'), { runId: runIdOf(0x500 + i) }, `honest writer ${i + 1} gets in`)
    writer.send({ type: 'ack', runId: runIdOf(0x500 + i), fromSeq: 1, toSeq: 1 })
    t.match(await writer.next('recorded'), { throughSeq: 1 })
    writer.close()
  }
  t.ok(listener.pending.size <= 16, `pending handshakes stay within their cap (${listener.pending.size})`)
  stop = true
  for (const socket of live) socket.destroy()
  await Promise.all(attackers)
})

t.test('connections past hello count against --max-connections', async (t) => {
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: tempDir(t), maxConnections: 2, maxPendingHandshakes: 4 })
  t.teardown(() => listener.close())
  const port = listener.address().port
  const served: Peer[] = []
  for (let i = 0; i < 2; i++) {
    const peer = await Peer.open(port)
    peer.send({ type: 'hello', protocol: 2, role: 'verifier' })
    await peer.next('welcome')
    served.push(peer)
  }
  // Without --token anyone can say hello and hold these slots (the threat model says so).
  const third = await Peer.open(port)
  third.send({ type: 'hello', protocol: 2, role: 'verifier' })
  t.match(await third.next('error'), { code: 'limit', message: /2 connections open, its limit \(--max-connections\)/ })
  // Pending handshakes beyond their cap: the oldest is evicted, the newest kept.
  const silent: Peer[] = []
  for (let i = 0; i < 5; i++) silent.push(await Peer.open(port))
  t.match(await silent[0]!.next('error'), {
    code: 'limit',
    message: /4 connections are waiting to say hello; the oldest was closed to make room/,
  })
  t.ok(await silent[0]!.waitClosed())
  t.equal(listener.pending.size, 4)
  for (const p of [...served, ...silent]) p.close()
})
