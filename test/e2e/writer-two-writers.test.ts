/**
 * Two writers on one file: the second is refused (exit 2, naming the path) while the first runs on
 * undisturbed and verifies. Before the lock, the second replaced the file and verify blamed the storage.
 */
import t from 'tap'
import { join } from 'node:path'
import { runCli, runInProcess, spawnCli, startListener, tempDir, waitFor } from '../fixtures/cli.js'

t.test("a second write on a live run's file is refused; the first run verifies", async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'data.plugcheck')
  // A file from an earlier run is on the path, so the first writer's lock exists before it announces.
  t.equal((await runCli(['write', '--server', listener.server, '--file', file, '--duration', '0.2', '--size', '16MiB'])).code, 0)

  // It runs until it is stopped (below): however slow the second writer's start, it meets a live lock.
  const first = spawnCli(['write', '--server', listener.server, '--file', file, '--duration', '600', '--size', '16MiB'])
  let firstOut = ''
  let firstErr = ''
  first.stdout!.on('data', (c: Buffer) => (firstOut += c.toString()))
  first.stderr!.on('data', (c: Buffer) => (firstErr += c.toString()))
  const firstExit = new Promise<number | null>((resolve) => first.on('close', (code) => resolve(code)))
  t.teardown(() => first.kill('SIGKILL'))
  await waitFor(`the first writer's start lines (stderr: ${firstErr})`, () => /after a power cut and reboot/.test(firstOut))
  const runId = /^run ([0-9a-f]{16}):/m.exec(firstOut)![1]!

  const second = await runCli(['write', '--server', listener.server, '--file', file, '--duration', '1', '--size', '16MiB'], 30_000)
  t.equal(second.code, 2, second.stderr)
  t.match(
    second.stderr,
    new RegExp(`plugcheck: refusing to write to ${file.replace(/[.]/g, '\\.')}: another plugcheck write is running on it`),
  )
  t.notMatch(second.stdout, /^run /m, 'the second writer announced nothing')

  first.kill('SIGINT')
  t.equal(await firstExit, 130, `the first writer ran on until it was stopped (${firstErr})`)
  const verified = await runInProcess(['verify', '--server', listener.server, '--file', file, '--json'])
  t.equal(verified.code, 0, verified.stderr)
  const report = JSON.parse(verified.stdout)
  t.equal(report.runs[0].runId, runId, "verify judges the first writer's run")
  t.equal(report.runs[0].lost + report.runs[0].torn + report.runs[0].corrupt, 0)
  t.ok(report.runs[0].acked > 0)

  // Once the first writer has exited the lock is gone: a new run on the path is accepted.
  const after = await runCli(['write', '--server', listener.server, '--file', file, '--duration', '0.2', '--size', '16MiB'], 30_000)
  t.equal(after.code, 0, after.stderr)
})

t.test('a second writer that finds no file yet is refused by the lock on the new file', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'fresh.plugcheck')
  // The first writer runs until it is stopped (below), so however slow the second one's start is on a
  // loaded machine, it meets a live lock.
  const first = spawnCli(['write', '--server', listener.server, '--file', file, '--duration', '600', '--size', '16MiB', '--method', 'none'])
  let firstOut = ''
  first.stdout!.on('data', (c: Buffer) => (firstOut += c.toString()))
  const firstExit = new Promise<number | null>((resolve) => first.on('close', (code) => resolve(code)))
  t.teardown(() => first.kill('SIGKILL'))
  await waitFor("the first writer's start lines", () => /after a power cut and reboot/.test(firstOut))
  const second = await runCli(
    ['write', '--server', listener.server, '--file', file, '--duration', '1', '--size', '16MiB', '--method', 'none'],
    30_000,
  )
  t.equal(second.code, 2, second.stderr)
  t.match(second.stderr, /another plugcheck write is running on it/)
  first.kill('SIGINT')
  t.equal(await firstExit, 130, 'the first writer ran on until it was stopped')
})
