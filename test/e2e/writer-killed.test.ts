/** A writer SIGKILLed mid-run: a process crash keeps the page cache, so every acked record must be intact. */
import t from 'tap'
import { join } from 'node:path'
import { runInProcess, startListener, tempDir, writeThenKill } from '../fixtures/cli.js'
import { runsEnded } from '../fixtures/runs-ended.js'

for (const pattern of ['append', 'overwrite'] as const) {
  t.test(`fdatasync ${pattern}: killed writer, every acked record intact`, async (t) => {
    const dir = tempDir(t)
    const listener = await startListener(join(dir, 'listener'))
    t.teardown(() => listener.kill())
    const file = join(dir, 'data.plugcheck')
    const completed = await writeThenKill(listener.server, file, ['--method', 'fdatasync', '--pattern', pattern, '--size', '16MiB'], 300)
    await runsEnded(listener.server, file) // its last acks and its end taken in (verify would judge a live run)

    const result = await runInProcess(['verify', '--server', listener.server, '--file', file, '--json'])
    t.equal(result.code, 0, result.stderr)
    const report = JSON.parse(result.stdout)
    const run = report.runs[0]
    t.equal(report.verdict, 'pass')
    t.equal(run.pattern, pattern)
    // The kill can land between the sync returning and the ack leaving: at most one completed sync unacked.
    t.ok(run.acked >= completed - 1 && run.acked <= completed, `listener holds ${run.acked} acks for ${completed} completed syncs`)
    t.equal(run.intact + run.superseded, run.acked)
    t.equal(run.lost + run.torn + run.corrupt, 0)
    if (pattern === 'overwrite') t.ok(run.superseded > 0, 'overwrite revisits slots')
  })
}
