/**
 * Evidence: a `write` on a path whose last run vanished (its machine may have lost power) and was
 * never verified would replace the files verify must judge. It is refused (exit 2) with the verify
 * command to run first, touching nothing; `verify --server` stores its verdict at the listener, after
 * which the write goes ahead; `--discard-unverified` writes at once. A run that ended (--duration, a
 * signal) leaves no evidence to keep, and a write after it is never asked for anything.
 */
import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { listRuns } from '../../src/client/verify/listener-client.js'
import { parseEndpoint, type Endpoint } from '../../src/protocol/endpoint.js'
import { runCli, runInProcess, startListener, tempDir, writeThenKill } from '../fixtures/cli.js'
import { runsEnded } from '../fixtures/runs-ended.js'

const endpoint = (server: string): Endpoint => parseEndpoint(server) as Endpoint
const runsAt = async (server: string) => (await listRuns(endpoint(server), undefined, 10_000)).runs
const small = ['--size', '16MiB']

for (const jobs of [1, 2]) {
  const files = (file: string): string[] => (jobs === 1 ? [file] : [`${file}.job1`, `${file}.job2`])
  t.test(
    `write${jobs > 1 ? ` --jobs ${jobs}` : ''} after a vanished, unverified run: refused (exit 2) until verify; nothing touched`,
    async (t) => {
      const dir = tempDir(t)
      const listener = await startListener(join(dir, 'listener'))
      t.teardown(() => listener.kill())
      const file = join(dir, 'data')
      await writeThenKill(listener.server, file, ['--jobs', String(jobs), ...small], 200, join(dir, 'trace'))
      await runsEnded(listener.server, file) // their last acks and their ends (vanished) taken in
      const before = files(file).map((f) => readFileSync(f))
      const runsBefore = await runsAt(listener.server)
      t.equal(runsBefore.length, jobs)
      t.ok(
        runsBefore.every((r) => r.end?.reason === 'vanished'),
        'the killed writer vanished, as after a power cut',
      )

      const refused = await runCli([
        'write',
        '--server',
        listener.server,
        '--file',
        file,
        '--duration',
        '1',
        '--jobs',
        String(jobs),
        ...small,
      ])
      t.equal(refused.code, 2, refused.stderr)
      t.match(
        refused.stderr,
        new RegExp(
          `^plugcheck: refusing to write to ${file.replace(/\./g, '\\.')}: its last run \\([0-9a-f]{16} \\(fdatasync\\)(, [0-9a-f]{16} \\(fdatasync\\))*, [\\d,]+ acknowledged records\\) vanished without an end \\(its machine may have lost power\\) and was never verified; a new write would destroy the evidence\\nhint: run plugcheck verify --server ${listener.server.replace(/\./g, '\\.')} --file ${file.replace(/\./g, '\\.')} first, or pass --discard-unverified to write anyway\\n$`,
        ),
      )
      t.same(
        files(file).map((f) => readFileSync(f)),
        before,
        'every data file untouched',
      )
      t.equal((await runsAt(listener.server)).length, jobs, 'nothing announced')

      const verified = await runInProcess(['verify', '--server', listener.server, '--file', file])
      t.equal(verified.code, 0, `a killed writer keeps the page cache: pass (${verified.stderr})`)
      const judged = await runsAt(listener.server)
      t.ok(
        judged.every((r) => r.verdict?.verdict === 'pass'),
        'verify stored its verdict at the listener',
      )

      const written = await runCli([
        'write',
        '--server',
        listener.server,
        '--file',
        file,
        '--duration',
        '1',
        '--jobs',
        String(jobs),
        ...small,
      ])
      t.equal(written.code, 0, `verified: the next write goes ahead (${written.stderr})`)
      t.equal((await runsAt(listener.server)).length, 2 * jobs)
      // That run ended (duration): a write after it is not asked for anything.
      const again = await runCli([
        'write',
        '--server',
        listener.server,
        '--file',
        file,
        '--duration',
        '0.5',
        '--jobs',
        String(jobs),
        ...small,
      ])
      t.equal(again.code, 0, again.stderr)
    },
  )
}

t.test('--discard-unverified writes over a vanished, unverified run at once', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'data')
  await writeThenKill(listener.server, file, small, 200)
  await runsEnded(listener.server, file)
  const written = await runCli(['write', '--server', listener.server, '--file', file, '--duration', '1', '--discard-unverified', ...small])
  t.equal(written.code, 0, written.stderr)
  const runs = await runsAt(listener.server)
  t.equal(runs.length, 2)
  t.equal(runs[0]?.end?.reason, 'duration', 'the new run ran')
  t.equal(runs[1]?.verdict, null, 'the discarded run was never verified')
})
