/**
 * After a power cut the dead writer's connection can stay open on the listener for many minutes
 * (keepalive). A new run for the same host and path from a writer with another boot id means the
 * machine rebooted: the old run ends as vanished, its connection is closed, the new run is accepted.
 * The same boot id, or one side without a boot id, stays 'path-busy'. A verifier's hello naming the
 * machine and its new boot id ends the old boot's runs the same way.
 */
import t from 'tap'
import { Listener } from '../../../../src/server/listen/listener.js'
import { AckStore } from '../../../../src/store/ack-store.js'
import { tempDir } from '../../../fixtures/cli.js'
import { protocolVersion } from '../../../../src/protocol/messages.js'
import { Peer, runIdOf, runMeta } from '../../../fixtures/peer.js'
import { verdictOf } from '../../../fixtures/verdict-fixture.js'

const writerEnv = (bootId: string | null) => ({ writer: { bootId, fingerprint: null } })
const path = '/data/rebooted'

const announce = (port: number, runId: string, extra: object) => Peer.announce(port, runMeta(runId, { requestedPath: path, path }), extra)

t.test('a writer with a new boot id takes the path over from the dead connection of the old one', async (t) => {
  const dir = tempDir(t)
  const lines: string[] = []
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir, rebootSilenceMs: 0, log: (line) => lines.push(line) })
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
    {
      live: false,
      end: { reason: 'vanished', detail: /boot id boot-after-the-cut, the run's writer had boot-before-the-cut/ },
      ackedThroughSeq: 7,
    },
    'the old run: vanished, not live, its acks kept',
  )
  t.match(
    reply.claims.find((c) => c.runId === runIdOf(0xb5)),
    { live: true },
  )
  verifier.close()
  rebooted.peer.close()
  for (const p of [same, unknown, none]) p.peer.close()
  await listener.close()

  const store = await AckStore.load(dir)
  t.match(store.query('testhost', path, runIdOf(0xb1))[0], { end: { reason: 'vanished' }, spans: [[1, 7]] }, 'the vanished end is on disk')
})

t.test("a boot id is only a claim: without --token only the live run's own address may take over", async (t) => {
  for (const token of [undefined, 'sesame']) {
    await t.test(
      token === undefined
        ? 'no token: a stranger with a forged boot id is refused'
        : 'with --token: a token holder from a new address takes over',
      async (t) => {
        const dir = tempDir(t)
        const listener = await Listener.start({
          host: '127.0.0.1',
          port: 0,
          dir,
          rebootSilenceMs: 0,
          ...(token === undefined ? {} : { token }),
        })
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
      },
    )
  }
})

t.test("a run cannot join another connection's group", async (t) => {
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: tempDir(t) })
  t.teardown(() => listener.close())
  const port = listener.address().port
  const group = runIdOf(0xe0)
  const first = await Peer.writer(port, runMeta(runIdOf(0xe1), { groupId: group, path: '/data/g.fdatasync', requestedPath: '/data/g' }))
  first.send({
    type: 'run',
    meta: runMeta(runIdOf(0xe2), { groupId: group, method: 'none', path: '/data/g.none', requestedPath: '/data/g' }),
  })
  t.match(await first.next('run-ok'), { runId: runIdOf(0xe2) }, 'the same connection adds runs to its own group')
  const stranger = await Peer.open(port, '127.0.0.2')
  stranger.send({ type: 'hello', protocol: 2, role: 'writer' })
  stranger.send({
    type: 'run',
    meta: runMeta(runIdOf(0xe3), { groupId: group, method: 'fsync', path: '/data/g.fsync', requestedPath: '/data/g' }),
  })
  t.match(await stranger.next('error'), { code: 'out-of-order', message: /group .* belongs to runs announced on another connection/ })
  first.close()
})

/**
 * A real power cut leaves the writer's connection open (no FIN), and the rebooted machine first
 * verifies: its verifier hello names its host and new boot id, and every live run of that host's old
 * boot ends as vanished then, so its verdict is taken. Only those: another host's runs, a run whose
 * writer gave no boot id, and (without --token) a hello from another address change nothing.
 */
t.test("a verifier hello from the rebooted machine ends its old boot's live runs, and their verdicts are taken", async (t) => {
  for (const token of [undefined, 'sesame']) {
    await t.test(token === undefined ? 'no token' : 'with --token', async (t) => {
      const dir = tempDir(t)
      const lines: string[] = []
      const listener = await Listener.start({
        host: '127.0.0.1',
        port: 0,
        dir,
        rebootSilenceMs: 0,
        log: (line) => lines.push(line),
        ...(token === undefined ? {} : { token }),
      })
      t.teardown(() => listener.close())
      const port = listener.address().port
      const auth = token === undefined ? {} : { token }
      const writerOn = async (runId: string, host: string, bootId: string | null): Promise<Peer> => {
        const writer = await Peer.open(port)
        writer.send({ type: 'hello', protocol: protocolVersion, role: 'writer', ...auth })
        writer.send({
          type: 'run',
          meta: runMeta(runId, { host, requestedPath: `/data/${runId}`, path: `/data/${runId}` }),
          ...writerEnv(bootId),
        })
        await writer.next('run-ok')
        writer.send({ type: 'ack', runId, fromSeq: 1, toSeq: 4 })
        await writer.next('recorded')
        return writer
      }
      // Two writers of the machine's old boot (two paths), one of another host, one without a boot id.
      const oldA = await writerOn(runIdOf(0xf1), 'box', 'boot-before-the-cut')
      const oldB = await writerOn(runIdOf(0xf2), 'box', 'boot-before-the-cut')
      const other = await writerOn(runIdOf(0xf3), 'elsewhere', 'boot-before-the-cut')
      const unknown = await writerOn(runIdOf(0xf4), 'box', null)
      const live = async (): Promise<boolean[]> => [0xf1, 0xf2, 0xf3, 0xf4].map((n) => listener.isLive(runIdOf(n)))
      const verifier = async (bootId: string, localAddress?: string): Promise<Peer> => {
        const peer = await Peer.open(port, localAddress)
        peer.send({ type: 'hello', protocol: protocolVersion, role: 'verifier', ...auth, machine: { host: 'box', bootId } })
        peer.send({ type: 'list' }) // its reply says the hello was handled
        await peer.next('run-list')
        return peer
      }

      ;(await verifier('boot-before-the-cut')).close()
      t.same(await live(), [true, true, true, true], 'the same boot id: the writers are alive, nothing ends')
      const stranger = await verifier('boot-forged', '127.0.0.2')
      if (token === undefined) {
        t.same(await live(), [true, true, true, true], 'no token: a hello from another address ends nothing')
        t.notOk(oldA.closed || oldB.closed, 'and closes no writer')
        stranger.close()
      } else {
        t.same(
          await live(),
          [false, false, true, true],
          'with --token: the token holder from a new address (DHCP after the reboot) ends them',
        )
        stranger.close()
      }

      const rebooted = await verifier('boot-after-the-cut')
      t.same(
        await live(),
        [false, false, true, true],
        "the old boot's runs of box end; another host's run and a run without a boot id stay live",
      )
      t.ok((await oldA.waitClosed()) && (await oldB.waitClosed()), "the old boot's lingering connections are closed")
      t.notOk(other.closed || unknown.closed, 'the other writers keep their connections')
      t.match(
        lines.join('\n'),
        new RegExp(
          `run ${runIdOf(0xf1)} from \\S+ ended as vanished: its writer's machine rebooted: box connected from \\S+ with boot id boot-(after-the-cut|forged), the run's writer had boot-before-the-cut`,
        ),
        'logged',
      )

      rebooted.send({ type: 'query', host: 'box', requestedPath: `/data/${runIdOf(0xf1)}` })
      const reply = (await rebooted.next('runs')) as {
        claims: Array<{ runId: string; live: boolean; end?: { reason: string; detail?: string } }>
      }
      t.match(
        reply.claims[0],
        { runId: runIdOf(0xf1), live: false, end: { reason: 'vanished', detail: /its writer's machine rebooted/ }, ackedThroughSeq: 4 },
        'the old run: vanished, not live, its acks kept',
      )
      rebooted.send({
        type: 'verdict',
        runId: runIdOf(0xf1),
        result: verdictOf({ acked: 4, intact: 4, lost: 0, lostRanges: [], verdict: 'pass', lossWindowMs: null }),
      })
      t.match(await rebooted.next('verdict-ok'), { runId: runIdOf(0xf1) }, "the rebooted machine's verdict is taken")
      for (const peer of [rebooted, oldA, oldB, other, unknown]) peer.close()
    })
  }
})
