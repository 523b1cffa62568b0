/**
 * A FIFO planted in the listener directory cannot hang its startup: files are opened without
 * blocking and must be regular files. A FIFO as a run's meta.msgpack is refused as damaged metadata
 * is, and a FIFO as its acks.log as an unreadable log (exit 3, naming it), never read as an empty one
 * or left out. Each listener runs as a child, bounded by a timeout.
 */
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { mkdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { Listener } from '../../../../src/server/listen/listener.js'
import { listenerRefuses } from '../../../fixtures/damage-refusal.js'
import { runCli, tempDir } from '../../../fixtures/cli.js'
import { Peer, runIdOf, runMeta } from '../../../fixtures/peer.js'

async function storeWithRun(dir: string, runId: string): Promise<void> {
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir })
  const writer = await Peer.writer(listener.address().port, runMeta(runId))
  writer.send({ type: 'ack', runId, fromSeq: 1, toSeq: 3 })
  await writer.next('recorded')
  writer.close()
  await listener.close()
}

t.test('a FIFO as meta.msgpack is refused as damaged metadata, never a run left out', async (t) => {
  const dir = tempDir(t)
  await storeWithRun(dir, runIdOf(0xe1))
  const planted = join(dir, 'runs', runIdOf(0xe2))
  mkdirSync(planted)
  execFileSync('mkfifo', [join(planted, 'meta.msgpack')])
  const listen = await runCli(['listen', '--host', '127.0.0.1', '--port', '0', '--dir', dir], 60_000)
  t.equal(listen.code, 3, `the listener refuses to start (${listen.stderr.trim()})`)
  t.match(listen.stderr, `could not read ${join(planted, 'meta.msgpack')}: not a regular file`)
  t.equal(listen.stdout, '')
  const verify = await runCli(['verify', '--acks', dir, '--file', `/data/${runIdOf(0xe1)}`, '--host', 'testhost'], 60_000)
  t.equal(verify.code, 3, 'verify --acks exits 3')
  t.match(verify.stderr, `plugcheck: could not read ${join(planted, 'meta.msgpack')}: not a regular file`)
})

t.test('a FIFO as acks.log is refused as an unreadable log', async (t) => {
  const dir = tempDir(t)
  await storeWithRun(dir, runIdOf(0xe3))
  const log = join(dir, 'runs', runIdOf(0xe3), 'acks.log')
  rmSync(log)
  execFileSync('mkfifo', [log])
  // In the catalog: the listener starts, its check of the run's files does not hang on the FIFO.
  await listenerRefuses(t, dir, `could not read ${log}: not a regular file`)
  // Without the catalog, replayed at start: listen refuses to start.
  rmSync(join(dir, 'catalog.msgpack'))
  const listen = await runCli(['listen', '--host', '127.0.0.1', '--port', '0', '--dir', dir], 60_000)
  t.equal(listen.code, 3, `the listener refuses to start (${listen.stderr.trim()})`)
  t.match(listen.stderr, `could not read ${log}: not a regular file`)
  t.equal(listen.stdout, '')
})
