/**
 * After a power cut the dead writer's connection can stay open on the listener for many minutes
 * (keepalive). A new run for the same host and path from a writer with another boot id means the
 * machine rebooted: the old run ends as vanished, its connection is closed, the new run is accepted.
 * The same boot id, or one side without a boot id, stays 'path-busy'.
 */
import t from 'tap'
import { Listener } from '../../src/server/listener.js'
import { AckStore } from '../../src/server/ack-store.js'
import { tempDir } from '../fixtures/cli.js'
import { Peer, runIdOf, runMeta } from './peer.js'

const writerEnv = (bootId: string | null) => ({ writer: { bootId, fingerprint: null } })
const path = '/data/rebooted'

const announce = (port: number, runId: string, extra: object) => Peer.announce(port, runMeta(runId, { requestedPath: path, path }), extra)

t.test('a writer with a new boot id takes the path over from the dead connection of the old one', async (t) => {
  const dir = tempDir(t)
  const lines: string[] = []
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir, log: (line) => lines.push(line) })
  t.teardown(() => listener.close())
  const port = listener.address().port
  const old = await announce(port, runIdOf(0xb1), writerEnv('boot-before-the-cut'))
  t.equal(old.reply.type, 'run-ok')
  old.peer.send({ type: 'ack', runId: runIdOf(0xb1), fromSeq: 1, toSeq: 7 })
  await old.peer.next('recorded')
  // The old connection stays open (its machine lost power; nothing tells the listener).

  const same = await announce(port, runIdOf(0xb2), writerEnv('boot-before-the-cut'))
  t.match(same.reply, { type: 'error', code: 'path-busy' }, 'the same boot id: path-busy')
  const unknown = await announce(port, runIdOf(0xb3), writerEnv(null))
  t.match(unknown.reply, { type: 'error', code: 'path-busy' }, 'no boot id from the new writer: path-busy')
  const none = await announce(port, runIdOf(0xb4), {})
  t.match(none.reply, { type: 'error', code: 'path-busy' }, 'no writer environment at all: path-busy')
  t.equal(old.peer.closed, false, 'the old connection is untouched by refused announcements')

  const rebooted = await announce(port, runIdOf(0xb5), writerEnv('boot-after-the-cut'))
  t.equal(rebooted.reply.type, 'run-ok', 'another boot id: the new run is accepted')
  t.ok(await old.peer.waitClosed(), "the old writer's connection is closed")
  t.match(lines.join('\n'), new RegExp(`run ${runIdOf(0xb1)} from \\S+ ended as vanished: its writer's machine rebooted`), 'logged')

  rebooted.peer.send({ type: 'ack', runId: runIdOf(0xb5), fromSeq: 1, toSeq: 3 })
  t.match(await rebooted.peer.next('recorded'), { throughSeq: 3 }, 'the new run records acks')
  const verifier = await Peer.open(port)
  verifier.send({ type: 'hello', protocol: 2, role: 'verifier' })
  verifier.send({ type: 'query', host: 'testhost', requestedPath: path })
  const reply = (await verifier.next('runs')) as { claims: Array<{ runId: string; live: boolean; end?: { reason: string } }> }
  t.match(
    reply.claims.find((c) => c.runId === runIdOf(0xb1)),
    { live: false, end: { reason: 'vanished', detail: /boot id boot-after-the-cut, the run's writer had boot-before-the-cut/ }, ackedThroughSeq: 7 },
    'the old run: vanished, not live, its acks kept',
  )
  t.match(reply.claims.find((c) => c.runId === runIdOf(0xb5)), { live: true })
  verifier.close()
  rebooted.peer.close()
  for (const p of [same, unknown, none]) p.peer.close()
  await listener.close()

  const store = await AckStore.load(dir)
  t.match(store.query('testhost', path, runIdOf(0xb1))[0], { end: { reason: 'vanished' }, spans: [[1, 7]] }, 'the vanished end is on disk')
})

t.test('a boot id is only a claim: without --token only the live run\'s own address may take over', async (t) => {
  for (const token of [undefined, 'sesame']) {
    await t.test(token === undefined ? 'no token: a stranger with a forged boot id is refused' : 'with --token: a token holder from a new address takes over', async (t) => {
      const dir = tempDir(t)
      const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir, ...(token === undefined ? {} : { token }) })
      t.teardown(() => listener.close())
      const port = listener.address().port
      const hello = { type: 'hello', protocol: 2, role: 'writer', ...(token === undefined ? {} : { token }) }
      const honest = await Peer.open(port)
      honest.send(hello)
      honest.send({ type: 'run', meta: runMeta(runIdOf(0xd1), { requestedPath: path, path }), ...writerEnv('boot-a') })
      await honest.next('run-ok')
      const other = await Peer.open(port, '127.0.0.2')
      other.send(hello)
      other.send({ type: 'run', meta: runMeta(runIdOf(0xd2), { requestedPath: path, path }), ...writerEnv('boot-forged') })
      if (token === undefined) {
        t.match(await other.next('error'), { code: 'path-busy' })
        await new Promise((resolve) => setTimeout(resolve, 100))
        t.notOk(honest.closed, 'the honest writer keeps its connection')
      } else {
        t.match(await other.next('run-ok'), { runId: runIdOf(0xd2) })
        t.ok(await honest.waitClosed(), "the rebooted writer's lingering connection is closed")
      }
      honest.close()
      other.close()
    })
  }
})

t.test("a run cannot join another connection's group", async (t) => {
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: tempDir(t) })
  t.teardown(() => listener.close())
  const port = listener.address().port
  const group = runIdOf(0xe0)
  const first = await Peer.writer(port, runMeta(runIdOf(0xe1), { groupId: group, path: '/data/g.fdatasync', requestedPath: '/data/g' }))
  first.send({ type: 'run', meta: runMeta(runIdOf(0xe2), { groupId: group, method: 'none', path: '/data/g.none', requestedPath: '/data/g' }) })
  t.match(await first.next('run-ok'), { runId: runIdOf(0xe2) }, 'the same connection adds runs to its own group')
  const stranger = await Peer.open(port, '127.0.0.2')
  stranger.send({ type: 'hello', protocol: 2, role: 'writer' })
  stranger.send({ type: 'run', meta: runMeta(runIdOf(0xe3), { groupId: group, method: 'fsync', path: '/data/g.fsync', requestedPath: '/data/g' }) })
  t.match(await stranger.next('error'), { code: 'out-of-order', message: /group .* belongs to runs announced on another connection/ })
  first.close()
})
