/**
 * The listener's disk fills up mid-run (ENOSPC): its ack log gets a short write, the writer is told
 * and stops (exit 3). The operator frees space and verifies the run through the listener, which stores
 * the verdict. Then the listener is killed (or its machine reboots) and started again on the same
 * directory. An honest disk-full is no damage: the listener must start, list the run, and verify must
 * judge it again. Today the listener counted the ack whose commit failed (in memory, and in the stored
 * verdict), and at restart refuses to start at all: "recorded acks are missing from the log".
 */
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { mkdirSync, rmSync, statfsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, startListener, tempDir } from '../fixtures/cli.js'

t.test('a listener whose disk filled mid-run starts again after a verdict', async (t) => {
  const dir = tempDir(t)
  const mnt = join(dir, 'm')
  mkdirSync(mnt)
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=3m', 'tmpfs', mnt])
  t.teardown(() => execFileSync('umount', ['-l', mnt]))
  const store = join(mnt, 'ld')
  // No free-space reserve: the disk fills while the run records (a reserve would refuse the run at its
  // announcement instead, once the listener's statfs saw the filler: that is its own test, quotas.test.ts).
  const noReserve = ['--reserve', '0']
  let listener = await startListener(store, noReserve)
  t.teardown(() => listener.kill())
  // Leave about 60 KiB free.
  const fs = statfsSync(mnt)
  const free = fs.bavail * fs.bsize
  writeFileSync(join(mnt, 'filler'), Buffer.alloc(free - 60 * 1024))

  const file = join(dir, 'p.dat')
  const write = await runCli(['write', '--server', listener.server, '--file', file, '--method', 'fdatasync', '--duration', '10'])
  t.equal(write.code, 3, `the writer stops: the listener could not record (${write.stderr.trim()})`)
  t.match(write.stderr, /disk full|ENOSPC|no space/i)

  rmSync(join(mnt, 'filler'))
  const first = await runCli(['verify', '--server', listener.server, '--file', file])
  t.equal(first.code, 0, `the run is judged (${first.stdout}${first.stderr})`)

  await listener.kill('SIGKILL')
  let started = true
  try {
    listener = await startListener(store, noReserve)
  } catch (error) {
    started = false
    t.fail(`the listener starts again on its directory: ${(error as Error).message}`)
  }
  if (!started) return
  const runs = await runCli(['runs', '--server', listener.server])
  t.equal(runs.code, 0, runs.stderr)
  const again = await runCli(['verify', '--server', listener.server, '--file', file])
  t.equal(again.code, 0, `judged again after the restart (${again.stdout}${again.stderr})`)
})
