/**
 * syncDirectory and syncDirectoryAsync: fsync a real directory after a create and a rename, leaving
 * its entries as they were and no descriptor open (the listener calls them for every run it creates,
 * for weeks); a directory that is not there is an operating error with Node's code and path.
 */
import { mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { syncDirectory, syncDirectoryAsync } from '../../../src/base/directory-sync.js'

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'plugcheck-dirsync-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** How many descriptors this process has open. */
const openDescriptors = (): number => readdirSync('/proc/self/fd').length

t.test('after a create and a rename: returns, the entries as they were', async (t) => {
  const dir = tempDir(t)
  writeFileSync(join(dir, 'meta.tmp'), 'x')
  renameSync(join(dir, 'meta.tmp'), join(dir, 'meta.msgpack'))
  t.equal(syncDirectory(dir), undefined)
  t.same(readdirSync(dir), ['meta.msgpack'])
  t.equal(await syncDirectoryAsync(dir), undefined)
  t.same(readdirSync(dir), ['meta.msgpack'])
})

t.test('no descriptor stays open, over many calls', async (t) => {
  const dir = tempDir(t)
  const before = openDescriptors()
  for (let i = 0; i < 200; i++) syncDirectory(dir)
  t.equal(openDescriptors(), before, 'sync')
  await Promise.all(Array.from({ length: 50 }, () => syncDirectoryAsync(dir)))
  for (let i = 0; i < 50; i++) await syncDirectoryAsync(dir)
  t.equal(openDescriptors(), before, 'async, in parallel and one after another')
})

t.test('a directory that is not there: ENOENT with the path, and nothing left open', async (t) => {
  const missing = join(tempDir(t), 'gone')
  const before = openDescriptors()
  t.throws(() => syncDirectory(missing), { code: 'ENOENT', path: missing })
  await t.rejects(syncDirectoryAsync(missing), { code: 'ENOENT', path: missing })
  t.equal(openDescriptors(), before)
})

t.test('a directory removed between two syncs is found missing the second time', async (t) => {
  const dir = join(tempDir(t), 'runs')
  mkdirSync(dir)
  syncDirectory(dir)
  rmSync(dir, { recursive: true })
  t.throws(() => syncDirectory(dir), { code: 'ENOENT', path: dir })
})
