/**
 * `npm run check:layers` (.dependency-cruiser.cjs) over a scratch tree shaped like src/, run with the
 * repository's own config: every src/ module must sit in a layer ("every-module-placed"), and only
 * src/native/ may touch koffi ("platform-calls-in-native").
 *
 * - A module in a folder of no layer (src/util/) that imports nothing escapes "every-module-placed"
 *   (that rule needs the module to import something), and the layer rules only forbid folders that are
 *   listed, so src/base/ (a low layer) can import it unchecked.
 * - src/native/ re-exporting koffi itself hands the binding to any layer: src/client/ then loads the C
 *   library with koffi. Code above src/native/ may import only its face (index, port, methods, registry,
 *   errors, sockaddr), and the face binds nothing.
 */
import t from 'tap'
import { spawnSync } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const repoRoot = fileURLToPath(new URL('../..', import.meta.url))

function cruise(t: { teardown: (fn: () => void) => void }, files: Record<string, string>): { status: number | null; out: string } {
  const dir = mkdtempSync(join(tmpdir(), 'plugcheck-layers-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  copyFileSync(join(repoRoot, '.dependency-cruiser.cjs'), join(dir, '.dependency-cruiser.cjs'))
  copyFileSync(join(repoRoot, 'tsconfig.json'), join(dir, 'tsconfig.json'))
  symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'))
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(dir, dirname(path)), { recursive: true })
    writeFileSync(join(dir, path), text)
  }
  const run = spawnSync(
    process.execPath,
    [
      join(repoRoot, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs'),
      'src',
      '--config',
      '.dependency-cruiser.cjs',
      '--output-type',
      'err',
    ],
    { cwd: dir, encoding: 'utf8', timeout: 60_000 },
  )
  return { status: run.status, out: `${run.stdout}${run.stderr}` }
}

t.test('the check works on the scratch tree: an upward import fails (holds today)', async (t) => {
  const run = cruise(t, {
    'src/cli/cli.ts': 'export const cli = 1\n',
    'src/base/up.ts': "import { cli } from '../cli/cli.js'\nexport const up = cli\n",
  })
  t.not(run.status, 0)
  t.match(run.out, /layer:src\/base\/: src\/base\/up\.ts → src\/cli\/cli\.ts/)
})

t.test('a module in a folder of no layer is caught even when it imports nothing', async (t) => {
  const run = cruise(t, {
    'src/util/helper.ts': 'export const helper = 1\n',
    'src/base/uses.ts': "import { helper } from '../util/helper.js'\nexport const uses = helper\n",
  })
  t.not(run.status, 0, 'check:layers fails')
  t.match(run.out, /src\/util\/helper\.ts/, 'and names the unplaced module')
})

t.test('koffi re-exported from src/native/ and used by another layer is caught', async (t) => {
  const run = cruise(t, {
    'src/native/binding.ts': "export { default as koffi } from 'koffi'\n",
    'src/client/loader.ts': "import { koffi } from '../native/binding.js'\nexport const libc = (): unknown => koffi.load('libc.so.6')\n",
  })
  t.not(run.status, 0, 'check:layers fails')
  t.match(run.out, /native-through-its-face: src\/client\/loader\.ts/, 'and names the module that reached past the face of src/native/')
})

t.test('the face of src/native/ re-exporting koffi is caught', async (t) => {
  const run = cruise(t, {
    'src/native/index.ts': "export { default as koffi } from 'koffi'\n",
    'src/client/loader.ts': "import { koffi } from '../native/index.js'\nexport const libc = (): unknown => koffi.load('libc.so.6')\n",
  })
  t.not(run.status, 0, 'check:layers fails')
  t.match(run.out, /native-face-binds-nothing: src\/native\/index\.ts/, 'and names the face that binds koffi')
})

t.test('a module of no layer that imports nothing and nothing imports is caught', async (t) => {
  const run = cruise(t, { 'src/util/alone.ts': 'export const alone = 1\n', 'src/base/other.ts': 'export const other = 1\n' })
  t.not(run.status, 0, 'check:layers fails')
  t.match(run.out, /no-orphans: src\/util\/alone\.ts/, 'and names it')
})
