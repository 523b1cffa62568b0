/**
 * The suite's loader (test/fixtures/tap-ts/hooks.mjs) caches each compiled module. An entry is written
 * once and read by every later run, so one damaged by a crash (a power cut leaves a renamed file of 0
 * bytes on ext4, or cut at a line) must be compiled again, never run: a 0-byte test file runs no test
 * and tap counts it a pass ("no tests found"), one cut after its first assertions passes on them
 * alone. A cache that cannot be written (read-only, full) costs time, never the test. A `.js` import
 * of a module whose `.ts` exists loads the `.ts`, never a stray `.js` beside it. Run here on a
 * scratch module and a cache folder of its own (TAP_TS_CACHE_DIR).
 */
import t from 'tap'
import { spawnSync } from 'node:child_process'
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { tempDir } from '../../fixtures/cli.js'

const register = fileURLToPath(new URL('../../fixtures/tap-ts/register.mjs', import.meta.url))

/** Runs module through the loader with cacheDir as its cache: its exit code and output. */
function load(module: string, cacheDir: string): { code: number | null; out: string } {
  const child = spawnSync(process.execPath, [`--import=${register}`, module], {
    encoding: 'utf8',
    env: { ...process.env, TAP_TS_CACHE_DIR: cacheDir },
    timeout: 60_000,
  })
  return { code: child.status, out: child.stdout + child.stderr }
}

t.test('a cache entry cut short or emptied is compiled again, not run', async (t) => {
  const dir = tempDir(t)
  const module = join(dir, 'case.ts')
  const cache = join(dir, 'cache')
  writeFileSync(module, "const first: string = 'first'\nconsole.log(first)\nconsole.log('last')\n")
  t.same(load(module, cache), { code: 0, out: 'first\nlast\n' }, 'compiled and run')
  const entries = readdirSync(cache)
  t.equal(entries.length, 1, 'one cache entry', { entries })
  const entry = join(cache, entries[0]!)
  const whole = readFileSync(entry, 'utf8')
  t.same(load(module, cache), { code: 0, out: 'first\nlast\n' }, 'run from the cache')

  const cut = whole.slice(0, whole.indexOf('console.log("last")'))
  t.match(cut, /console\.log\(first\);\n$/, 'the entry is cut after a whole statement')
  for (const [name, damaged] of [
    ['0 bytes', ''],
    ['cut at a line', cut],
    ['zeroed', '\0'.repeat(whole.length)],
  ] as const) {
    writeFileSync(entry, damaged)
    t.same(load(module, cache), { code: 0, out: 'first\nlast\n' }, `${name}: compiled again, the whole module runs`)
    t.equal(readFileSync(entry, 'utf8'), whole, `${name}: the entry is whole again`)
  }
})

t.test('a cache that cannot be written: the module still runs', async (t) => {
  const dir = tempDir(t)
  const module = join(dir, 'case.ts')
  writeFileSync(module, "const n: number = 7\nconsole.log('ran', n)\n")
  // A file where the folder should be: its mkdir fails as a read-only or full file system's writes would, root or not.
  const cache = join(dir, 'not-a-folder')
  writeFileSync(cache, '')
  t.same(load(module, join(cache, 'tap-ts')), { code: 0, out: 'ran 7\n' })
})

t.test('a .js import whose .ts exists loads the .ts, even beside a stray .js (as tsx does)', async (t) => {
  const dir = tempDir(t)
  writeFileSync(join(dir, 'main.ts'), "import { from } from './dep.js'\nconsole.log(from)\n")
  writeFileSync(join(dir, 'dep.ts'), "export const from: string = 'ts'\n")
  t.same(load(join(dir, 'main.ts'), join(dir, 'cache')), { code: 0, out: 'ts\n' }, 'only the .ts')
  writeFileSync(join(dir, 'dep.js'), "export const from = 'a stale compiled copy'\n")
  t.same(load(join(dir, 'main.ts'), join(dir, 'cache')), { code: 0, out: 'ts\n' }, 'the .ts, not the .js beside it')
})
