/**
 * What an attack on the writer found, each pinned: a reader that goes away (`write ... | head -1`)
 * must not end or crash the run, and a server that waits silently for its own protocol's request is
 * named as possibly not a listener.
 */
import t from 'tap'
import { execFileSync, spawnSync } from 'node:child_process'
import { mkdirSync, readFileSync, readdirSync, rmSync, truncateSync } from 'node:fs'
import { createServer, type Socket } from 'node:net'
import { join } from 'node:path'
import { binPath, runCli, spawnCli, startListener, tempDir } from '../fixtures/cli.js'

t.test('write | head -1: the run goes on to its end and verifies', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'data')
  const writer = spawnCli(['write', '--server', listener.server, '--file', file, '--size', '4MiB', '--duration', '2'])
  let stderr = ''
  writer.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
  // Like head -1: read the first chunk, then close the pipe.
  await new Promise<void>((resolve) => writer.stdout!.once('data', () => resolve()))
  writer.stdout!.destroy()
  const code = await new Promise<number>((resolve) => writer.on('close', (c) => resolve(c ?? -1)))
  t.equal(code, 0, 'exit 0: the run is the job, the trail is not')
  t.notMatch(stderr, /EPIPE|internal error|\n\s+at /)
  const verify = await runCli(['verify', '--server', listener.server, '--file', file])
  t.equal(verify.code, 0)
})

t.test('a server that waits silently is named as possibly not a listener', async (t) => {
  const held = new Set<Socket>()
  const silent = createServer((socket) => void held.add(socket.on('error', () => undefined)))
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    for (const socket of held) socket.destroy()
    return new Promise((resolve) => silent.close(resolve))
  })
  const server = `127.0.0.1:${(silent.address() as { port: number }).port}`
  const file = join(tempDir(t), 'data')
  const write = await runCli(['write', '--server', server, '--file', file, '--listener-timeout', '0.5'])
  t.equal(write.code, 3)
  t.match(write.stderr, /did not answer within 0\.5 s\nhint: a plugcheck listener answers at once/)
  const verify = await runCli(['verify', '--server', server, '--file', file, '--listener-timeout', '0.5'])
  t.equal(verify.code, 3)
  t.match(verify.stderr, /hint: a plugcheck listener answers at once/)
})

/** Mounting a file system (ramfs, a read-only tmpfs) needs root: run the suite as root, as CI does (never skipped). */
const needsRoot = (t: { fail(message: string): void }, what: string): boolean => {
  if (process.getuid?.() === 0) return false
  t.fail(`needs root to mount ${what}: run npm test as root`)
  return true
}

t.test('--direct refused by the file system costs nothing: the previous data file stays', async (t) => {
  if (needsRoot(t, 'a ramfs (which refuses O_DIRECT)')) return
  const dir = tempDir(t)
  const mnt = join(dir, 'ramfs')
  mkdirSync(mnt)
  execFileSync('mount', ['-t', 'ramfs', 'ramfs', mnt])
  t.teardown(() => execFileSync('umount', ['-l', mnt]))
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(mnt, 'data')
  const first = await runCli(['write', '--server', listener.server, '--file', file, '--size', '1MiB', '--duration', '0.5'])
  t.equal(first.code, 0)
  const before = readFileSync(file)
  const direct = await runCli([
    'write',
    '--server',
    listener.server,
    '--file',
    file,
    '--size',
    '1MiB',
    '--duration',
    '0.5',
    '--direct',
    '--record-size',
    '4096',
  ])
  t.equal(direct.code, 2)
  t.match(direct.stderr, /--direct is not supported in .*ramfs: the file system refused direct I\/O \(O_DIRECT\)/)
  t.ok(readFileSync(file).equals(before), 'the previous data file is untouched')
  t.same(readdirSync(mnt), ['data'], 'no probe or temp file left behind')
  t.equal((await runCli(['verify', '--server', listener.server, '--file', file])).code, 0, 'and the previous run still verifies')
})

t.test('the printed verify command can be pasted as it is; tmpfs is called out', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'), ['--token', 'sesame'])
  t.teardown(() => listener.kill())
  const odd = join('/dev/shm', `plugcheck test it's $(echo x) ${process.pid}`)
  mkdirSync(odd, { recursive: true })
  t.teardown(() => rmSync(odd, { recursive: true, force: true }))
  const file = join(odd, 'data')
  const write = await runCli([
    'write',
    '--server',
    listener.server,
    '--file',
    file,
    '--size',
    '1MiB',
    '--duration',
    '0.5',
    '--token',
    'sesame',
  ])
  t.equal(write.code, 0)
  t.match(write.stderr, /warning: .* is on tmpfs, in memory: nothing there survives a power cut/)
  const printed = /after a power cut and reboot: (plugcheck verify .*)/.exec(write.stdout)![1]!
  t.notMatch(printed, /sesame/, 'the token itself is never printed')
  const pasted = printed.replace(/^plugcheck /, `${process.execPath} ${binPath} `).replace("'YOUR-TOKEN'", 'sesame')
  const verify = spawnSync('sh', ['-c', pasted], { encoding: 'utf8' })
  t.equal(verify.status, 0, `the printed command, pasted into a shell, verifies: ${verify.stderr}`)
})

t.test('a later write that fails to start (read-only file system) does not hide the run the file holds', async (t) => {
  if (needsRoot(t, 'a tmpfs and remount it read-only')) return
  const dir = tempDir(t)
  const mnt = join(dir, 'fs')
  mkdirSync(mnt)
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=16m', 'plugcheck-ro', mnt])
  t.teardown(() => execFileSync('umount', ['-l', mnt]))
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(mnt, 'data')
  t.equal((await runCli(['write', '--server', listener.server, '--file', file, '--size', '1MiB', '--duration', '0.5'])).code, 0)
  truncateSync(file, 8192 * 3) // the cut lost all but the first two records: a real loss
  execFileSync('mount', ['-o', 'remount,ro', mnt])
  const failed = await runCli(['write', '--server', listener.server, '--file', file, '--size', '1MiB', '--duration', '0.5'])
  t.equal(failed.code, 3)
  t.match(failed.stderr, /EROFS/)
  const verify = await runCli(['verify', '--server', listener.server, '--file', file])
  t.equal(verify.code, 1, 'the earlier run is judged and its loss reported')
  t.match(verify.stdout, /note: the latest run \(\w+\) stopped before its first record \(could not start: .*EROFS/)
})
