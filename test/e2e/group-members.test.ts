/**
 * A `write --jobs` group is judged whole or not at all. Real writes against a real listener, then a
 * member's run directory removed from the listener's --dir: verify names the missing member (exit 3)
 * from the group's plan and from the files on disk, offline (--acks) and through a restarted listener
 * (--server), instead of passing the group on its other jobs. A job that could not start (the
 * listener's connection limit) ends the write before any record: verify says so and judges nothing
 * acknowledged (inconclusive), naming the job whose runs were never announced.
 */
import t from 'tap'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, runInProcess, startListener, tempDir } from '../fixtures/cli.js'

const small = ['--size', '4MiB', '--duration', '1']

/** Run ids by data file path, from the trail's run lines. */
function runIds(stdout: string): Map<string, string> {
  const ids = new Map<string, string>()
  for (const match of stdout.matchAll(/^run ([0-9a-f]{16}): \S+, \S+, (\S+)$/gm)) ids.set(match[2]!, match[1]!)
  return ids
}

t.test("--jobs 3, job 2's run directory removed at the listener: exit 3 naming it, never a pass of jobs 1 and 3", async (t) => {
  const dir = tempDir(t)
  const listenerDir = join(dir, 'listener')
  let listener = await startListener(listenerDir)
  t.teardown(() => listener.kill())
  const file = join(dir, 'data')
  const written = await runCli(['write', '--server', listener.server, '--file', file, '--jobs', '3', ...small])
  t.equal(written.code, 0, written.stderr)
  const job2 = runIds(written.stdout).get(`${file}.job2`)!
  t.match(job2, /^[0-9a-f]{16}$/)
  t.equal((await runInProcess(['verify', '--server', listener.server, '--file', file])).code, 0, 'the whole group passes')

  await listener.kill('SIGTERM') // a clean stop: every run folded into runs/ and catalogued
  rmSync(join(listenerDir, 'runs', job2), { recursive: true })
  // The catalog recorded the run: its directory gone is damage named as such.
  const gone = await runInProcess(['verify', '--acks', listenerDir, '--file', file])
  t.equal(gone.code, 3, gone.stdout)
  t.match(gone.stderr, `could not read ${join(listenerDir, 'runs', job2)}: the run's directory is gone, but the listener recorded`)
  // Without the catalog (what its hint says to delete to drop the run), the group's plan names the missing member.
  rmSync(join(listenerDir, 'catalog.msgpack'))
  const offline = await runInProcess(['verify', '--acks', listenerDir, '--file', file])
  t.equal(offline.code, 3, offline.stdout)
  t.equal(offline.stdout, '')
  t.match(
    offline.stderr,
    `plugcheck: ${file}.job2 holds run ${job2} (job 2, fdatasync) of this group, but the ack directory ${listenerDir} has no acks for it: its run directory is missing; nothing was judged\n`,
  )

  // Its data file gone too: the group's plan, in the other runs' metadata, still names it.
  rmSync(`${file}.job2`)
  const planned = `the ack directory ${listenerDir} has 2 of the 3 runs of this group (3 jobs x fdatasync): job 2's fdatasync run (${file}.job2) is missing; nothing was judged\n`
  const offlineNoFile = await runInProcess(['verify', '--acks', listenerDir, '--file', file])
  t.equal(offlineNoFile.code, 3)
  t.match(offlineNoFile.stderr, `plugcheck: ${planned}`)
  t.match(offlineNoFile.stderr, /^hint: its run directory was lost or removed at the listener/m)

  listener = await startListener(listenerDir)
  const online = await runInProcess(['verify', '--server', listener.server, '--file', file, '--json'])
  t.equal(online.code, 3)
  t.equal(online.stdout, '')
  t.match(
    online.stderr,
    `plugcheck: the listener ${listener.server} has 2 of the 3 runs of this group (3 jobs x fdatasync): job 2's fdatasync run (${file}.job2) is missing; nothing was judged\n`,
  )
})

t.test('--method fdatasync,none --jobs 2: the missing member is named by job and method, through a restarted listener', async (t) => {
  const dir = tempDir(t)
  const listenerDir = join(dir, 'listener')
  let listener = await startListener(listenerDir)
  t.teardown(() => listener.kill())
  const file = join(dir, 'data')
  const written = await runCli([
    'write',
    '--server',
    listener.server,
    '--file',
    file,
    '--jobs',
    '2',
    '--method',
    'fdatasync,none',
    ...small,
  ])
  t.equal(written.code, 0, written.stderr)
  const ids = runIds(written.stdout)
  t.equal(ids.size, 4)
  await listener.kill('SIGTERM') // a clean stop: every run folded into runs/
  for (const path of [`${file}.none.job1`, `${file}.fdatasync.job2`]) rmSync(join(listenerDir, 'runs', ids.get(path)!), { recursive: true })
  rmSync(join(listenerDir, 'catalog.msgpack')) // else the runs are named as directories gone (test above)
  listener = await startListener(listenerDir)
  const withFiles = await runInProcess(['verify', '--server', listener.server, '--file', file])
  t.equal(withFiles.code, 3)
  t.match(
    withFiles.stderr,
    new RegExp(
      `^plugcheck: ${file}\\.(none\\.job1|fdatasync\\.job2) holds run [0-9a-f]{16} \\(job \\d, (none|fdatasync)\\) of this group, but the listener ${listener.server} has no acks for it`,
    ),
  )
  rmSync(`${file}.none.job1`)
  rmSync(`${file}.fdatasync.job2`)
  const noFiles = await runInProcess(['verify', '--server', listener.server, '--file', file])
  t.equal(noFiles.code, 3)
  t.match(
    noFiles.stderr,
    `plugcheck: the listener ${listener.server} has 2 of the 4 runs of this group (2 jobs x fdatasync, none): job 1's none run (${file}.none.job1), job 2's fdatasync run (${file}.fdatasync.job2) are missing; nothing was judged\n`,
  )
})

t.test(
  "a job that could not start (the listener's connection limit) ends the write before any record: inconclusive, the job named",
  async (t) => {
    const dir = tempDir(t)
    const listener = await startListener(join(dir, 'listener'), ['--max-connections', '2'])
    t.teardown(() => listener.kill())
    const file = join(dir, 'data')
    const written = await runCli(['write', '--server', listener.server, '--file', file, '--jobs', '3', ...small])
    t.equal(written.code, 3, "the write ends with the failed job's error")
    t.match(written.stderr, /connections open, its limit \(--max-connections\)/)

    const verified = await runInProcess(['verify', '--server', listener.server, '--file', file])
    t.equal(verified.code, 4, verified.stdout + verified.stderr)
    t.match(verified.stdout, /^INCONCLUSIVE: fdatasync acknowledged nothing\.$/m)
    const note =
      /^note: job (\d)'s fdatasync run \((\S+)\) is not at the listener \S+: the write stopped before its first record \(could not start: job (\d) of 3 could not start: .*\), so no job wrote anything\.$/m.exec(
        verified.stdout,
      )
    t.ok(note, `the note names the job that never announced its runs: ${verified.stdout}`)
    t.equal(note?.[1], note?.[3], 'the job named is the one that could not start')
    t.equal(note?.[2], `${file}.job${note?.[1]}`)
    t.notMatch(verified.stdout, /I\/O error/, 'no I/O error is claimed')
    const json = JSON.parse((await runInProcess(['verify', '--server', listener.server, '--file', file, '--json'])).stdout) as {
      claims: Array<{ end?: { reason: string; detail?: string } }>
    }
    t.equal(json.claims.length, 2, 'the two jobs that started announced one run each')
    for (const claim of json.claims)
      t.match(
        claim.end,
        { reason: 'error', detail: /^could not start: job \d of 3 could not start: / },
        'each ended saying the group could not start',
      )
  },
)
