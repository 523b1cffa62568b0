/**
 * A run verified after the cut: FAIL, stored at the listener. The path is written again (a new run),
 * and someone verifies the old run again (`verify --run OLD`): its file now holds the new run, so
 * nothing is judged (NOT JUDGED, superseded). That verify judged no record; its not-judged verdict
 * must not replace the run's stored FAIL, or `runs` and `report` stop showing a storage that lost 30
 * acknowledged records. Today the FAIL is replaced and the run is listed as not-judged.
 */
import t from 'tap'
import { closeSync, openSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, runInProcess, startListener, tempDir } from '../fixtures/cli.js'

t.test('a later NOT JUDGED (superseded) does not erase the stored FAIL of a run', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'data')
  const args = ['write', '--server', listener.server, '--file', file, '--size', '2MiB', '--record-size', '4096', '--duration', '1']
  const first = await runCli(args)
  t.equal(first.code, 0, first.stderr)
  const runId = /^run ([0-9a-f]{16}):/m.exec(first.stdout)![1]!
  const fd = openSync(file, 'r+')
  writeSync(fd, Buffer.alloc(30 * 4096), 0, 30 * 4096, 100 * 4096)
  closeSync(fd)
  const failed = await runInProcess(['verify', '--server', listener.server, '--file', file])
  t.equal(failed.code, 1, failed.stdout.split('\n')[0] ?? '')

  const listed = async () => {
    const runs = await runInProcess(['runs', '--server', listener.server, '--json'])
    return (JSON.parse(runs.stdout) as { runs: Array<{ runId: string; verdict: { verdict: string; lost: number } | null }> }).runs.find(
      (r) => r.runId === runId,
    )
  }
  t.match(await listed(), { verdict: { verdict: 'fail', lost: 30 } }, 'the FAIL is stored')

  const second = await runCli(args)
  t.equal(second.code, 0, second.stderr)
  const again = await runInProcess(['verify', '--server', listener.server, '--file', file, '--run', runId])
  t.match(again.stdout, /NOT JUDGED/, 'the old run is not judged: its file holds the new run')
  t.match(await listed(), { verdict: { verdict: 'fail', lost: 30 } }, 'the run still shows its FAIL')
})
