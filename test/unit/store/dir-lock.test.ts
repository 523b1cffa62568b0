/**
 * One listener per directory: a second `listen` on the same --dir would keep its own view of the runs
 * and make verify judge a file against half of them, so it is refused (exit 2, one line naming the
 * directory) while the first holds <dir>/lock; verify --acks reads the directory without the lock.
 */
import t from 'tap'
import { Listener } from '../../../src/server/listen/listener.js'
import { AckStore } from '../../../src/store/ack-store.js'
import { runCli, startListener, tempDir } from '../../fixtures/cli.js'
import { Peer, runIdOf, runMeta } from '../../fixtures/peer.js'

t.test('a second listener on the same directory is refused; verify --acks still reads it', async (t) => {
  const dir = tempDir(t)
  const first = await Listener.start({ host: '127.0.0.1', port: 0, dir })
  const writer = await Peer.writer(first.address().port, runMeta(runIdOf(0xd1)))
  writer.send({ type: 'ack', runId: runIdOf(0xd1), fromSeq: 1, toSeq: 5 })
  t.match(await writer.next('recorded'), { throughSeq: 5 })

  await t.rejects(Listener.start({ host: '127.0.0.1', port: 0, dir }), {
    exitCode: 2,
    message: `another plugcheck (a listener or a prune) holds ${dir}'s lock (${dir}/lock)`,
  })
  const offline = await AckStore.load(dir)
  t.same(
    offline.query('testhost', `/data/${runIdOf(0xd1)}`)[0]?.spans.map((s) => [s[0], s[1]]),
    [[1, 5]],
    'verify --acks reads the directory while the listener runs',
  )

  writer.close()
  await first.close()
  const next = await Listener.start({ host: '127.0.0.1', port: 0, dir })
  t.ok(next.store.hasRun(runIdOf(0xd1)), 'once the first listener stopped, the directory is free')
  await next.close()
})

t.test('plugcheck listen on a directory another listener holds exits 2 with one line', async (t) => {
  const dir = tempDir(t)
  const first = await startListener(dir)
  t.teardown(() => first.kill())
  const second = await runCli(['listen', '--host', '127.0.0.1', '--port', '0', '--dir', dir], 20_000)
  t.equal(second.code, 2, 'configuration error')
  t.match(
    second.stderr,
    new RegExp(`^plugcheck: another plugcheck \\(a listener or a prune\\) holds ${dir}'s lock \\(${dir}/lock\\)\\nhint: `),
  )
  t.equal(second.stderr.trim().split('\n').length, 2, 'one line and a hint')
  t.equal(second.stdout, '', 'it never said it was listening')
  // The first listener goes on serving.
  const verifier = await Peer.open(first.port)
  verifier.send({ type: 'hello', protocol: 2, role: 'verifier' })
  t.match(await verifier.next('welcome'), { type: 'welcome' })
  verifier.close()
})
