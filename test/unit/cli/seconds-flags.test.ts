/**
 * Every flag that counts seconds (--duration, --listener-timeout, --secs, --kill-after,
 * --reboot-timeout, each end of --cut-after) takes a plain number of seconds or a number and a unit
 * (2s, 5m, 1h, 1d), run as a user runs it; a value that is neither says what is accepted (exit 2).
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { binPath, runCli, runInProcess, startListener, tempDir, waitFor } from '../../fixtures/cli.js'

const accepted = 'give seconds (10, 0.5) or a number and a unit (2s, 5m, 1h, 1d)'

t.test('a value that is not a duration is refused with what is accepted, exit 2, nothing written', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'data')
  const write = ['write', '--server', '127.0.0.1:1', '--file', file]
  const verify = ['verify', '--server', '127.0.0.1:1', '--file', file]
  const campaign = ['listen', '--dir', join(dir, 'listener'), '--campaign', 'c', '--cut-command', 'true']
  const cases: Array<[string[], string]> = [
    [[...write, '--duration', '2x'], `--duration 2x is not a duration: ${accepted}`],
    [[...write, '--duration', '2ms'], `--duration 2ms is not a duration: ${accepted}`],
    [[...write, '--duration', '1h30m'], `--duration 1h30m is not a duration: ${accepted}`],
    [[...write, '--duration', '0s'], '--duration must be positive'],
    [[...write, '--listener-timeout', 'soon'], `--listener-timeout soon is not a duration: ${accepted}`],
    [[...write, '--listener-timeout', '2h'], '--listener-timeout is at most 3600 seconds (2h is 7200 s)'],
    [[...verify, '--listener-timeout', '1w'], `--listener-timeout 1w is not a duration: ${accepted}`],
    [['runs', '--server', '127.0.0.1:1', '--listener-timeout', 'x'], `--listener-timeout x is not a duration: ${accepted}`],
    [['bench', '--file', dir, '--secs', 'soon'], `--secs soon is not a duration: ${accepted}`],
    [['bench', '--file', dir, '--secs', '2h'], '--secs is at most 3600 seconds per test (2h is 7200 s)'],
    [['demo', '--kill-after', '11m'], '--kill-after is at most 600 seconds (11m is 660 s)'],
    [['demo', '--kill-after', 'later'], `--kill-after later is not a duration: ${accepted}`],
    [[...campaign, '--cut-after', '30-90', '--reboot-timeout', '2d'], '--reboot-timeout is at most 86400 seconds (2d is 172800 s)'],
    [
      [...campaign, '--cut-after', '2m-1m'],
      '--cut-after 2m-1m: give MIN-MAX seconds after the writer is steady, e.g. 30-90 or 30s-2m (at most 86400 s, 1d)',
    ],
  ]
  for (const [args, message] of cases) {
    const result = await runInProcess(args)
    t.equal(result.code, 2, `${args.join(' ')}: exit 2`)
    t.equal(result.stderr, `plugcheck: ${message}\n`, `${args.join(' ')}: says what is accepted`)
    t.equal(result.stdout, '')
  }
  // An empty value is no value, refused before the flags are read, as `--duration` alone is (strict-flags.ts).
  const empty = await runInProcess([...write, '--duration='])
  t.equal(empty.code, 2, '--duration=: exit 2')
  t.equal(
    empty.stderr,
    'plugcheck: --duration needs a value\nhint: plugcheck write --help lists the flags of write\n',
    '--duration=: needs a value',
  )
  t.notOk(existsSync(file), 'no data file')
  t.notOk(existsSync(join(dir, 'listener')), 'no listener directory')
})

t.test('write --duration 0.02m runs 1.2 s, with --listener-timeout 1m', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const startedMs = performance.now()
  const args = ['write', '--server', listener.server, '--file', join(dir, 'data'), '--size', '4MiB', '--duration', '0.02m']
  const result = await runCli([...args, '--listener-timeout', '1m'])
  const elapsedMs = performance.now() - startedMs
  t.equal(result.code, 0, result.stderr)
  t.match(result.stdout, /records synced/, 'the summary of a finished run')
  t.ok(elapsedMs >= 1200, `ran at least 1.2 s (${Math.round(elapsedMs)} ms)`)
  t.ok(elapsedMs < 30_000, 'and ended by its duration, not by the test')
})

t.test('bench --secs 0.001m measures 0.06 s per test', async (t) => {
  const dir = tempDir(t)
  const result = await runCli(['bench', '--file', dir, '--secs', '0.001m', '--json'], 120_000)
  t.equal(result.code, 0, result.stderr)
  t.equal(JSON.parse(result.stdout).secsPerTest, 0.06)
})

t.test('listen --cut-after 30s-2m --reboot-timeout 10m: the campaign stores 30-120 s and 600 s', async (t) => {
  const dir = tempDir(t)
  const args = ['listen', '--host', '127.0.0.1', '--port', '0', '--dir', dir, '--campaign', 'c', '--cut-command', 'true']
  const child = spawn(process.execPath, [binPath, ...args, '--cut-after', '30s-2m', '--reboot-timeout', '10m'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const exited = new Promise((resolve) => child.on('exit', resolve))
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    await exited
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  // The campaign's log is the listener's events, on stderr.
  await waitFor('the campaign to start', () => /campaign c: started/.test(stderr) || child.exitCode !== null, 60_000)
  t.match(stderr, /campaign c: started: 10 cycles, cut 30-120 s after the writer is steady \(seed \d+\), reboot timeout 600 s,/, stdout)
})
