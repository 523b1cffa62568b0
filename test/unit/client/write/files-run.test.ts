/**
 * A files run's directory (files-run.ts) over real directories: which paths are refused (exit 2) with
 * nothing touched, what an earlier run's directory loses (only plugcheck's names), the superblock made
 * durable and locked, and the lock that refuses a second writer.
 */
import t from 'tap'
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { tempDir, waitFor } from '../../../fixtures/cli.js'
import { craftMeta } from '../../../fixtures/crafted-run.js'
import { checkRunDirectory, createRunDirectory, lockedFileOf } from '../../../../src/client/write/files-run.js'
import { decodeSuperblock, encodeSuperblock, type RunMeta } from '../../../../src/record/format.js'
import { nativePort } from '../../../../src/native/index.js'
import { PlugcheckError } from '../../../../src/base/errors.js'

const filesMeta = (path: string, runId: string, over: Partial<RunMeta> = {}): RunMeta =>
  craftMeta(runId, path, { pattern: 'files', files: { dirSync: true, publish: 'rename' }, slotCount: 10, ...over })

const usage = (message: RegExp) => ({ constructor: PlugcheckError, exitCode: 2, message })

/** A directory as an earlier files run leaves it: its superblock and record files, a temporary one, a superblock's temporary name. */
function earlierRun(path: string, runId = 'aaaaaaaaaaaaaaaa'): void {
  mkdirSync(path)
  writeFileSync(join(path, 'superblock'), encodeSuperblock(filesMeta(path, runId)))
  for (const name of ['rec-1', 'rec-2', '.rec-3.tmp', '.superblock.plugcheck-bbbbbbbbbbbbbbbb.tmp']) writeFileSync(join(path, name), name)
}

t.test('the lock is on the data file, or on a files run superblock', async (t) => {
  t.equal(lockedFileOf('append', '/d/p.dat'), '/d/p.dat')
  t.equal(lockedFileOf('overwrite', '/d/p.dat'), '/d/p.dat')
  t.equal(lockedFileOf('files', '/d/run'), join('/d/run', 'superblock'))
})

t.test('what a files run may use: nothing there, an empty directory, an earlier files run', async (t) => {
  const base = tempDir(t)
  t.equal(checkRunDirectory(join(base, 'missing'), false), false)
  mkdirSync(join(base, 'empty'))
  t.equal(checkRunDirectory(join(base, 'empty'), false), true)
  earlierRun(join(base, 'earlier'))
  t.equal(checkRunDirectory(join(base, 'earlier'), false), true)
  t.equal(readdirSync(join(base, 'earlier')).length, 5, 'checking touches nothing')
})

t.test(
  'what it may not: a damaged superblock or none (unless --force), another pattern, anything foreign (even with --force)',
  async (t) => {
    const base = tempDir(t)
    const damaged = join(base, 'damaged')
    earlierRun(damaged)
    writeFileSync(join(damaged, 'superblock'), Buffer.alloc(4096))
    t.throws(() => checkRunDirectory(damaged, false), usage(/its superblock is not a files run's \(superblock is zeros\)/))
    t.throws(
      () => checkRunDirectory(damaged, true),
      usage(/"(rec-1|rec-2|\.rec-3\.tmp)" does not hold a plugcheck record, and the directory has no files run's superblock/),
      "--force: a record name alone does not show the file is plugcheck's",
    )
    t.equal(checkRunDirectory(damaged, true, true), true, "the agent's own path: reused")
    writeFileSync(join(damaged, 'rec-1'), '')
    writeFileSync(join(damaged, 'rec-2'), Buffer.alloc(1024))
    const stamped = Buffer.alloc(1024)
    stamped.write('PCS1', 0, 'latin1')
    writeFileSync(join(damaged, '.rec-3.tmp'), stamped)
    t.equal(checkRunDirectory(damaged, true), true, '--force reuses a directory of plugcheck names holding what plugcheck writes')

    const append = join(base, 'append')
    mkdirSync(append)
    writeFileSync(join(append, 'superblock'), encodeSuperblock(craftMeta('cccccccccccccccc', append)))
    t.throws(() => checkRunDirectory(append, false), usage(/the superblock of an append run/))

    const bare = join(base, 'bare')
    mkdirSync(bare)
    writeFileSync(join(bare, 'rec-7'), 'x')
    t.throws(() => checkRunDirectory(bare, false), usage(/holds record files but no superblock/))

    for (const name of ['rec-01', 'superblock.bak', '.rec-1.tmp.swp', 'lost+found']) {
      const dir = join(base, `foreign-${name}`)
      earlierRun(dir)
      writeFileSync(join(dir, name), 'mine')
      for (const reusable of [false, true])
        t.throws(
          () => checkRunDirectory(dir, reusable),
          usage(new RegExp(`it holds "${name.replace(/[.+]/g, '\\$&')}", which plugcheck did not make`)),
        )
      t.equal(readFileSync(join(dir, name), 'utf8'), 'mine')
    }
    const file = join(base, 'file')
    writeFileSync(file, 'data')
    t.throws(() => checkRunDirectory(file, true), usage(/it is a file, and the files pattern makes a directory there/))
  },
)

t.test('a new directory: made, its superblock the run meta, locked against a second writer', async (t) => {
  const path = join(tempDir(t), 'run')
  const meta = filesMeta(path, 'dddddddddddddddd')
  const lock = await createRunDirectory(meta, null, false)
  t.teardown(() => lock.release())
  t.same(readdirSync(path), ['superblock'], 'the superblock alone, its temporary name gone')
  const reading = decodeSuperblock(readFileSync(join(path, 'superblock')))
  t.equal(reading.kind, 'valid')
  t.same(reading.kind === 'valid' ? reading.meta : null, meta)
  t.equal(lock.ino, statSync(join(path, 'superblock')).ino, 'the lock is on the superblock')
  t.equal(nativePort().lockExclusive(join(path, 'superblock'), false), 'busy', 'a second writer finds it held')
  const flock = spawnSync('flock', ['--nonblock', '--conflict-exit-code', '7', join(path, 'superblock'), 'true'])
  t.equal(flock.status, 7, 'so does another process')
})

t.test("an earlier run's directory: only its names deleted, then the new superblock", async (t) => {
  const path = join(tempDir(t), 'run')
  earlierRun(path)
  const held = nativePort().lockExclusive(join(path, 'superblock'), false)
  if (typeof held === 'string') throw new Error(held)
  const meta = filesMeta(path, 'eeeeeeeeeeeeeeee')
  const lock = await createRunDirectory(meta, held, false)
  held.release()
  t.teardown(() => lock.release())
  t.same(readdirSync(path), ['superblock'])
  const reading = decodeSuperblock(readFileSync(join(path, 'superblock')))
  t.equal(reading.kind === 'valid' ? reading.meta.runId : null, 'eeeeeeeeeeeeeeee')
})

t.test('a foreign file that appears after the check is found before anything is deleted', async (t) => {
  const path = join(tempDir(t), 'run')
  earlierRun(path)
  t.equal(checkRunDirectory(path, false), true)
  writeFileSync(join(path, 'appeared.txt'), 'precious')
  await t.rejects(
    createRunDirectory(filesMeta(path, 'ffffffffffffffff'), null, false),
    usage(/"appeared\.txt", which plugcheck did not make/),
  )
  t.same(readdirSync(path).sort(), [
    '.rec-3.tmp',
    '.superblock.plugcheck-bbbbbbbbbbbbbbbb.tmp',
    'appeared.txt',
    'rec-1',
    'rec-2',
    'superblock',
  ])
})

t.test('another process holding the superblock lock refuses the run before anything is deleted', async (t) => {
  const path = join(tempDir(t), 'run')
  earlierRun(path)
  // Its own process group: flock's child (the sleep) goes with it, so no pipe outlives the test.
  const holder = spawn('flock', [join(path, 'superblock'), '-c', 'echo held; exec sleep 60'], {
    stdio: ['ignore', 'pipe', 'ignore'],
    detached: true,
  })
  const exited = new Promise<void>((resolve) => holder.on('close', () => resolve()))
  t.teardown(async () => {
    process.kill(-holder.pid!, 'SIGKILL')
    await exited
  })
  let out = ''
  holder.stdout.on('data', (c: Buffer) => (out += c.toString()))
  await waitFor('flock to hold the superblock', () => out.includes('held'))
  await t.rejects(createRunDirectory(filesMeta(path, '1111111111111111'), null, false), usage(/another plugcheck write is running on it/))
  t.equal(readdirSync(path).length, 5, 'nothing deleted')
  t.ok(existsSync(join(path, 'rec-1')))
})

t.test('a directory that appears between the check and mkdir is refused', async (t) => {
  const path = join(tempDir(t), 'run')
  const meta = filesMeta(path, '2222222222222222')
  t.equal(checkRunDirectory(path, false), false)
  mkdirSync(path)
  writeFileSync(join(path, 'theirs'), 'x')
  await t.rejects(createRunDirectory(meta, null, false), usage(/"theirs", which plugcheck did not make/))
  t.same(readdirSync(path), ['theirs'])
})
