/**
 * Runs on one host and path: while one connection's run is live, another connection may not announce
 * a run there ('path-busy', naming the running run); a writer that vanishes gets a 'vanished' end; the
 * runs reply carries every claim on the path with its peer and whether it is live.
 */
import t from 'tap'
import { Listener } from '../../../../src/server/listen/listener.js'
import { AckStore } from '../../../../src/store/ack-store.js'
import { tempDir, waitFor } from '../../../fixtures/cli.js'
import { Peer, runIdOf, runMeta } from '../../../fixtures/peer.js'

const onPath = (n: number, methodIndex = 0) =>
  runMeta(runIdOf(n), {
    host: 'box',
    requestedPath: '/data/db',
    path: '/data/db',
    groupId: runIdOf(n - methodIndex),
    method: methodIndex === 0 ? 'fdatasync' : 'none',
  })

const writerEnv = { bootId: '3f1c0c1e-8d0b-4d8e-9a51-2f5f5a8c0d11', fingerprint: null }

t.test('a live run on a host and path refuses another connection its path', async (t) => {
  const dir = tempDir(t)
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir })
  t.teardown(() => listener.close())
  const port = listener.address().port

  const first = await Peer.writer(port, onPath(1), { writer: writerEnv })
  // The same connection may announce more runs on the path (one per method of a group).
  first.send({ type: 'run', meta: onPath(2, 1) })
  await first.next('run-ok')
  first.send({ type: 'ack', runId: runIdOf(1), fromSeq: 1, toSeq: 5 })
  await first.next('recorded')

  const second = await Peer.open(port)
  second.send({ type: 'hello', protocol: 2, role: 'writer' })
  second.send({ type: 'run', meta: onPath(3) })
  const refusal = await second.next('error')
  t.match(refusal, {
    code: 'path-busy',
    message:
      /box:\/data\/db is being written by run 000000000000000[12] \((fdatasync|none), from 127\.0\.0\.1, announced \d{4}-\d\d-\d\dT[\d:.]+Z\)/,
  })
  t.ok(await second.waitClosed())
  t.notOk((await AckStore.load(dir)).hasRun(runIdOf(3)), 'the refused run was not stored')

  // Verify sees both runs of the group, who announced them, and that they are live.
  const verifier = await Peer.open(port)
  verifier.send({ type: 'hello', protocol: 2, role: 'verifier' })
  verifier.send({ type: 'query', host: 'box', requestedPath: '/data/db' })
  const reply = await verifier.next('runs')
  t.match(reply, {
    runs: [
      { meta: { runId: runIdOf(1) }, peer: '127.0.0.1', writer: writerEnv },
      { meta: { runId: runIdOf(2) }, peer: '127.0.0.1' },
    ],
    claims: [{ live: true, peer: '127.0.0.1' }, { live: true }],
  })

  // The writer vanishes: its runs end as 'vanished', and the path is free again.
  first.close()
  await waitFor(
    'the runs to end',
    () => listener.store.runInfo(runIdOf(1))?.ended === true && listener.store.runInfo(runIdOf(2))?.ended === true,
  )
  const third = await Peer.writer(port, onPath(4), { writer: writerEnv })
  third.send({ type: 'end', runId: runIdOf(4), reason: 'duration' })
  await third.next('recorded')

  verifier.send({ type: 'query', host: 'box', requestedPath: '/data/db' })
  const after = await verifier.next('runs')
  t.match(after, { runs: [{ meta: { runId: runIdOf(4) }, end: { reason: 'duration' } }] })
  if (after.type !== 'runs') throw new Error('not a runs reply')
  const claims = after.claims.map((c) => [c.runId, c.live, c.end?.reason, c.ackedThroughSeq])
  t.same(claims[0], [runIdOf(4), true, 'duration', 0], 'the newest claim first')
  t.same(
    claims.slice(1).sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
    [
      [runIdOf(1), false, 'vanished', 5],
      [runIdOf(2), false, 'vanished', 0],
    ],
    'then the vanished runs, no longer live',
  )
  t.ok(
    after.claims.every((c, i) => i === 0 || c.announcedMs <= after.claims[i - 1]!.announcedMs),
    'newest first',
  )
  third.close()
  verifier.close()

  // Offline, the same claims with live=false, and the stored peer and writer environment.
  const store = await AckStore.load(dir)
  t.same(
    store.claims('box', '/data/db').map((c) => c.live),
    [false, false, false],
  )
  t.match(store.query('box', '/data/db', runIdOf(1)), [{ peer: '127.0.0.1', writer: writerEnv, end: { reason: 'vanished' } }])
})

t.test('an ended run frees its path at once, while its connection stays open', async (t) => {
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: tempDir(t) })
  t.teardown(() => listener.close())
  const port = listener.address().port
  const first = await Peer.writer(port, onPath(10))
  first.send({ type: 'end', runId: runIdOf(10), reason: 'duration' })
  await first.next('recorded')
  const second = await Peer.writer(port, onPath(11))
  t.pass('announced after the first run ended')
  first.close()
  second.close()
})
