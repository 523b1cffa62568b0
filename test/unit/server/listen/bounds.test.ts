/**
 * The listener's bounds over real TCP: idle connections before hello are closed, the connection limit
 * answers with an error frame (not a reset), ends and queries are capped per connection, a writer that
 * is silent after hello is never cut off, and 2,000 runs leave the descriptor count bounded.
 */
import t from 'tap'
import { readdirSync } from 'node:fs'
import { Listener } from '../../../../src/server/listen/listener.js'
import { maxQueriesPerConnection } from '../../../../src/server/listen/listener-options.js'
import { AckStore } from '../../../../src/store/ack-store.js'
import { limitDescriptors, startListener, tempDir, waitFor } from '../../../fixtures/cli.js'
import { Peer, runIdOf, runMeta } from '../../../fixtures/peer.js'

t.test('2,000 connections that never say hello are closed with an error frame', async (t) => {
  const lines: string[] = []
  const listener = await Listener.start({
    host: '127.0.0.1',
    port: 0,
    dir: tempDir(t),
    helloTimeoutMs: 300,
    maxConnections: 4096,
    maxPendingHandshakes: 4096,
    log: (l) => lines.push(l),
  })
  t.teardown(() => listener.close())
  const peers: Peer[] = []
  for (let i = 0; i < 2000; i++) peers.push(await Peer.open(listener.address().port))
  let closed = 0
  for (const peer of peers) if (await peer.waitClosed(10_000)) closed++
  t.equal(closed, 2000, 'every idle connection was closed')
  const errors = peers.map((p) => p.messages.find((m) => m.type === 'error'))
  t.equal(
    errors.filter((e) => e !== undefined && e.code === 'limit' && /no hello within 0\.3 s/.test(e.message)).length,
    2000,
    'each was told why',
  )
  t.equal(peers.filter((p) => p.error !== undefined).length, 0, 'none was reset')
  // The peer sees its close before the listener's own socket reports closed: wait for the listener's side.
  await waitFor('the listener closed every connection', () => listener.connectionCount() === 0)
  t.equal(listener.connectionCount(), 0)
  t.ok(lines.length <= 21, `the log is rate-limited (${lines.length} lines for 2,000 closes)`)
})

t.test('beyond --max-connections a connection is told so and closed, not reset', async (t) => {
  const lines: string[] = []
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: tempDir(t), maxConnections: 3, log: (l) => lines.push(l) })
  t.teardown(() => listener.close())
  const port = listener.address().port
  const served: Peer[] = []
  for (let i = 0; i < 3; i++) {
    const p = await Peer.open(port)
    p.send({ type: 'hello', protocol: 2, role: 'verifier' })
    await p.next('welcome')
    served.push(p)
  }
  const refused = await Peer.open(port)
  refused.send({ type: 'hello', protocol: 2, role: 'verifier' }) // unread input must not turn the close into a reset
  t.match(await refused.next('error'), { code: 'limit', message: /3 connections open, its limit \(--max-connections\)/ })
  t.ok(await refused.waitClosed())
  t.equal(refused.error, undefined, 'no ECONNRESET')
  t.match(lines, [/refused a connection from 127\.0\.0\.1: 3 connections open \(--max-connections\)/])
  served[0]!.close()
  await waitFor('a free slot', () => listener.connectionCount() === 2)
  const next = await Peer.open(port)
  next.send({ type: 'hello', protocol: 2, role: 'verifier' })
  t.match(await next.next('welcome'), { type: 'welcome' }, 'a freed slot is served again')
  for (const p of [...served, next]) p.close()
})

t.test('one end per run and a bounded number of queries per connection', async (t) => {
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: tempDir(t) })
  t.teardown(() => listener.close())
  const port = listener.address().port
  const writer = await Peer.writer(port, runMeta(runIdOf(1)))
  writer.send({ type: 'ack', runId: runIdOf(1), fromSeq: 1, toSeq: 3 })
  writer.send({ type: 'end', runId: runIdOf(1), reason: 'duration' })
  writer.send({ type: 'ack', runId: runIdOf(1), fromSeq: 4, toSeq: 4 })
  t.match(await writer.next('error'), { code: 'out-of-order', message: /after its end/ }, 'no acks after the end')
  const writer2 = await Peer.writer(port, runMeta(runIdOf(2)))
  writer2.send({ type: 'end', runId: runIdOf(2), reason: 'duration' })
  writer2.send({ type: 'end', runId: runIdOf(2), reason: 'interrupted' })
  t.match(await writer2.next('error'), { code: 'limit', message: /end of run 0000000000000002 sent twice/ })

  const verifier = await Peer.open(port)
  verifier.send({ type: 'hello', protocol: 2, role: 'verifier' })
  for (let i = 0; i <= maxQueriesPerConnection; i++) verifier.send({ type: 'query', host: 'testhost', requestedPath: '/data/x' })
  t.match(await verifier.next('error'), { code: 'limit', message: /more than 100 queries on one connection/ })
  t.equal(verifier.messages.filter((m) => m.type === 'runs').length, maxQueriesPerConnection, 'the first 100 were answered')
  t.ok(await verifier.waitClosed())
})

t.test('a writer silent for longer than the hello timeout is never cut off', async (t) => {
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: tempDir(t), helloTimeoutMs: 100 })
  t.teardown(() => listener.close())
  const writer = await Peer.writer(listener.address().port, runMeta(runIdOf(3)))
  await new Promise((resolve) => setTimeout(resolve, 600)) // a slow sync
  t.notOk(writer.closed)
  writer.send({ type: 'ack', runId: runIdOf(3), fromSeq: 1, toSeq: 1 })
  t.match(await writer.next('recorded'), { throughSeq: 1 })
  writer.close()
})

const fdCount = (): number => readdirSync('/proc/self/fd').length

t.test('2,000 runs announced over TCP leave the descriptor count bounded', async (t) => {
  const dir = tempDir(t)
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir })
  t.teardown(() => listener.close())
  const port = listener.address().port
  const startFds = fdCount()
  let peakFds = startFds
  const runs = 2000
  const concurrent = 25
  for (let base = 0; base < runs; base += concurrent) {
    await Promise.all(
      Array.from({ length: concurrent }, async (_, i) => {
        const n = base + i + 1
        const peer = await Peer.writer(port, runMeta(runIdOf(0x10000 + n)))
        peer.send({ type: 'ack', runId: runIdOf(0x10000 + n), fromSeq: 1, toSeq: 2 })
        await peer.next('recorded')
        // Half end cleanly, half vanish: both must give their descriptor back.
        if (n % 2 === 0) {
          peer.send({ type: 'end', runId: runIdOf(0x10000 + n), reason: 'duration' })
          while (((await peer.next('recorded')) as { throughSeq: number }).throughSeq < 2);
        }
        peer.close()
      }),
    )
    peakFds = Math.max(peakFds, fdCount())
  }
  await waitFor(
    'every connection closed and every log closed',
    () => listener.connectionCount() === 0 && listener.store.openLogCount() === 0,
  )
  const endFds = fdCount()
  t.ok(endFds - startFds < 100, `descriptors: ${startFds} at the start, ${endFds} after ${runs} runs (peak ${peakFds})`)
  const store = await AckStore.load(dir)
  const ends = [...Array(runs).keys()].map((i) => store.query('testhost', `/data/${runIdOf(0x10000 + i + 1)}`)[0]?.end?.reason)
  t.equal(ends.filter((r) => r === 'duration').length, runs / 2, 'half ended by their writer')
  t.equal(ends.filter((r) => r === 'vanished').length, runs / 2, "half logged as vanished when their writer's connection closed")
})

t.test('more than 64 runs on one connection are refused', async (t) => {
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: tempDir(t) })
  t.teardown(() => listener.close())
  const peer = await Peer.open(listener.address().port)
  peer.send({ type: 'hello', protocol: 2, role: 'writer' })
  for (let i = 0; i < 65; i++) peer.send({ type: 'run', meta: runMeta(runIdOf(0x900 + i)) })
  t.match(await peer.next('error'), { code: 'limit', message: /more than 64 runs announced on one connection/ })
  t.equal(peer.messages.filter((m) => m.type === 'run-ok').length, 64)
})

t.test('a listener out of descriptors keeps serving once connections close', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(dir)
  t.teardown(() => listener.kill())
  limitDescriptors(listener, 64)
  const port = listener.port
  const peers: Peer[] = []
  for (let i = 0; i < 150; i++) {
    const peer = await Peer.open(port).catch(() => undefined)
    if (peer !== undefined) peers.push(peer)
  }
  await new Promise((resolve) => setTimeout(resolve, 300))
  t.equal(listener.process.exitCode, null, `the listener is still running (${listener.stderr().slice(-300)})`)
  for (const peer of peers) peer.close()
  await new Promise((resolve) => setTimeout(resolve, 300))
  const verifier = await Peer.open(port)
  verifier.send({ type: 'hello', protocol: 2, role: 'verifier' })
  t.match(await verifier.next('welcome'), { type: 'welcome' }, 'a new connection is served')
  verifier.close()
})
