/**
 * src/exe/sea.ts without an executable: the cache directory per platform, the first unpack, a damaged
 * file rewritten with a notice, a damaged asset refused, cache directories that may hold someone
 * else's data refused, links and fifos among the files replaced without being read or written
 * through, and the command that starts plugcheck again.
 */
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import * as fs from 'node:fs'
import { chmodSync, lstatSync, mkdirSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { PlugcheckError } from '../../src/base/errors.js'
import {
  cacheRoot,
  ensureUnpacked,
  markSingleExecutable,
  mismatchedFiles,
  selfCommand,
  unpackDirName,
  type SeaManifest,
} from '../../src/exe/sea.js'
import { tempDir } from '../fixtures/cli.js'

const assets: Record<string, Buffer> = { 'plugcheck.mjs': Buffer.from('export {}\n'), 'koffi.node': Buffer.from('native bytes') }
const manifest: SeaManifest = {
  entry: 'plugcheck.mjs',
  files: Object.entries(assets).map(([name, bytes]) => ({ name, sha256: createHash('sha256').update(bytes).digest('hex') })),
}
const readAsset = (name: string) => assets[name]!

t.test('cacheRoot: XDG_CACHE_HOME when absolute, ~/.cache otherwise, LOCALAPPDATA on Windows', async (t) => {
  t.equal(cacheRoot({ XDG_CACHE_HOME: '/var/cache/me' }, 'linux'), '/var/cache/me/plugcheck')
  t.match(cacheRoot({ XDG_CACHE_HOME: 'relative' }, 'linux'), /\/\.cache\/plugcheck$/)
  t.equal(cacheRoot({ LOCALAPPDATA: '/c/Users/me/AppData/Local' }, 'win32'), '/c/Users/me/AppData/Local/plugcheck')
})

t.test('ensureUnpacked: unpacks once, rewrites a damaged file with a notice, refuses a damaged asset', async (t) => {
  const root = join(tempDir(t, 'plugcheck-sea-'), 'plugcheck')
  const notices: string[] = []
  const dir = ensureUnpacked(manifest, root, readAsset, (text) => notices.push(text))
  t.equal(dir, join(root, unpackDirName(manifest)))
  t.same(readdirSync(root), [unpackDirName(manifest)], 'no staging directory is left')
  t.same(notices, [])
  t.same(mismatchedFiles(dir, manifest), [])
  t.equal(
    ensureUnpacked(
      manifest,
      root,
      () => t.fail('a checked directory reads no asset') as never,
      () => {},
    ),
    dir,
  )

  writeFileSync(join(dir, 'koffi.node'), 'changed')
  t.same(mismatchedFiles(dir, manifest), ['koffi.node'])
  ensureUnpacked(manifest, root, readAsset, (text) => notices.push(text))
  t.match(notices, [/did not match this executable \(koffi\.node\); unpacking them again$/])
  t.same(readFileSync(join(dir, 'koffi.node')), assets['koffi.node'])

  writeFileSync(join(dir, 'koffi.node'), 'changed')
  t.throws(
    () =>
      ensureUnpacked(
        manifest,
        root,
        (name) => (name === 'koffi.node' ? Buffer.from('tampered') : readAsset(name)),
        () => {},
      ),
    /this executable is damaged: its asset koffi\.node does not match its manifest/,
  )
})

/** A directory of a user's own files named as the assets are, and a snapshot of its bytes. */
function userDir(dir: string): { path: string; snapshot: () => Record<string, string> } {
  const path = join(dir, 'user')
  mkdirSync(path)
  for (const name of Object.keys(assets)) writeFileSync(join(path, name), `the user's own ${name}\n`)
  const snapshot = () => Object.fromEntries(readdirSync(path).map((name) => [name, readFileSync(join(path, name), 'utf8')]))
  return { path, snapshot }
}

/** ensureUnpacked's refusal: a PlugcheckError with exit 3 and a hint to remove the path. */
function refusal(t: Test, root: string, path: string, why: RegExp): void {
  let error: unknown
  try {
    ensureUnpacked(manifest, root, readAsset, () => t.fail('nothing is unpacked'))
  } catch (thrown) {
    error = thrown
  }
  t.type(error, PlugcheckError)
  const { message, exitCode, hint } = error as PlugcheckError
  t.equal(exitCode, 3)
  t.match(message, why)
  t.ok(message.startsWith(`the cache directory ${path} `), message)
  t.equal(hint, `remove ${path} (plugcheck makes it again)`)
}

t.test('ensureUnpacked refuses a cache directory that may hold data not its own, and writes nothing there', async (t) => {
  const dir = tempDir(t, 'plugcheck-sea-')
  const user = userDir(dir)
  const before = user.snapshot()

  const linkedHash = join(dir, 'linked-hash', 'plugcheck')
  mkdirSync(linkedHash, { recursive: true, mode: 0o700 })
  symlinkSync(user.path, join(linkedHash, unpackDirName(manifest)))
  refusal(
    t,
    linkedHash,
    join(linkedHash, unpackDirName(manifest)),
    /is a symbolic link: plugcheck writes only into a directory of its own$/,
  )

  const linkedRoot = join(dir, 'linked-root', 'plugcheck')
  mkdirSync(join(dir, 'linked-root'))
  symlinkSync(user.path, linkedRoot)
  refusal(t, linkedRoot, linkedRoot, /is a symbolic link/)
  t.same(user.snapshot(), before, "the user's files are byte-identical")
  t.same(readdirSync(user.path).sort(), Object.keys(assets).sort(), 'nothing was added to the linked directory')

  const groupWritable = join(dir, 'group-writable', 'plugcheck')
  mkdirSync(join(groupWritable, unpackDirName(manifest)), { recursive: true })
  chmodSync(groupWritable, 0o700)
  chmodSync(join(groupWritable, unpackDirName(manifest)), 0o770)
  refusal(t, groupWritable, join(groupWritable, unpackDirName(manifest)), /is writable by others than its owner \(mode 770\)/)
  chmodSync(groupWritable, 0o777)
  refusal(t, groupWritable, groupWritable, /mode 777/)

  const aFile = join(dir, 'a-file', 'plugcheck')
  mkdirSync(join(dir, 'a-file'))
  writeFileSync(aFile, 'not a directory')
  refusal(t, aFile, aFile, /is not a directory/)
  t.equal(readFileSync(aFile, 'utf8'), 'not a directory')
})

t.test('ensureUnpacked: a link or fifo in place of a file is replaced by a rename, never read or written through', async (t) => {
  const dir = tempDir(t, 'plugcheck-sea-')
  const user = userDir(dir)
  const before = user.snapshot()
  const root = join(dir, 'plugcheck')
  const unpacked = ensureUnpacked(manifest, root, readAsset, () => {})
  fs.rmSync(join(unpacked, 'koffi.node'))
  symlinkSync(join(user.path, 'koffi.node'), join(unpacked, 'koffi.node'))
  // A link at the temporary name must not be written through either.
  symlinkSync(join(user.path, 'plugcheck.mjs'), join(unpacked, `.koffi.node.${process.pid}.tmp`))
  fs.rmSync(join(unpacked, 'plugcheck.mjs'))
  // Read, a fifo would block the start for good.
  execFileSync('mkfifo', [join(unpacked, 'plugcheck.mjs')])
  const notices: string[] = []
  t.equal(
    ensureUnpacked(manifest, root, readAsset, (text) => notices.push(text)),
    unpacked,
  )
  t.match(notices, [/\(plugcheck\.mjs, koffi\.node\); unpacking them again$/])
  for (const name of Object.keys(assets)) {
    t.ok(lstatSync(join(unpacked, name)).isFile(), `${name} is a regular file again`)
    t.same(readFileSync(join(unpacked, name)), assets[name])
  }
  t.same(user.snapshot(), before, "the user's files are byte-identical")
  t.same(readdirSync(unpacked).sort(), Object.keys(assets).sort(), 'no temporary name is left')
})

t.test('ensureUnpacked: a cache on a read-only file system fails with EROFS, not the ENOENT of a recursive mkdir', async (t) => {
  const erofs = (path: string) =>
    Object.assign(new Error(`EROFS: read-only file system, mkdir '${path}'`), { code: 'EROFS', syscall: 'mkdir', path })
  const mkdirSync = (path: string, options?: fs.MakeDirectoryOptions) => {
    // What Node's recursive mkdir reports on a read-only tmpfs (measured), and a plain mkdir's own error.
    if (path.endsWith('/plugcheck')) throw options?.recursive ? Object.assign(new Error('ENOENT'), { code: 'ENOENT' }) : erofs(path)
    return fs.mkdirSync(path, options)
  }
  const sea = await t.mockImport<typeof import('../../src/exe/sea.js')>('../../src/exe/sea.js', { 'node:fs': { ...fs, mkdirSync } })
  const root = join(tempDir(t, 'plugcheck-sea-'), 'plugcheck')
  t.throws(() => sea.ensureUnpacked(manifest, root, readAsset, () => {}), { code: 'EROFS', syscall: 'mkdir', path: root })
})

t.test('selfCommand: node and the script, or the executable alone once marked', async (t) => {
  t.same(selfCommand('/opt/plugcheck/bin/plugcheck.js'), [process.execPath, '/opt/plugcheck/bin/plugcheck.js'])
  markSingleExecutable('/tmp/unpacked')
  t.same(selfCommand('/opt/plugcheck/bin/plugcheck.js'), [process.execPath])
})
