/**
 * `write --jobs 2` where job 2's storage loses acknowledged records while the run is going: job 2's
 * runs end as `storage-lost`, and the other job's runs, stopped because of it, end as interrupted
 * naming the job that failed. No signal was sent to anything: job 1's runs must not be stored at the
 * listener as "interrupted: stopped by SIGTERM", which `runs`, `report` and the listener's log then show.
 */
import t from 'tap'
import { closeSync, openSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { fileSize, spawnCli, startListener, tempDir, waitFor } from '../fixtures/cli.js'

t.test("a job whose storage lost a record: its runs end as storage-lost, the other job's name it, not a SIGTERM", async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'p.dat')
  const recordBytes = 8192
  const writer = spawnCli([
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
    '64MiB',
    '--duration',
    '20',
  ])
  let stderr = ''
  writer.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
  const exited = new Promise<number>((resolve) => writer.on('close', (c) => resolve(c ?? -1)))
  t.teardown(() => void writer.kill('SIGKILL'))
  const victim = `${file}.fdatasync.job2`
  await waitFor('800 records in job 2', () => fileSize(victim) >= recordBytes * 800, 30_000)
  writer.kill('SIGSTOP')
  const fd = openSync(victim, 'r+')
  writeSync(fd, Buffer.alloc(recordBytes * 500), 0, recordBytes * 500, recordBytes * 101)
  closeSync(fd)
  writer.kill('SIGCONT')
  t.equal(await exited, 1, `storage-lost of a tested method: exit 1 (stderr: ${stderr})`)
  await waitFor('4 runs ended at the listener', () => (listener.stderr().match(/ ended \(/g) ?? []).length >= 4, 10_000)
  const ended = listener
    .stderr()
    .split('\n')
    .filter((l) => l.includes(' ended ('))
  t.equal(ended.filter((l) => l.includes('ended (storage-lost')).length, 2, `job 2's runs end as storage-lost:\n${ended.join('\n')}`)
  t.equal(
    ended.filter((l) => l.includes('ended (interrupted: job 2 of 2 failed: the storage lost an acknowledged record')).length,
    2,
    `job 1's runs name the job that failed:\n${ended.join('\n')}`,
  )
  t.notMatch(listener.stderr(), /SIGTERM/, 'no run is said to have been stopped by a signal nobody sent')
})
