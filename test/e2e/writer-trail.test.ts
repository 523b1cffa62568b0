/**
 * The writer always leaves a trail: without a TTY its run lines reach stdout before a SIGKILL, and a
 * SIGTERM or SIGINT ends the run as 'interrupted' at the listener, with the summary printed.
 */
import t from 'tap'
import { join } from 'node:path'
import { fileSize, runInProcess, spawnCli, startListener, tempDir, waitFor } from '../fixtures/cli.js'

t.test('without a TTY, the run line and verify command are out before a SIGKILL', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'data')
  const trace = `${file}.trace`
  const writer = spawnCli(['write', '--server', listener.server, '--file', file, '--size', '16MiB', '--trace-file', trace])
  let stdout = ''
  writer.stdout!.on('data', (c: Buffer) => (stdout += c.toString()))
  const closed = new Promise<void>((resolve) => writer.on('close', () => resolve()))
  t.teardown(() => writer.kill('SIGKILL'))
  // Kill as soon as records flow: the loop then has never yielded long enough for an async stdout write.
  await waitFor('the first synced records', () => fileSize(trace) >= 24 * 10)
  writer.kill('SIGKILL')
  await closed
  t.match(stdout, new RegExp(`^run [0-9a-f]{16}: fdatasync, append, ${file.replace(/[.]/g, '\\.')}$`, 'm'))
  t.match(
    stdout,
    new RegExp(
      `^after a power cut and reboot: plugcheck verify --server ${listener.server.replace(/[.]/g, '\\.')} --file ${file.replace(/[.]/g, '\\.')}$`,
      'm',
    ),
  )
})

for (const [signal, code] of [
  ['SIGTERM', 143],
  ['SIGINT', 130],
] as const) {
  t.test(`${signal}: the run ends as interrupted, every ack recorded, summary printed, exit ${code}`, async (t) => {
    const dir = tempDir(t)
    const listener = await startListener(join(dir, 'listener'))
    t.teardown(() => listener.kill())
    const file = join(dir, 'data')
    const trace = `${file}.trace`
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
      '--trace-file',
      trace,
    ])
    let stdout = ''
    let stderr = ''
    writer.stdout!.on('data', (c: Buffer) => (stdout += c.toString()))
    writer.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
    const exited = new Promise<number | null>((resolve) => writer.on('close', (c) => resolve(c)))
    t.teardown(() => writer.kill('SIGKILL'))
    await waitFor('200 synced records', () => fileSize(trace) >= 24 * 200)
    writer.kill(signal)
    t.equal(await exited, code, stderr)
    t.match(stderr, new RegExp(`plugcheck: stopped by ${signal}; every ack is recorded at the listener`))
    const runIds = [...stdout.matchAll(/^run ([0-9a-f]{16}):/gm)].map((m) => m[1])
    t.equal(new Set(runIds).size, 2, 'both runs named')
    const counts = [
      ...stdout.matchAll(
        /([\d,]+) records (?:synced|written \(never synced: the negative control\)) and acknowledged, ([\d,]+) recorded by the listener/g,
      ),
    ]
    t.equal(counts.length, 2, `a summary line per run:\n${stdout}`)
    for (const m of counts) t.equal(m[1], m[2], 'every ack recorded before exit')
    t.match(stdout, /\nto check it now: plugcheck verify --server .* --file .*data\n$/, 'stopped by a signal, not cut: check it now')

    const verified = await runInProcess(['verify', '--server', listener.server, '--file', file, '--json'])
    t.ok(verified.stdout.startsWith('{'), verified.stderr)
    const runs = JSON.parse(verified.stdout).runs as Array<{
      runId: string
      method: string
      ended: string
      lost: number
      torn: number
      corrupt: number
    }>
    t.same(runs.map((r) => r.runId).sort(), [...new Set(runIds)].sort(), 'verify judges both runs')
    for (const run of runs) {
      t.equal(run.ended, 'interrupted', `${run.method}: the listener holds end 'interrupted'`)
      t.equal(run.lost + run.torn + run.corrupt, 0, `${run.method}: intact`)
    }
  })
}
