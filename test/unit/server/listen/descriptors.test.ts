/**
 * Live runs hold no descriptor between commits: a run's ack log is opened, written, fdatasynced and
 * closed within each commit. A running listener limited to 64 descriptors (about 30 of them Node's own) serves
 * 64 live runs taking acks at once, and still accepts a new honest run.
 */
import t from 'tap'
import { readdirSync } from 'node:fs'
import { limitDescriptors, startListener, tempDir } from '../../../fixtures/cli.js'
import { Peer, runIdOf, runMeta } from '../../../fixtures/peer.js'
import { maxRunsPerConnection } from '../../../../src/server/listen/listener-options.js'

t.test('64 live runs under a 64-descriptor limit, and a new run still accepted', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(dir)
  t.teardown(() => listener.kill())
  limitDescriptors(listener, 64)
  const port = listener.port
  t.ok(maxRunsPerConnection >= 16, 'four connections of 16 runs are within the per-connection cap')

  const writers: Peer[] = []
  for (let w = 0; w < 4; w++) {
    const writer = await Peer.open(port)
    writer.send({ type: 'hello', protocol: 2, role: 'writer' })
    for (let i = 0; i < 16; i++) writer.send({ type: 'run', meta: runMeta(runIdOf(0xf00 + 16 * w + i)) })
    for (let i = 0; i < 16; i++) await writer.next('run-ok', 10_000)
    writers.push(writer)
  }
  // Every run takes acks, in rounds, all of them live at once.
  for (let round = 1; round <= 3; round++) {
    for (const [w, writer] of writers.entries()) {
      for (let i = 0; i < 16; i++) writer.send({ type: 'ack', runId: runIdOf(0xf00 + 16 * w + i), fromSeq: round, toSeq: round })
    }
    for (const writer of writers) {
      const seen = new Set<string>()
      while (seen.size < 16) {
        const recorded = (await writer.next('recorded', 10_000)) as { runId: string; throughSeq: number }
        if (recorded.throughSeq === round) seen.add(recorded.runId)
      }
    }
  }
  t.pass('64 live runs recorded 3 acks each')
  const openFds = readdirSync(`/proc/${listener.process.pid}/fd`).length
  t.ok(openFds < 64, `the listener holds ${openFds} descriptors with 64 live runs`)

  const honest = await Peer.writer(port, runMeta(runIdOf(0xfff)))
  honest.send({ type: 'ack', runId: runIdOf(0xfff), fromSeq: 1, toSeq: 10 })
  t.match(await honest.next('recorded'), { throughSeq: 10 }, 'a new honest run is accepted and recorded')
  t.notMatch(listener.stderr(), /EMFILE/)
  honest.close()
  for (const writer of writers) writer.close()
})
