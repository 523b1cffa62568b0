/**
 * src/sea.ts without an executable: the cache directory per platform, the first unpack, a damaged
 * file rewritten with a notice, a damaged asset refused, and the command that starts plugcheck again.
 */
import { createHash } from 'node:crypto'
import { readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { cacheRoot, ensureUnpacked, markSingleExecutable, mismatchedFiles, selfCommand, unpackDirName, type SeaManifest } from '../../src/sea.js'
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
  t.equal(ensureUnpacked(manifest, root, () => t.fail('a checked directory reads no asset') as never, () => {}), dir)

  writeFileSync(join(dir, 'koffi.node'), 'changed')
  t.same(mismatchedFiles(dir, manifest), ['koffi.node'])
  ensureUnpacked(manifest, root, readAsset, (text) => notices.push(text))
  t.match(notices, [/did not match this executable \(koffi\.node\); unpacking them again$/])
  t.same(readFileSync(join(dir, 'koffi.node')), assets['koffi.node'])

  writeFileSync(join(dir, 'koffi.node'), 'changed')
  t.throws(() => ensureUnpacked(manifest, root, (name) => (name === 'koffi.node' ? Buffer.from('tampered') : readAsset(name)), () => {}), /this executable is damaged: its asset koffi\.node does not match its manifest/)
})

t.test('selfCommand: node and the script, or the executable alone once marked', async (t) => {
  t.same(selfCommand('/opt/plugcheck/bin/plugcheck.js'), [process.execPath, '/opt/plugcheck/bin/plugcheck.js'])
  markSingleExecutable('/tmp/unpacked')
  t.same(selfCommand('/opt/plugcheck/bin/plugcheck.js'), [process.execPath])
})
