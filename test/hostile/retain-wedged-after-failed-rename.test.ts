/**
 * `listen --retain`: a prune that fails part-way (one run's directory cannot be renamed: EPERM, here an
 * immutable directory; EBUSY, EIO in the field) leaves the runs renamed before it out of runs/ on disk
 * but still on record in memory. Every later tick then fails on the first of them (ENOENT on its
 * rename) for as long as the listener runs, even once the cause is gone: retention is wedged (quotas
 * never freed again, a warning every tick), and `runs` lists a run whose files are gone. After the
 * cause is gone the next ticks must prune what is old, and no listed run may lack its directory.
 */
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, sleep, startListener, tempDir, waitFor } from '../fixtures/cli.js'
import { Peer, runIdOf, runMeta } from '../fixtures/peer.js'

t.test('a retention prune that failed on one run recovers once the cause is gone', async (t) => {
  const dir = join(tempDir(t), 'acks')
  const listener = await startListener(dir, ['--retain', '8s'])
  const stuck = join(dir, 'runs', runIdOf(2))
  t.teardown(async () => {
    try {
      execFileSync('chattr', ['-i', stuck])
    } catch {}
    await listener.kill()
  })
  for (let n = 1; n <= 3; n++) {
    const w = await Peer.writer(listener.port, runMeta(runIdOf(n)))
    w.send({ type: 'ack', runId: runIdOf(n), fromSeq: 1, toSeq: 100 })
    w.send({ type: 'end', runId: runIdOf(n), reason: 'duration' })
    await w.next('recorded')
    w.close()
  }
  // Folded into runs/ within ~5 s; then run 2's directory cannot be renamed when the prune comes.
  await waitFor(
    'the runs folded into runs/',
    () => [1, 2, 3].every((n) => existsSync(join(dir, 'runs', runIdOf(n), 'meta.msgpack'))),
    15_000,
  )
  execFileSync('chattr', ['+i', stuck])
  await waitFor('a failed prune', () => /could not prune/.test(listener.stderr()), 15_000)
  execFileSync('chattr', ['-i', stuck])
  // The cause is gone: within a few ticks (every 1 s) every old run is pruned. Waited for (a pruned
  // line after the failure, and run 2's directory gone), bounded at 30 s rather than a fixed 4 s a
  // loaded machine may not tick through: wedged retention fails on every tick, says no pruned line
  // and keeps run 2 however long it is given, and the checks below then say so.
  const causeGone = listener.stderr().length
  const deadlineMs = Date.now() + 30_000
  while (!(/pruned \d+ runs? that ended/.test(listener.stderr().slice(causeGone)) && !existsSync(stuck)) && Date.now() < deadlineMs)
    await sleep(50)
  const listed = await runCli(['runs', '--server', listener.server, '--json'])
  t.equal(listed.code, 0, listed.stderr)
  const ids = (JSON.parse(listed.stdout) as { runs: { runId: string }[] }).runs.map((r) => r.runId)
  const gone = ids.filter((id) => !existsSync(join(dir, 'runs', id)))
  t.same(gone, [], 'no run is listed whose directory is gone')
  t.same(
    ids,
    [],
    `every run older than 8s is pruned once it can be (listed: ${ids.join(', ')}; runs/: ${readdirSync(join(dir, 'runs')).join(', ')})`,
  )
  const lastLines = listener.stderr().trim().split('\n').slice(-2).join('\n')
  t.notMatch(lastLines, /could not prune/, `retention is not failing on every tick (${lastLines})`)
})
