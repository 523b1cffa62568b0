/**
 * `listen --retain AGE` prunes "ended runs older than AGE". The listener's wall clock is two days
 * behind (an RTC that lost its battery, a VM restored from a snapshot) while a run is written; a few
 * seconds after the run ends, NTP steps the clock to the right time. The next retention tick takes
 * the run's end stamp (two days "ago") for its age and prunes it: the run ended seconds before, and
 * the user, who has not yet cut the power, rebooted and verified, finds no run to judge. A run's age
 * for retention must not jump with the wall clock: a run ended within the last AGE, as the listener
 * measured it, is kept. (Passes come every 500 ms here, PLUGCHECK_TEST_RETAIN_TICK_MS, instead of every 6 s:
 * the age the run must not reach is still --retain's 60 s.)
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { existsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { binPath, runCli, tempDir, waitFor } from '../fixtures/cli.js'

const libfaketime = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1'
const stamp = (d: Date) => `@${d.toISOString().slice(0, 19).replace('T', ' ')}`

t.test('a wall clock stepped forward does not prune a run that ended seconds ago', async (t) => {
  t.ok(existsSync(libfaketime), `${libfaketime} is installed (apt-get install faketime)`)
  const dir = tempDir(t)
  const listenerDir = join(dir, 'listener')
  const clock = join(dir, 'clock')
  writeFileSync(clock, stamp(new Date(Date.now() - 2 * 86_400_000))) // two days behind
  const child = spawn(
    process.execPath,
    [binPath, 'listen', '--host', '127.0.0.1', '--port', '0', '--dir', listenerDir, '--retain', '60s'],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        LD_PRELOAD: libfaketime,
        FAKETIME_TIMESTAMP_FILE: clock,
        FAKETIME_NO_CACHE: '1',
        FAKETIME_DONT_FAKE_MONOTONIC: '1',
        // A pass every 500 ms, each saying when it is done: the test waits for passes, not for 6 s ticks.
        PLUGCHECK_TEST_RETAIN_TICK_MS: '500',
      },
    },
  )
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()))
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    await exited
  })
  let out = ''
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()))
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()))
  await waitFor('the listener', () => /listening on 127\.0\.0\.1:\d+/.test(out), 60_000)
  const server = `127.0.0.1:${/listening on 127\.0\.0\.1:(\d+)/.exec(out)![1]}`

  const file = join(dir, 'data')
  const written = await runCli(['write', '--server', server, '--file', file, '--size', '2MiB', '--record-size', '4096', '--duration', '2'])
  t.equal(written.code, 0, written.stderr)
  writeFileSync(clock, stamp(new Date())) // NTP steps the clock to the right time
  // Two whole passes that took their time after the step: pass M+1 may have read the clock before it,
  // so the ones counted are M+2 and M+3.
  const latest = Math.max(0, ...[...out.matchAll(/retention pass (\d+)/g)].map((m) => Number(m[1])))
  await waitFor('two retention passes after the step', () => new RegExp(`retention pass ${latest + 3} done`).test(out), 60_000, 50)

  const runs = await runCli(['runs', '--server', server, '--json'])
  t.equal(runs.code, 0, runs.stderr)
  t.equal((JSON.parse(runs.stdout) as { runs: unknown[] }).runs.length, 1, 'the run that ended seconds ago is still on record')
  t.notMatch(out, /pruned/, 'nothing was pruned')
  const verified = await runCli(['verify', '--server', server, '--file', file])
  t.equal(verified.code, 0, `verify judges the run (${(verified.stdout + verified.stderr).split('\n')[0]})`)
})
