/**
 * A signal that stops a write (SIGINT from Ctrl-C, SIGHUP from a dropped SSH session) ends its runs
 * as 'interrupted', prints the summary and exits 128 + the signal (writer-sighup.test.ts): otherwise
 * the listener records the run as 'vanished', exactly as a power cut, and verify judges a cut that
 * never was. An overwrite run's data file is filled with zeros after the run is announced and before
 * the loop installs its signal handlers (writer.ts writeLoop); for a large file that takes seconds
 * (the fill progress says "preparing ...: 2 GiB, filling it with zeros"), a moment the user may well
 * stop it. A signal there kills the writer at once: no summary, no "stopped by" line, the
 * "preparing" line left unterminated, and the listener records the run as vanished; verify then says
 * "INCONCLUSIVE ... nothing was acknowledged, so the cut tested nothing" (exit 4).
 *
 * The writer is started through `env -u NODE_OPTIONS`: tap's process-info hook puts its --import in
 * every child's NODE_OPTIONS, and that import's signal handlers (signal-exit) catch the signal a plain
 * `plugcheck write` dies of, hiding the bug.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { binPath, runCli, startListener, tempDir, waitFor } from '../fixtures/cli.js'

for (const signal of ['SIGINT', 'SIGHUP'] as const) {
  t.test(`${signal} while an overwrite file is filled: the run ends as interrupted, not as a cut`, async (t) => {
    const dir = tempDir(t)
    const listener = await startListener(join(dir, 'listener'))
    t.teardown(() => listener.kill())
    const file = join(dir, 'big.dat')
    const args = [
      'write',
      '--server',
      listener.server,
      '--file',
      file,
      '--method',
      'fdatasync',
      '--pattern',
      'overwrite',
      '--size',
      '2GiB',
      '--duration',
      '5',
    ]
    const writer = spawn('/usr/bin/env', ['-u', 'NODE_OPTIONS', process.execPath, binPath, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    writer.stdout.on('data', (c: Buffer) => (stdout += c.toString()))
    writer.stderr.on('data', (c: Buffer) => (stderr += c.toString()))
    const exited = new Promise<number | string | null>((resolve) => writer.on('close', (code, sig) => resolve(code ?? sig)))
    t.teardown(() => writer.kill('SIGKILL'))
    await waitFor(`the fill starts (${stderr})`, () => /preparing .*filling it with zeros/.test(stderr), 30_000)
    await new Promise((resolve) => setTimeout(resolve, 300))
    t.notMatch(stderr, /done in/, 'the fill is still going when the signal comes')
    writer.kill(signal)
    const code = await exited
    const expected = signal === 'SIGINT' ? 130 : 129
    t.equal(code, expected, `exit ${expected} (${stderr.trim()})`)
    t.match(stderr, new RegExp(`stopped by ${signal}`), 'says the write was stopped by the signal')
    t.match(stdout, /^ {2}[\d,]+ records synced and acknowledged/m, `the summary is printed (${stdout.trim()})`)

    const runs = await runCli(['runs', '--server', listener.server, '--json'])
    const listed = (JSON.parse(runs.stdout) as { runs: Array<{ path: string; end?: { reason: string } }> }).runs
    const run = listed.find((r) => r.path === file)
    t.ok(run, 'the run is at the listener')
    t.equal(run?.end?.reason, 'interrupted', `the listener records the run as interrupted, not vanished (${JSON.stringify(run?.end)})`)
  })
}
