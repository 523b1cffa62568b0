/**
 * A flipped bit in the host name of a run's meta.msgpack as an older listener stored it (bare
 * msgpack, no checksum). The data file's checksummed superblock holds that very run, and the
 * listener's directory holds it too (runs/<runId>): the listener's metadata disagrees with the
 * superblock, which is damage at the listener, named (exit 3). Today verify takes the path's previous
 * run for the latest, says the file's run is one "this listener does not know on this path (another
 * listener, host name or spelling of the path)" and exits 2 NOT JUDGED, hiding the file's 30 lost
 * acknowledged records behind a false hint to the operator.
 */
import t from 'tap'
import { openSync, readFileSync, writeFileSync, writeSync, closeSync } from 'node:fs'
import { join } from 'node:path'
import { Packr } from 'msgpackr'
import { unseal } from '../../src/server/sealed-file.js'
import { runCli, runInProcess, startListener, tempDir } from '../fixtures/cli.js'

const packr = new Packr({ useRecords: false, int64AsType: 'number', mapsAsObjects: true })

t.test("a flipped bit in an older listener's meta.msgpack host: named, exit 3, never NOT JUDGED as another listener's run", async (t) => {
  const dir = tempDir(t)
  const listenerDir = join(dir, 'listener')
  let listener = await startListener(listenerDir)
  t.teardown(() => listener.kill())
  const file = join(dir, 'data')
  const args = ['write', '--server', listener.server, '--file', file, '--size', '2MiB', '--record-size', '4096', '--duration', '1']
  const first = await runCli(args)
  t.equal(first.code, 0, first.stderr)
  const second = await runCli(args)
  t.equal(second.code, 0, second.stderr)
  const runId = /^run ([0-9a-f]{16}):/m.exec(second.stdout)![1]!
  // 30 acknowledged records of the latest run lost: the intact directory gives FAIL.
  const fd = openSync(file, 'r+')
  writeSync(fd, Buffer.alloc(30 * 4096), 0, 30 * 4096, 100 * 4096)
  closeSync(fd)
  const intact = await runInProcess(['verify', '--server', listener.server, '--file', file])
  t.equal(intact.code, 1, `intact: FAIL (${intact.stdout.split('\n')[0]})`)
  await listener.kill()

  const metaPath = join(listenerDir, 'runs', runId, 'meta.msgpack')
  const sealed = unseal('meta', readFileSync(metaPath))
  if (sealed.kind !== 'sealed') throw new Error(`meta.msgpack is ${sealed.kind}, not sealed`)
  const stored = packr.unpack(sealed.body) as { meta: { host: string } }
  const right = stored.meta.host
  const wrong = right.slice(0, -1) + String.fromCharCode(right.charCodeAt(right.length - 1) ^ 0x01)
  stored.meta.host = wrong
  writeFileSync(metaPath, packr.pack(stored)) // as an older listener stored it: no checksum

  const offline = await runInProcess(['verify', '--acks', listenerDir, '--file', file])
  t.equal(offline.code, 3, `offline: exit 3 (${offline.stdout.split('\n')[0]} / ${offline.stderr.split('\n')[0]})`)
  t.equal(offline.stdout, '', 'no verdict')
  t.match(offline.stderr, new RegExp(`run ${runId}[^\\n]*host is "${wrong}" at the listener, "${right}" in the file`), 'the field named with both values')
  t.notMatch(offline.stdout + offline.stderr, /this listener does not know on this path/)

  listener = await startListener(listenerDir)
  const online = await runInProcess(['verify', '--server', listener.server, '--file', file])
  t.equal(online.code, 3, `online: exit 3 (${online.stdout.split('\n')[0]} / ${online.stderr.split('\n')[0]})`)
  t.match(online.stderr, new RegExp(`run ${runId}[^\\n]*host is "${wrong}" at the listener, "${right}" in the file`))
})
