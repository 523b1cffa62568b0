/**
 * write --jobs N announces one group on N connections. A connection joins a group another connection
 * announced only with the group's key and from that connection's address (without --token); a second
 * writer on the path (another group) is still refused while the jobs run.
 */
import t from 'tap'
import { Listener } from '../../../../src/server/listen/listener.js'
import { tempDir } from '../../../fixtures/cli.js'
import { Peer, runIdOf, runMeta } from '../../../fixtures/peer.js'

const key = 'a'.repeat(32)
const requestedPath = '/data/jobs'
const meta = (n: number, group: string, job: number) =>
  runMeta(runIdOf(n), { groupId: group, path: `${requestedPath}.job${job}`, requestedPath })

const announce = Peer.announce

t.test("a job joins its group on a connection of its own with the group's key; a stranger does not", async (t) => {
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: tempDir(t) })
  t.teardown(() => listener.close())
  const port = listener.address().port
  const group = runIdOf(0x10)
  const first = await announce(port, meta(0x11, group, 1), { groupKey: key })
  t.equal(first.reply.type, 'run-ok', 'the first job founds the group')

  const second = await announce(port, meta(0x12, group, 2), { groupKey: key })
  t.equal(second.reply.type, 'run-ok', 'the second job joins it on its own connection (same address, same key)')

  const noKey = await announce(port, meta(0x13, group, 3), {})
  t.match(
    noKey.reply,
    { type: 'error', code: 'out-of-order', message: /belongs to runs announced on another connection/ },
    'no key: refused',
  )
  const wrongKey = await announce(port, meta(0x14, group, 3), { groupKey: 'b'.repeat(32) })
  t.match(wrongKey.reply, { type: 'error', code: 'out-of-order' }, 'a wrong key: refused')
  const elsewhere = await announce(port, meta(0x15, group, 3), { groupKey: key }, '127.0.0.2')
  t.match(elsewhere.reply, { type: 'error', code: 'out-of-order' }, 'the right key from another address (no --token): refused')
  const badKey = await announce(port, meta(0x16, group, 3), { groupKey: 'not hex' })
  t.match(badKey.reply, { type: 'error', code: 'bad-frame' }, 'a key that is not 32 hex digits: a bad frame')

  const otherGroup = await announce(port, meta(0x17, runIdOf(0x20), 1), { groupKey: key })
  t.match(
    otherGroup.reply,
    { type: 'error', code: 'path-busy' },
    'another group on the path of the live jobs: path-busy, as for any second writer',
  )

  // Both jobs' acks are recorded on their own connections.
  for (const [peer, n] of [
    [first.peer, 0x11],
    [second.peer, 0x12],
  ] as const) {
    peer.send({ type: 'ack', runId: runIdOf(n), fromSeq: 1, toSeq: 5 })
    t.match(await peer.next('recorded'), { throughSeq: 5 })
  }
  const verifier = await Peer.open(port)
  verifier.send({ type: 'hello', protocol: 3, role: 'verifier' })
  verifier.send({ type: 'query', host: 'testhost', requestedPath })
  const reply = (await verifier.next('runs')) as { runs: Array<{ meta: { runId: string; groupId: string } }> }
  t.same(reply.runs.map((r) => r.meta.runId).sort(), [runIdOf(0x11), runIdOf(0x12)].sort(), 'a verify finds both jobs as one group')
  for (const peer of [first.peer, second.peer, noKey.peer, wrongKey.peer, elsewhere.peer, badKey.peer, otherGroup.peer, verifier])
    peer.close()
})

t.test('with --token, a job of the group may come from another address', async (t) => {
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: tempDir(t), token: 'secret' })
  t.teardown(() => listener.close())
  const port = listener.address().port
  const group = runIdOf(0x30)
  const open = async (n: number, job: number, localAddress?: string) => {
    const peer = await Peer.open(port, localAddress)
    peer.send({ type: 'hello', protocol: 3, role: 'writer', token: 'secret' })
    peer.send({ type: 'run', meta: meta(n, group, job), groupKey: key })
    return peer
  }
  const first = await open(0x31, 1)
  await first.next('run-ok')
  const second = await open(0x32, 2, '127.0.0.2')
  t.match(await second.next('run-ok'), { runId: runIdOf(0x32) })
  first.close()
  second.close()
})
