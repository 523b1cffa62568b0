/** Every bad input gets one line naming the problem and the exit code docs/exit-codes.md gives it, and harms nothing. */
import t from 'tap'
import { createServer } from 'node:net'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, runInProcess, startListener, tempDir } from '../../fixtures/cli.js'

async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as { port: number }).port
  await new Promise((resolve) => server.close(resolve))
  return port
}

t.test('usage errors exit 2 with one line, before anything is written', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'data')
  const port = await freePort() // nothing listens: usage must be refused before the network is tried
  const server = `127.0.0.1:${port}`
  const cases: Array<[string, string[], RegExp]> = [
    ['unknown method', ['--method', 'fsink'], /unknown method fsink \(did you mean fsync\?\) \(known: fsync, fdatasync/],
    ['unknown method, none close', ['--method', 'qwerty'], /unknown method qwerty \(known: fsync, fdatasync/],
    [
      'a method this platform lacks',
      ['--method', 'fsync_writethrough'],
      /method fsync_writethrough is not available here: Linux has no write-through flush call/,
    ],
    ['record size not a multiple of 512', ['--record-size', '1000'], /--record-size 1000 is not a multiple of 512/],
    [
      'record size not a multiple of 4096 with --direct',
      ['--direct', '--record-size', '6k'],
      /--record-size 6144 is not a multiple of 4096 \(needed with --direct\)/,
    ],
    ['a size that is not a size', ['--size', 'lots'], /--size lots is not a size/],
    ['a bad --server', ['--server', 'host:99999'], /port must be 1-65535/],
    ['a bad pattern', ['--pattern', 'sideways'], /Invalid values|sideways/],
    ['an unknown flag', ['--colour', 'blue'], /^plugcheck: unknown flag --colour$/m],
    ['a zero --listener-timeout', ['--listener-timeout', '0'], /--listener-timeout must be positive/],
    [
      'a --listener-timeout that is not a number',
      ['--listener-timeout', 'soon'],
      /--listener-timeout soon is not a duration: give seconds \(10, 0\.5\) or a number and a unit \(2s, 5m, 1h, 1d\)/,
    ],
  ]
  for (const [name, extra, message] of cases) {
    // A case's own --server stands for the good one: a flag is given once.
    const args = ['write', ...(extra.includes('--server') ? [] : ['--server', server]), '--file', file, '--duration', '1', ...extra]
    const result = await runInProcess(args)
    t.equal(result.code, 2, `${name}: exit 2`)
    t.match(result.stderr, message, `${name}: names the problem`)
    t.equal(result.stderr.split('\n').filter((l) => l.startsWith('plugcheck:')).length, 1, `${name}: one line`)
    t.notOk(existsSync(file), `${name}: nothing written`)
  }
  const forced = await runInProcess(['write', '--server', server, '--file', file, '--method', 'open_sync'])
  t.equal(forced.code, 3, 'a valid command with no listener is a runtime failure')
  t.match(forced.stderr, /could not reach the listener at 127\.0\.0\.1:\d+: ECONNREFUSED \(connection refused\)/)
  t.notOk(existsSync(file), 'nothing written when the listener is unreachable')
})

t.test('methods forced unavailable are refused with the reason', async (t) => {
  const result = await runCli(
    ['write', '--server', '127.0.0.1:1', '--file', join(tempDir(t), 'x'), '--method', 'fdatasync,open_sync'],
    30_000,
  )
  t.equal(result.code, 3, 'sanity: without the variable this only fails on the network')
  const previous = process.env.PLUGCHECK_DISABLE_METHODS
  process.env.PLUGCHECK_DISABLE_METHODS = 'open_sync'
  t.teardown(() => {
    if (previous === undefined) delete process.env.PLUGCHECK_DISABLE_METHODS
    else process.env.PLUGCHECK_DISABLE_METHODS = previous
  })
  const refused = await runInProcess([
    'write',
    '--server',
    '127.0.0.1:1',
    '--file',
    join(tempDir(t), 'x'),
    '--method',
    'fdatasync,open_sync',
  ])
  t.equal(refused.code, 2)
  t.match(refused.stderr, /method open_sync is not available here: open_sync is disabled by PLUGCHECK_DISABLE_METHODS/)
})

t.test("a path that is not plugcheck's is never overwritten without --force", async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const precious = join(dir, 'precious.db')
  writeFileSync(precious, "the user's data\n")
  const refused = await runInProcess(['write', '--server', listener.server, '--file', precious, '--duration', '0.2'])
  t.equal(refused.code, 2)
  t.match(refused.stderr, /refusing to overwrite .*precious\.db: it is not a plugcheck data file/)
  t.match(refused.stderr, /hint: choose another --file, or pass --force/)
  t.equal(readFileSync(precious, 'utf8'), "the user's data\n", 'untouched')

  const device = await runInProcess(['write', '--server', listener.server, '--file', '/dev/null', '--force', '--duration', '0.2'])
  t.equal(device.code, 2)
  t.match(device.stderr, /refusing to write to \/dev\/null: it is a device/)
  const directory = await runInProcess(['write', '--server', listener.server, '--file', dir, '--duration', '0.2'])
  t.equal(directory.code, 2)
  t.match(directory.stderr, /it is a directory/)

  // A plugcheck data file may be replaced: the second run on the same path is accepted.
  const file = join(dir, 'data')
  t.equal((await runCli(['write', '--server', listener.server, '--file', file, '--duration', '0.3', '--size', '8MiB'])).code, 0)
  const again = await runCli(['write', '--server', listener.server, '--file', file, '--duration', '0.3', '--size', '8MiB'])
  t.equal(again.code, 0, again.stderr)
  const forced = await runCli(['write', '--server', listener.server, '--file', precious, '--force', '--duration', '0.3', '--size', '8MiB'])
  t.equal(forced.code, 0, '--force replaces it')
})

t.test('verify: no run at all is exit 2; an unreachable listener is exit 3', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const none = await runInProcess(['verify', '--server', listener.server, '--file', join(dir, 'never-written')])
  t.equal(none.code, 2)
  t.match(none.stderr, /no run found for .*never-written written from host/)
  const noRun = await runInProcess(['verify', '--server', listener.server, '--file', join(dir, 'x'), '--run', '0123456789abcdef'])
  t.equal(noRun.code, 2)
  t.match(noRun.stderr, /no run 0123456789abcdef at the listener/)
  const badRun = await runInProcess(['verify', '--server', listener.server, '--file', join(dir, 'x'), '--run', 'xyz'])
  t.equal(badRun.code, 2)
  t.match(badRun.stderr, /a run id is 16 lower-case hex digits/)
  const both = await runInProcess(['verify', '--server', listener.server, '--acks', dir, '--file', 'x'])
  t.equal(both.code, 2)
  t.match(both.stderr, /exactly one of --server/)
  const noDir = await runInProcess(['verify', '--acks', join(dir, 'nope'), '--file', 'x'])
  t.equal(noDir.code, 2)
  t.match(noDir.stderr, /could not read the ack directory .*nope: ENOENT/)
  const unreachable = await runInProcess(['verify', '--server', `127.0.0.1:${await freePort()}`, '--file', 'x'])
  t.equal(unreachable.code, 3)
  t.match(unreachable.stderr, /could not reach the listener at 127\.0\.0\.1:\d+: ECONNREFUSED/)
  const noCommand = await runInProcess([])
  t.equal(noCommand.code, 2)
  t.match(noCommand.stderr, /give a command/)
})
