/**
 * The kernel's send buffers count in the reply budget: each served socket's SO_SNDBUF is bounded,
 * the bytes the kernel still holds for a peer count with the user-space ones, dropped connections
 * are reset (no orphan socket keeps its queue), and the unread rule applies to every reply, also one
 * that fitted in the kernel's buffers. Real sockets on 127.0.0.1; the kernel's queues read from
 * /proc/net/tcp (Linux).
 */
import t from 'tap'
import { Listener } from '../../../../src/server/listen/listener.js'
import { tempDir, waitFor } from '../../../fixtures/cli.js'
import { kernelQueuesOfPort } from '../../../fixtures/kernel-queues.js'
import { Peer, largestFingerprint, bulkyGroup, runIdOf, runMeta } from '../../../fixtures/peer.js'

/** A group of `runs` ended runs on box:/data/db, each with the largest fingerprint an announcement may carry (~16.5 KB): a query's reply is ~runs x 17 KB. */
async function bulkyRuns(port: number, runs: number): Promise<Peer> {
  const writer = await Peer.open(port)
  writer.send({ type: 'hello', protocol: 2, role: 'writer' })
  for (let i = 0; i < runs; i++) {
    writer.send({
      type: 'run',
      meta: runMeta(runIdOf(0x900 + i), { groupId: runIdOf(0x900), host: 'box', requestedPath: '/data/db', path: `/data/db.${i}` }),
      writer: { bootId: null, fingerprint: largestFingerprint },
    })
  }
  for (let i = 0; i < runs; i++) await writer.next('run-ok')
  for (let i = 0; i < runs; i++) writer.send({ type: 'end', runId: runIdOf(0x900 + i), reason: 'duration' })
  writer.send({ type: 'query', host: 'box', requestedPath: '/data/db' })
  await writer.next('runs')
  return writer
}

/** A verifier that asks and never reads. */
async function nonReadingQuerier(port: number, queries: number): Promise<Peer> {
  const peer = await Peer.open(port)
  peer.socket.pause()
  peer.send({ type: 'hello', protocol: 2, role: 'verifier' })
  for (let i = 0; i < queries; i++) peer.send({ type: 'query', host: 'box', requestedPath: '/data/db' })
  return peer
}

t.test('500 clients that query and never read: the kernel queues stay within the budget, an honest writer records every ack', async (t) => {
  const budgetBytes = 32 * 1024 * 1024
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
  const group = await bulkyRuns(port, 36) // replies of ~600 KB
  const writer = await Peer.writer(port, runMeta(runIdOf(0x7ff)))
  let seq = 0
  const ackOnce = async (): Promise<void> => {
    seq++
    writer.send({ type: 'ack', runId: runIdOf(0x7ff), fromSeq: seq, toSeq: seq })
    while (((await writer.next('recorded', 20_000)) as { throughSeq: number }).throughSeq < seq);
  }
  const queriers: Peer[] = []
  t.teardown(() =>
    queriers.forEach((q) => {
      q.close()
    }),
  )
  let peakKernelBytes = 0
  let peakCountedBytes = 0
  const measure = (): void => {
    peakKernelBytes = Math.max(peakKernelBytes, kernelQueuesOfPort(port).sendQueueBytes)
    peakCountedBytes = Math.max(peakCountedBytes, listener.queuedReplyBytes())
  }
  for (let batch = 0; batch < 25; batch++) {
    for (let i = 0; i < 20; i++) queriers.push(await nonReadingQuerier(port, 2))
    await ackOnce()
    await new Promise((resolve) => setTimeout(resolve, 20))
    measure()
  }
  for (let i = 0; i < 20; i++) {
    await ackOnce()
    measure()
  }
  t.ok(
    peakKernelBytes <= budgetBytes,
    `the kernel held at most ${(peakKernelBytes / 1e6).toFixed(1)} MB for the listener's sockets (500 x 2 replies are ~${((1000 * 600_000) / 1e6).toFixed(0)} MB)`,
  )
  t.ok(peakCountedBytes <= budgetBytes, `the budget counted at most ${(peakCountedBytes / 1e6).toFixed(1)} MB, user space and kernel`)
  t.equal(seq, 45, 'the honest writer recorded every ack meanwhile')
  t.notOk(writer.closed, "the writer's connection was never dropped")
  t.ok(
    lines.some((l) => /dropped a connection from 127\.0\.0\.1: it does not read its replies/.test(l)),
    'non-readers were dropped',
  )
  // What was dropped holds nothing: no orphan socket keeps a queue.
  await new Promise((resolve) => setTimeout(resolve, 200))
  const open = listener.connectionCount()
  const kernel = kernelQueuesOfPort(port)
  t.ok(kernel.sockets <= open + 1, `the kernel keeps ${kernel.sockets} sockets of the port, the listener serves ${open}: none orphaned`)
  for (const p of [group, writer]) p.close()
})

t.test('a reply that fitted in the kernel buffers and was never read drops its connection after replyStallMs', async (t) => {
  const lines: string[] = []
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: tempDir(t), replyStallMs: 300, log: (l) => lines.push(l) })
  t.teardown(() => listener.close())
  const port = listener.address().port
  const group = await bulkyRuns(port, 18) // a reply of ~300 KB: more than the peer's receive buffer, less than the kernel's send buffer
  const stalled = await nonReadingQuerier(port, 1)
  await waitFor('its reply queued in the kernel', () => kernelQueuesOfPort(port).sendQueueBytes > 0)
  // Loopback moves bytes on from the send queue into the peer's receive buffer for a moment after they
  // land: compared once the queue has settled (the same size twice, 100 ms apart).
  let settled = -1
  await waitFor(
    'the send queue settled',
    () => {
      const now = kernelQueuesOfPort(port).sendQueueBytes
      const same = now === settled
      settled = now
      return same
    },
    20_000,
    100,
  )
  t.equal(listener.queuedReplyBytes(), kernelQueuesOfPort(port).sendQueueBytes, 'all of it in the kernel, none in user space')
  // A verifier that reads its reply and then sits idle is never dropped for it.
  const idle = await Peer.open(port)
  idle.send({ type: 'hello', protocol: 2, role: 'verifier' })
  idle.send({ type: 'query', host: 'box', requestedPath: '/data/db' })
  t.match(await idle.next('runs', 20_000), { runs: { length: 18 } })
  await new Promise((resolve) => setTimeout(resolve, 600))
  const verifier = await Peer.open(port)
  verifier.send({ type: 'hello', protocol: 2, role: 'verifier' })
  verifier.send({ type: 'query', host: 'box', requestedPath: '/data/db' })
  t.match(await verifier.next('runs', 20_000), { runs: { length: 18 } })
  t.match(lines, [/dropped a connection from 127\.0\.0\.1: it left a reply unread for over 0\.3 s while others waited/])
  t.equal(lines.length, 1, 'only the stalled one')
  await waitFor('the stalled connection gone', () => listener.connectionCount() === 3)
  t.equal(kernelQueuesOfPort(port).sendQueueBytes, 0, 'and the kernel no longer holds its reply')
  t.notOk(idle.closed, 'the idle verifier that read its reply is still served')
  for (const p of [group, stalled, idle, verifier]) p.close()
})

t.test('a verifier reading a large reply slowly is never taken for one that stalled', async (t) => {
  const lines: string[] = []
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: tempDir(t), replyStallMs: 1500, log: (l) => lines.push(l) })
  t.teardown(() => listener.close())
  const port = listener.address().port
  const group = await bulkyGroup(port) // a ~1 MB reply (64 runs with the largest fingerprint a run may carry): one buffer, written over seconds
  const slow = await Peer.open(port)
  slow.socket.pause()
  slow.send({ type: 'hello', protocol: 2, role: 'verifier' })
  slow.send({ type: 'query', host: 'box', requestedPath: '/data/db' })
  // It reads a little every 1,000 ms (within replyStallMs; the reply takes seconds), while others' queries keep asking for room.
  const sip = setInterval(() => {
    slow.socket.resume()
    setImmediate(() => slow.socket.pause())
  }, 1000)
  t.teardown(() => clearInterval(sip))
  const started = Date.now()
  while (!slow.messages.some((m) => m.type === 'runs') && Date.now() - started < 60_000) {
    const other = await Peer.open(port)
    other.send({ type: 'hello', protocol: 2, role: 'verifier' })
    other.send({ type: 'query', host: 'box', requestedPath: '/data/none' })
    await other.next('runs')
    other.close()
    await new Promise((resolve) => setTimeout(resolve, 300))
  }
  t.ok(Date.now() - started > 1500, `the reply took ${((Date.now() - started) / 1000).toFixed(1)} s to read, longer than replyStallMs`)
  t.match(await slow.next('runs', 1000), { runs: { length: 64 } }, 'the slow reader got all of it')
  t.same(lines, [], 'nobody was dropped')
  for (const p of [group, slow]) p.close()
})
