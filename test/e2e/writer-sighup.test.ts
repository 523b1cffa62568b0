/**
 * SIGHUP (an SSH session dropped, a terminal closed) ends a writer as SIGTERM does: every run ends as
 * 'interrupted' at the listener, every ack is recorded, the summary is printed and the exit code is
 * 129 (128 + 1). Without a handler Node dies at once, and the listener then records the run as
 * 'vanished', exactly as a power cut: verify after a dropped SSH session would judge a cut that never was.
 */
import t from 'tap'
import { join } from 'node:path'
import { fileSize, runInProcess, spawnCli, startListener, tempDir, waitFor } from '../fixtures/cli.js'

for (const jobs of [1, 2]) {
  t.test(`write${jobs > 1 ? ` --jobs ${jobs}` : ''}: SIGHUP ends every run as interrupted, summary printed, exit 129`, async (t) => {
    const dir = tempDir(t)
    const listener = await startListener(join(dir, 'listener'))
    t.teardown(() => listener.kill())
    const file = join(dir, 'data')
    const runCount = jobs * 2
    const writer = spawnCli([
      'write',
      '--server',
      listener.server,
      '--file',
      file,
      '--method',
      'fdatasync,none',
      '--size',
      '16MiB',
      '--jobs',
      String(jobs),
    ])
    let stdout = ''
    let stderr = ''
    writer.stdout!.on('data', (c: Buffer) => (stdout += c.toString()))
    writer.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
    const exited = new Promise<number | null>((resolve) => writer.on('close', (c) => resolve(c)))
    t.teardown(() => writer.kill('SIGKILL'))
    await waitFor(
      `${runCount} run lines (${stderr})`,
      () => (stdout.match(/^run /gm)?.length ?? 0) >= runCount && /after a power cut/.test(stdout),
    )
    // Records flow in every file: the hang-up lands in the write loop, not during the start.
    const files =
      jobs === 1 ? [`${file}.fdatasync`, `${file}.none`] : [1, 2].flatMap((k) => [`${file}.fdatasync.job${k}`, `${file}.none.job${k}`])
    await waitFor('records in every data file', () => files.every((f) => fileSize(f) >= 8192 * 50))
    writer.kill('SIGHUP')
    t.equal(await exited, 129, stderr)
    t.match(stderr, /plugcheck: stopped by SIGHUP; every ack is recorded at the listener/)
    const counts = [
      ...stdout.matchAll(
        /([\d,]+) records (?:synced|written \(never synced: the negative control\)) and acknowledged, ([\d,]+) recorded by the listener/g,
      ),
    ]
    t.equal(counts.length, runCount, `a summary line per run:\n${stdout}`)
    for (const m of counts) t.equal(m[1], m[2], 'every ack recorded before exit')

    const listed = await runInProcess(['runs', '--server', listener.server, '--json'])
    t.equal(listed.code, 0, listed.stderr)
    const runs = JSON.parse(listed.stdout).runs as Array<{ runId: string; end?: { reason: string; detail?: string } }>
    t.equal(runs.length, runCount)
    for (const run of runs)
      t.match(run.end, { reason: 'interrupted', detail: 'stopped by SIGHUP' }, `run ${run.runId} ended as interrupted, not vanished`)

    const verified = await runInProcess(['verify', '--server', listener.server, '--file', file, '--json'])
    t.equal(verified.code, 4, `a control that lost nothing: inconclusive, judged (not refused): ${verified.stderr}`)
    const report = JSON.parse(verified.stdout) as { runs: Array<{ ended: string; lost: number; torn: number; corrupt: number }> }
    t.equal(report.runs.length, runCount)
    for (const run of report.runs) t.match(run, { ended: 'interrupted', lost: 0, torn: 0, corrupt: 0 })
  })
}
