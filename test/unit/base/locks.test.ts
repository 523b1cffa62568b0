/**
 * holdExclusiveLock on real files: the first holder gets the lock, anyone else (another descriptor
 * of this process, another process, flock(1)) is refused with the caller's error until release() or
 * the holder's exit, however it exits (SIGKILL). A missing file is null without create, and a path
 * that is not a regular file (a directory, a FIFO someone put there) is an operating error, at once.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { once } from 'node:events'
import t, { type Test } from 'tap'
import { holdExclusiveLock } from '../../../src/base/locks.js'
import { PlugcheckError, usageError } from '../../../src/base/errors.js'

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'plugcheck-locks-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

const busy = usageError('the file is in use by another plugcheck')
const refuse = () => busy

/** flock(1) from util-linux: 0 when it could take the lock at once, 1 when the lock is held. */
function flockTry(path: string): number | null {
  return spawnSync('flock', ['--nonblock', '--conflict-exit-code', '1', path, 'true']).status
}

const childPath = new URL('../../fixtures/locks-child.ts', import.meta.url).pathname

t.test('the first holder gets the file’s lock; a second descriptor in this process is refused with the caller’s error', async (t) => {
  const path = join(tempDir(t), 'p.dat')
  writeFileSync(path, 'data')
  const lock = holdExclusiveLock(path, false, refuse)
  t.not(lock, null)
  t.equal(lock?.ino, statSync(path).ino, 'the lock is on this file')
  t.equal(lock?.dev, statSync(path).dev)
  t.throws(() => holdExclusiveLock(path, false, refuse), busy, 'the caller’s own error object')
  t.throws(() => holdExclusiveLock(path, true, refuse), busy)
  lock?.release()
  const again = holdExclusiveLock(path, false, refuse)
  t.not(again, null, 'free again after release')
  again?.release()
  again?.release()
  t.pass('a second release does nothing')
})

t.test('another process is refused while it is held, and gets it after release', async (t) => {
  const path = join(tempDir(t), 'listener.lock')
  const lock = holdExclusiveLock(path, true, refuse)
  t.ok(existsSync(path), 'created')
  t.equal(flockTry(path), 1, 'flock(1) finds it held')
  t.equal(
    execFileSync(process.execPath, ['--import', 'tsx', childPath, path], { encoding: 'utf8' }).trim(),
    'busy',
    'another plugcheck is refused',
  )
  lock?.release()
  t.equal(flockTry(path), 0, 'flock(1) takes it after release')
  t.equal(execFileSync(process.execPath, ['--import', 'tsx', childPath, path], { encoding: 'utf8' }).trim(), 'locked')
})

t.test('a holder killed with SIGKILL lets go of the lock', async (t) => {
  const path = join(tempDir(t), 'p.dat')
  const child = spawn(process.execPath, ['--import', 'tsx', childPath, path, 'hold'], { stdio: ['ignore', 'pipe', 'inherit'] })
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  const [first] = (await once(child.stdout, 'data')) as [Buffer]
  t.equal(first.toString().trim(), 'locked')
  t.throws(() => holdExclusiveLock(path, false, refuse), busy, 'held by the child')
  child.kill('SIGKILL')
  await once(child, 'exit')
  const lock = holdExclusiveLock(path, false, refuse)
  t.not(lock, null, 'ours once the child is gone')
  lock?.release()
})

t.test('a missing file is null without create, and is not created', async (t) => {
  const path = join(tempDir(t), 'none.dat')
  t.equal(holdExclusiveLock(path, false, refuse), null)
  t.notOk(existsSync(path))
})

t.test('create makes the file, empty, and a missing directory is an operating error', async (t) => {
  const dir = tempDir(t)
  const lock = holdExclusiveLock(join(dir, 'new.lock'), true, refuse)
  t.equal(statSync(join(dir, 'new.lock')).size, 0)
  lock?.release()
  const error = catchOf(() => holdExclusiveLock(join(dir, 'no', 'such.lock'), true, refuse))
  t.ok(error instanceof PlugcheckError)
  t.equal((error as PlugcheckError).exitCode, 3)
  t.match((error as PlugcheckError).message, new RegExp(`^could not lock ${join(dir, 'no', 'such.lock')}: ENOENT`))
})

t.test('not a regular file: a directory or a FIFO is refused at once, never waited on', async (t) => {
  const dir = tempDir(t)
  const sub = join(dir, 'a-dir')
  mkdirSync(sub)
  const fifo = join(dir, 'a-fifo')
  execFileSync('mkfifo', [fifo])
  t.throws(() => holdExclusiveLock(sub, true, refuse), { message: `could not lock ${sub}: EISDIR (is a directory)`, exitCode: 3 })
  for (const [path, create] of [
    [sub, false],
    [fifo, false],
    [fifo, true],
  ] as const) {
    const started = Date.now()
    const error = catchOf(() => holdExclusiveLock(path, create, refuse))
    t.ok(error instanceof PlugcheckError, `${path} create ${create}`)
    t.equal((error as PlugcheckError).exitCode, 3)
    t.equal((error as PlugcheckError).message, `could not lock ${path}: EINVAL (not a regular file)`)
    t.ok(Date.now() - started < 5000, 'at once')
  }
  t.equal(flockTry(join(dir, 'a-dir')), 0, 'and nothing was left locked')
})

/** What fn threw; a test failure when it threw nothing. */
function catchOf(fn: () => unknown): unknown {
  try {
    fn()
  } catch (error) {
    return error
  }
  throw new Error('expected a throw')
}
