/**
 * A journal segment that does not belong to the directory's present (an older copy of its own
 * segment, put back from a backup or a copy of the directory taken while it ran) announces a run that
 * runs/ already holds with thousands more folded commits. No crash leaves that: a run's log is never
 * longer than the journal's frames for it allow. Today the run is taken from the journal alone (its
 * folded log is not read), so `verify --acks` judges 117-odd acks instead of 8,000 (a FAIL turns into
 * a PASS), and a listener started on the directory "recovers" by rewriting the log from the stale
 * segment (O_TRUNC): the recorded acks are destroyed on disk. It must be refused (exit 3) naming the
 * segment or the log, and the log must be left as it was.
 */
import t, { type Test } from 'tap'
import { closeSync, cpSync, mkdirSync, openSync, readdirSync, statSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { fileSize, runCli, runInProcess, spawnCli, startListener, tempDir, waitFor } from '../fixtures/cli.js'

/**
 * One write run against a listener of its own, in a fresh directory under dir, with an early copy of
 * a journal segment holding the run's announcement and its first rounds; the listener stopped cleanly
 * after (everything folded into runs/, journal/ empty).
 */
async function recordRun(
  t: Test,
  dir: string,
  durationS: number,
): Promise<{ listenerDir: string; file: string; saved: string; name: string; out: string; acked: number }> {
  mkdirSync(dir)
  const listenerDir = join(dir, 'listener')
  const listener = await startListener(listenerDir)
  t.teardown(() => listener.kill())
  const file = join(dir, 'data')
  const writer = spawnCli([
    'write',
    '--server',
    listener.server,
    '--file',
    file,
    '--method',
    'fdatasync',
    '--size',
    '4MiB',
    '--record-size',
    '4096',
    '--duration',
    String(durationS),
  ])
  let out = ''
  writer.stdout!.on('data', (c: Buffer) => (out += c.toString()))
  const closed = new Promise<number>((resolve) => writer.on('close', (c) => resolve(c ?? -1)))
  // An early copy of the journal: a segment holding the run's announcement and its first rounds.
  const journal = join(listenerDir, 'journal')
  const saved = join(dir, 'saved')
  mkdirSync(saved)
  const segmentWithRounds = (): string | undefined =>
    readdirSync(journal).find((name) => name.endsWith('.wal') && fileSize(join(journal, name)) > 2000)
  // Copied as soon as it is seen: the listener may fold it away any moment (then the next one is waited for).
  let name: string | undefined
  await waitFor('a journal segment with rounds', () => {
    name = segmentWithRounds()
    if (name === undefined) return false
    try {
      cpSync(join(journal, name), join(saved, name))
      return true
    } catch {
      return false
    }
  })
  t.equal(await closed, 0, out)
  await listener.kill('SIGTERM') // clean stop: everything folded into runs/, journal/ empty
  const acked = Number(/([\d,]+) records synced and acknowledged/.exec(out)![1]!.replace(/,/g, ''))
  return { listenerDir, file, saved, name: name!, out, acked }
}

t.test('a stale journal segment next to a folded run: refused, never fewer acks, log not rewritten', async (t) => {
  const dir = tempDir(t)
  // The records zeroed below must all have been acked: a machine too loaded to sync 700 records in
  // 3 s runs again, longer, in a fresh directory (an unloaded one syncs thousands in 3 s).
  let run = await recordRun(t, join(dir, 'run-3s'), 3)
  for (const durationS of [9, 27]) {
    if (run.acked > 700) break
    t.comment(`${run.acked} acks in the last run: again for ${durationS} s`)
    run = await recordRun(t, join(dir, `run-${durationS}s`), durationS)
  }
  const { listenerDir, file, saved, name, out, acked } = run
  const runId = /^run ([0-9a-f]{16}):/m.exec(out)![1]!
  t.ok(acked > 700, `${acked} acks: more than the 650 records zeroed below reach`)

  // The truth: records acked late are lost.
  const fd = openSync(file, 'r+')
  writeSync(fd, Buffer.alloc(50 * 4096), 0, 50 * 4096, 600 * 4096)
  closeSync(fd)
  const intact = await runInProcess(['verify', '--acks', listenerDir, '--file', file])
  t.equal(intact.code, 1, `the intact directory: FAIL (${intact.stdout.split('\n')[0]})`)

  const copy = join(dir, 'copy')
  cpSync(listenerDir, copy, { recursive: true })
  cpSync(join(saved, name), join(copy, 'journal', name))
  const log = join(copy, 'runs', runId, 'acks.log')
  const logBytes = statSync(log).size

  const offline = await runInProcess(['verify', '--acks', copy, '--file', file])
  t.equal(offline.code, 3, `verify --acks exits 3 (${offline.stdout.split('\n')[0]})`)
  t.notMatch(offline.stdout, /PASS/, 'never a PASS')

  const again = await startListener(copy).catch((error: Error) => error)
  if (!(again instanceof Error)) {
    t.teardown(() => again.kill())
    const online = await runCli(['verify', '--server', again.server, '--file', file])
    t.equal(online.code, 3, `verify through the listener exits 3 (${online.stdout.split('\n')[0]})`)
    t.notMatch(online.stdout, /PASS/, 'never a PASS')
    await again.kill('SIGTERM')
  }
  t.equal(statSync(log).size, logBytes, 'the folded log is not rewritten from the stale segment')
})
