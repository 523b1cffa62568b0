/**
 * syncDirectory and syncDirectoryAsync: fsync a real directory after a create and a rename, leaving
 * its entries as they were and no descriptor open (the listener calls them for every run it creates,
 * for weeks); a directory that is not there is an operating error with Node's code and path.
 */
import { closeSync, mkdirSync, openSync, mkdtempSync, readdirSync, readlinkSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { syncDirectory, syncDirectoryAsync } from '../../../src/base/directory-sync.js'

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'plugcheck-dirsync-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/**
 * How many descriptors this process has open on dir or under it: only those, since the test
 * runner's own (its loader's cache files) open and close meanwhile.
 */
function openDescriptors(dir: string): number {
  let count = 0
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`)
      if (target === dir || target.startsWith(`${dir}/`)) count++
    } catch {
      // closed between the listing and the readlink: not open any more
    }
  }
  return count
}

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
  const before = openDescriptors(dir)
  t.equal(before, 0)
  const held = openSync(dir, 'r')
  t.equal(openDescriptors(dir), 1, 'the count sees a descriptor left open on the directory')
  closeSync(held)
  for (let i = 0; i < 200; i++) syncDirectory(dir)
  t.equal(openDescriptors(dir), before, 'sync')
  await Promise.all(Array.from({ length: 50 }, () => syncDirectoryAsync(dir)))
  for (let i = 0; i < 50; i++) await syncDirectoryAsync(dir)
  t.equal(openDescriptors(dir), before, 'async, in parallel and one after another')
})

t.test('a directory that is not there: ENOENT with the path, and nothing left open', async (t) => {
  const parent = tempDir(t)
  const missing = join(parent, 'gone')
  const before = openDescriptors(parent)
  t.throws(() => syncDirectory(missing), { code: 'ENOENT', path: missing })
  await t.rejects(syncDirectoryAsync(missing), { code: 'ENOENT', path: missing })
  t.equal(openDescriptors(parent), before)
})

t.test('a directory removed between two syncs is found missing the second time', async (t) => {
  const dir = join(tempDir(t), 'runs')
  mkdirSync(dir)
  syncDirectory(dir)
  rmSync(dir, { recursive: true })
  t.throws(() => syncDirectory(dir), { code: 'ENOENT', path: dir })
})
