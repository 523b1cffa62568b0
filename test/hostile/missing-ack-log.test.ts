/**
 * A run's meta.msgpack is there and its acks.log is gone (or emptied to 0 bytes). The listener creates
 * the log (its header fsynced) before meta.msgpack, and syncs both directory entries, so no crash
 * leaves metadata without a log: it is damage. Today replay takes the missing log for an empty one, the
 * run is judged as a job that acknowledged nothing and is excused: a `--jobs 2` group whose job 2 lost
 * 30 acknowledged records turns from FAIL into PASS. It must be refused (exit 3) naming the log, never
 * judged with fewer acks, offline and through a listener started on the directory.
 */
import t from 'tap'
import { closeSync, cpSync, openSync, rmSync, truncateSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, runInProcess, startListener, tempDir } from '../fixtures/cli.js'

function zero(path: string, fromRecord: number, records: number): void {
  const fd = openSync(path, 'r+')
  writeSync(fd, Buffer.alloc(records * 4096), 0, records * 4096, fromRecord * 4096)
  closeSync(fd)
}

t.test("a --jobs member's acks.log missing or emptied: refused, never a PASS on the other jobs", async (t) => {
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
    '--method',
    'fdatasync,none',
    '--jobs',
    '2',
    '--size',
    '4MiB',
    '--record-size',
    '4096',
    '--duration',
    '2',
  ])
  t.equal(written.code, 0, written.stderr)
  // A clean stop: every run folded from the journal into runs/ (a SIGKILL would leave its last seconds in journal/).
  await listener.kill('SIGTERM')
  const job2 = new RegExp(`^run ([0-9a-f]{16}): fdatasync, append, 4 KiB records, ${file}\\.fdatasync\\.job2$`, 'm').exec(
    written.stdout,
  )![1]!
  zero(`${file}.fdatasync.job2`, 100, 30) // 30 acknowledged records of job 2 lost (a slow machine acks a few hundred in 2 s)
  zero(`${file}.none.job1`, 200, 50) // the control lost records: the cut was real

  const intact = await runInProcess(['verify', '--acks', listenerDir, '--file', file])
  t.equal(intact.code, 1, `the intact directory: FAIL (${intact.stdout.split('\n')[0]})`)

  for (const [name, damage] of [
    ['missing', (log: string) => rmSync(log)],
    ['emptied', (log: string) => truncateSync(log, 0)],
  ] as const) {
    await t.test(name, async (t) => {
      const copy = join(dir, name)
      cpSync(listenerDir, copy, { recursive: true })
      const log = join(copy, 'runs', job2, 'acks.log')
      damage(log)
      const offline = await runInProcess(['verify', '--acks', copy, '--file', file])
      t.equal(offline.code, 3, `verify --acks exits 3 (${offline.stdout.split('\n')[0]})`)
      t.equal(offline.stdout, '', 'no verdict')
      t.match(offline.stderr, log, 'the log is named')
      const again = await startListener(copy).catch((error: Error) => error)
      if (again instanceof Error) {
        t.match(again.message, log, 'the listener refuses its directory, naming the log')
      } else {
        t.teardown(() => again.kill())
        const online = await runInProcess(['verify', '--server', again.server, '--file', file])
        t.equal(online.code, 3, `verify through the listener exits 3 (${online.stdout.split('\n')[0]})`)
        t.equal(online.stdout, '', 'no verdict')
      }
    })
  }
})
