/**
 * The listener's wall clock steps back to 1970 while a run is being written (a VM restored, an RTC
 * that lost its battery read again): acks are stamped from the run's announcement plus monotonic
 * time, but the run's steady and end items are stamped with the raw wall clock, and the listener
 * logs times that its own replay refuses (before 2000). Its next start, and verify --acks, then
 * call the honest log damaged ("matches its checksum but is not an ack log entry (field e.0.atMs")
 * and refuse the whole directory (exit 3). A wall clock step must never change a verdict: the run
 * replays and is judged (PASS, its file intact).
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { existsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Listener } from '../../src/server/listen/listener.js'
import { binPath, runCli, runInProcess, tempDir, waitFor } from '../fixtures/cli.js'

const libfaketime = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1'
const stamp = (d: Date) => `@${d.toISOString().slice(0, 19).replace('T', ' ')}`

// libfaketime is a test dependency (.ci/run installs faketime): without it the test fails, it never skips.
t.test("a listener whose clock steps to 1970 mid-run can still read the run's log back", async (t) => {
  t.ok(existsSync(libfaketime), `${libfaketime} is installed (apt-get install faketime)`)
  const dir = tempDir(t)
  const listenerDir = join(dir, 'listener')
  const clock = join(dir, 'clock')
  writeFileSync(clock, stamp(new Date()))
  const child = spawn(process.execPath, [binPath, 'listen', '--host', '127.0.0.1', '--port', '0', '--dir', listenerDir], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      LD_PRELOAD: libfaketime,
      FAKETIME_TIMESTAMP_FILE: clock,
      FAKETIME_NO_CACHE: '1',
      FAKETIME_DONT_FAKE_MONOTONIC: '1',
    },
  })
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
  const writing = runCli(['write', '--server', server, '--file', file, '--size', '2MiB', '--record-size', '4096', '--duration', '4'])
  await waitFor('the run announced', () => /announced by/.test(out), 30_000)
  await new Promise((resolve) => setTimeout(resolve, 1500))
  writeFileSync(clock, '@1970-01-01 00:00:10') // the listener's clock steps back
  const written = await writing
  t.equal(written.code, 0, `the write completes (${written.stderr.trim().split('\n').at(-1)})`)
  child.kill('SIGTERM')
  await exited

  const offline = await runInProcess(['verify', '--acks', listenerDir, '--file', file])
  t.equal(offline.code, 0, `verify --acks judges the run: PASS (${offline.stderr.split('\n')[0]})`)
  t.notMatch(offline.stderr, /damaged/)
  const restarted = await Listener.start({ host: '127.0.0.1', port: 0, dir: listenerDir }).catch((error: Error) => error)
  t.notOk(
    restarted instanceof Error,
    `the listener starts again on its directory (${restarted instanceof Error ? restarted.message.split('\n')[0] : ''})`,
  )
  if (!(restarted instanceof Error)) await restarted.close()
})
