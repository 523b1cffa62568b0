/**
 * A FIFO planted in the listener directory cannot hang its startup: files are opened without
 * blocking and must be regular files. A FIFO as a run's meta.msgpack is skipped with a warning, as
 * other unreadable metadata is; a FIFO as its acks.log is refused as an unreadable log (exit 3, naming
 * it), never read as an empty one. Each listener runs as a child, killed if it hangs.
 */
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { mkdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { Listener } from '../../src/server/listener.js'
import { runCli, spawnCli, tempDir, waitFor } from '../fixtures/cli.js'
import { Peer, runIdOf, runMeta } from './peer.js'

async function storeWithRun(dir: string, runId: string): Promise<void> {
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir })
  const writer = await Peer.writer(listener.address().port, runMeta(runId))
  writer.send({ type: 'ack', runId, fromSeq: 1, toSeq: 3 })
  await writer.next('recorded')
  writer.close()
  await listener.close()
}

t.test('a FIFO as meta.msgpack is skipped with a warning', async (t) => {
  const dir = tempDir(t)
  await storeWithRun(dir, runIdOf(0xe1))
  const planted = join(dir, 'runs', runIdOf(0xe2))
  mkdirSync(planted)
  execFileSync('mkfifo', [join(planted, 'meta.msgpack')])
  const child = spawnCli(['listen', '--host', '127.0.0.1', '--port', '0', '--dir', dir])
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()))
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
  const exited = new Promise((resolve) => child.on('exit', resolve))
  t.teardown(async () => {
    child.kill('SIGKILL')
    await exited
  })
  await waitFor('the listener to start', () => /listening on/.test(stdout), 15_000)
  t.match(stderr, `plugcheck: run ${runIdOf(0xe2)}: unreadable metadata, skipped (${join(planted, 'meta.msgpack')} is not a regular file)`)
  const port = Number(/:(\d+),/.exec(stdout)![1])
  const verifier = await Peer.open(port)
  verifier.send({ type: 'hello', protocol: 2, role: 'verifier' })
  verifier.send({ type: 'query', host: 'testhost', requestedPath: `/data/${runIdOf(0xe1)}` })
  t.match(await verifier.next('runs'), { runs: [{ meta: { runId: runIdOf(0xe1) }, spans: [[1, 3]] }] }, 'the other run is served')
  verifier.close()
})

t.test('a FIFO as acks.log is refused as an unreadable log', async (t) => {
  const dir = tempDir(t)
  await storeWithRun(dir, runIdOf(0xe3))
  const log = join(dir, 'runs', runIdOf(0xe3), 'acks.log')
  rmSync(log)
  execFileSync('mkfifo', [log])
  const listen = await runCli(['listen', '--host', '127.0.0.1', '--port', '0', '--dir', dir], 15_000)
  t.equal(listen.code, 3, `the listener refuses to start (${listen.stderr.trim()})`)
  t.match(listen.stderr, `could not read ${log}: not a regular file`)
  t.equal(listen.stdout, '')
})
