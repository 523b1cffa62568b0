/**
 * A run's acks.log whose size reads 1 TiB: its entries, then a hole (a file system that lost the log's
 * size, or a stray truncate). The listener writes one entry per commit after the previous one's
 * fdatasync, so a crash leaves at most one entry's worth of zeros after the last whole entry; more is
 * damage. Today replay reads every byte of the hole looking for data (about 20 GB a minute here) and
 * then takes the terabyte of zeros for a torn tail: verify --acks and a listener starting on the
 * directory stall for most of an hour. It must be refused at once (exit 3), naming the log and the byte
 * where the zeros begin.
 */
import t from 'tap'
import { statSync, truncateSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, startListener, tempDir } from '../fixtures/cli.js'

t.test('an ack log with a terabyte hole after its entries: refused at once, not read for an hour', async (t) => {
  const dir = tempDir(t)
  const listenerDir = join(dir, 'listener')
  const listener = await startListener(listenerDir)
  t.teardown(() => listener.kill())
  const file = join(dir, 'data')
  const written = await runCli([
    'write',
    '--server',
    listener.server,
    '--file',
    file,
    '--size',
    '2MiB',
    '--record-size',
    '4096',
    '--duration',
    '1',
  ])
  t.equal(written.code, 0, written.stderr)
  const runId = /^run ([0-9a-f]{16}):/m.exec(written.stdout)![1]!
  // A clean stop: every run folded from the journal into runs/ (a SIGKILL would leave its last seconds in journal/).
  await listener.kill('SIGTERM')
  const log = join(listenerDir, 'runs', runId, 'acks.log')
  const size = statSync(log).size
  truncateSync(log, 2 ** 40)

  const started = performance.now()
  const verify = await runCli(['verify', '--acks', listenerDir, '--file', file], 20_000)
  const seconds = (performance.now() - started) / 1000
  t.equal(verify.code, 3, `verify --acks exits 3 (-1: killed after ${seconds.toFixed(0)} s) ${verify.stderr.split('\n')[0]}`)
  t.equal(verify.stdout, '', 'no verdict')
  t.match(verify.stderr, new RegExp(`could not read ${log}: damaged at byte ${size}`))
})
