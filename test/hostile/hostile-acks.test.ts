/**
 * A hostile client against the listener's batched ack path: every ack a batch stores is one a
 * single-frame path would have stored (in order, owned by this connection, before its run's end,
 * plausible), and the acks before the first bad one in a batch are stored, none after it. A job of a
 * group cannot ack a sibling's run; a group's key admits a connection only while a job is live.
 */
import t from 'tap'
import { Listener } from '../../src/server/listen/listener.js'
import { encodeFrame } from '../../src/protocol/framing.js'
import { tempDir } from '../fixtures/cli.js'
import { Peer, runIdOf, runMeta } from '../fixtures/peer.js'

const ack = (runId: string, fromSeq: number, toSeq: number) => ({ type: 'ack', runId, fromSeq, toSeq })
const hello = { type: 'hello', protocol: 3, role: 'writer' }
/** All messages in one write, so the listener decodes and handles them as one batch. */
const burst = (peer: Peer, messages: object[]) => peer.socket.write(Buffer.concat(messages.map((m) => encodeFrame(m))))
async function errorCode(peer: Peer): Promise<string | undefined> {
  await peer.waitClosed(20_000)
  return (peer.messages.find((m) => m.type === 'error') as { code?: string } | undefined)?.code
}

t.test('acks the listener refuses, alone or in the middle of a batch', async (t) => {
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: tempDir(t) })
  t.teardown(() => listener.close())
  const port = listener.address().port
  const store = listener.store
  let n = 0x5000
  const id = () => runIdOf(++n)

  const beforeHello = await Peer.open(port)
  burst(beforeHello, [ack(id(), 1, 5)])
  t.equal(await errorCode(beforeHello), 'out-of-order', 'an ack before hello')

  const beforeRun = await Peer.open(port)
  burst(beforeRun, [hello, ack(id(), 1, 5)])
  t.equal(await errorCode(beforeRun), 'unknown-run', 'an ack before any run')

  const owned = id()
  const owner = await Peer.writer(port, runMeta(owned))
  burst(owner, [ack(owned, 1, 3)])
  await owner.next('recorded')
  for (const role of ['writer', 'verifier']) {
    const stranger = await Peer.open(port)
    burst(stranger, [{ ...hello, role }, ack(owned, 4, 9)])
    t.equal(await errorCode(stranger), 'unknown-run', `a ${role} connection acking another connection's run`)
  }
  t.equal(store.lastAckedSeq(owned), 3, "the owner's run is untouched")
  owner.close()

  const cases: { what: string; acks: (r: string) => object[]; code: string; stored: number }[] = [
    { what: 'a gap', acks: (r) => [ack(r, 1, 5), ack(r, 6, 10), ack(r, 12, 15), ack(r, 16, 20)], code: 'out-of-order', stored: 10 },
    { what: 'an overlap', acks: (r) => [ack(r, 1, 5), ack(r, 3, 10), ack(r, 11, 15)], code: 'out-of-order', stored: 5 },
    {
      what: 'an implausible seq',
      acks: (r) => [ack(r, 1, 5), ack(r, 6, 2 ** 40), ack(r, 2 ** 40 + 1, 2 ** 40 + 2)],
      code: 'bad-frame',
      stored: 5,
    },
    {
      what: 'an ack after the end',
      acks: (r) => [ack(r, 1, 5), { type: 'end', runId: r, reason: 'duration' }, ack(r, 6, 10)],
      code: 'out-of-order',
      stored: 5,
    },
  ]
  for (const c of cases) {
    const r = id()
    const peer = await Peer.writer(port, runMeta(r))
    burst(peer, c.acks(r))
    t.equal(await errorCode(peer), c.code, `a batch with ${c.what}: refused`)
    t.equal(store.lastAckedSeq(r), c.stored, `a batch with ${c.what}: only the acks before it are stored`)
  }

  const schemaBad = id()
  const schemaPeer = await Peer.writer(port, runMeta(schemaBad))
  burst(schemaPeer, [ack(schemaBad, 1, 5), ack(schemaBad, 9, 6), ack(schemaBad, 6, 10)])
  t.equal(await errorCode(schemaPeer), 'bad-frame', 'a batch with a frame the schema refuses')
  t.ok(store.lastAckedSeq(schemaBad) <= 5, 'nothing past the refused frame is stored')

  const r1 = id()
  const r2 = id()
  const two = await Peer.writer(port, runMeta(r1))
  two.send({ type: 'run', meta: runMeta(r2) })
  await two.next('run-ok')
  burst(two, [ack(r1, 1, 5), ack(r2, 1, 5), ack(r1, 6, 10), ack(r2, 7, 9), ack(r1, 11, 12)])
  t.equal(await errorCode(two), 'out-of-order', 'interleaved runs: the gap in the second is refused')
  t.same([store.lastAckedSeq(r1), store.lastAckedSeq(r2)], [10, 5], 'each run keeps exactly its acks before the refusal')

  const busy = id()
  const holder = await Peer.writer(port, runMeta(busy, { requestedPath: '/busy', path: '/busy' }))
  const refused = id()
  const late = await Peer.open(port)
  burst(late, [hello, { type: 'run', meta: runMeta(refused, { requestedPath: '/busy', path: '/busy' }) }, ack(refused, 1, 5)])
  t.equal(await errorCode(late), 'path-busy', 'acks right behind a refused announcement')
  t.notOk(store.hasRun(refused), 'the refused run is not held')
  t.equal(store.lastAckedSeq(refused), 0, 'and none of its acks')
  holder.close()

  const accepted = id()
  const quick = await Peer.open(port)
  burst(quick, [hello, { type: 'run', meta: runMeta(accepted) }, ack(accepted, 1, 5), ack(accepted, 6, 7)])
  t.match(await quick.next('recorded'), { runId: accepted })
  const deadline = Date.now() + 20_000
  while (store.lastAckedSeq(accepted) < 7 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10))
  t.equal(store.lastAckedSeq(accepted), 7, 'acks in the same chunk as their accepted announcement are stored')
  quick.close()
})

t.test("a group's jobs: no acks for a sibling's run; the key admits only while a job is live", async (t) => {
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: tempDir(t) })
  t.teardown(() => listener.close())
  const port = listener.address().port
  const group = runIdOf(0x6000)
  const key = 'e'.repeat(32)
  const meta = (n: number, job: number) => runMeta(runIdOf(n), { groupId: group, requestedPath: '/g', path: `/g.job${job}` })
  const first = await Peer.announce(port, meta(0x6001, 1), { groupKey: key })
  const second = await Peer.announce(port, meta(0x6002, 2), { groupKey: key })
  t.same([first.reply.type, second.reply.type], ['run-ok', 'run-ok'], 'two jobs join one group')
  burst(second.peer, [ack(runIdOf(0x6001), 1, 5)])
  t.equal(await errorCode(second.peer), 'unknown-run', "a job acking its sibling's run is refused")
  t.equal(listener.store.lastAckedSeq(runIdOf(0x6001)), 0, "the sibling's run holds no ack")

  const otherHost = await Peer.announce(
    port,
    runMeta(runIdOf(0x6003), { groupId: group, host: 'elsewhere', requestedPath: '/x', path: '/x' }),
    { groupKey: 'b'.repeat(32) },
  )
  t.match(otherHost.reply, { type: 'error', code: 'out-of-order' }, 'the group id on another host and path with a guessed key: refused')
  for (const groupKey of ['A'.repeat(32), 'a'.repeat(31), 'a'.repeat(33), 'a'.repeat(64)]) {
    const bad = await Peer.announce(port, meta(0x6100 + groupKey.length, 3), { groupKey })
    t.match(bad.reply, { type: 'error', code: 'bad-frame' }, `a key of ${groupKey.length} characters ${groupKey[0]}: a bad frame`)
    bad.peer.close()
  }

  const third = await Peer.announce(port, meta(0x6004, 3), { groupKey: key })
  t.equal(third.reply.type, 'run-ok', 'the key admits a job while one is live')
  first.peer.close()
  third.peer.close()
  otherHost.peer.close()
  for (const peer of [first.peer, second.peer, third.peer]) await peer.waitClosed()
  const deadline = Date.now() + 20_000
  while (listener.isLive(runIdOf(0x6004)) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10))
  const after = await Peer.announce(port, meta(0x6005, 4), { groupKey: key })
  t.match(after.reply, { type: 'error', code: 'out-of-order' }, 'the key admits nobody once every job is gone')
  after.peer.close()
})
