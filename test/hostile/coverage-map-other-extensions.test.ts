/**
 * test/unit/coverage-map.test.ts holds "every module of src/" to a test, but lists src/ through
 * tsFilesUnder (test/fixtures/import-graph.ts), which keeps only names ending in `.ts`. A new module
 * `src/x/y.mts` (or `.cts`) is compiled by `npm run typecheck`, cruised by `npm run check:layers` and
 * bundled when imported, yet no test is asked of it. Run here on a scratch tree with the fixture's own code.
 */
import t from 'tap'
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const repoRoot = fileURLToPath(new URL('../..', import.meta.url))

t.test('a src module ending in .mts or .cts is one of the modules the map holds to a test', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'plugcheck-covmap-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  mkdirSync(join(dir, 'test/fixtures'), { recursive: true })
  mkdirSync(join(dir, 'src/base'), { recursive: true })
  copyFileSync(join(repoRoot, 'test/fixtures/import-graph.ts'), join(dir, 'test/fixtures/import-graph.ts'))
  writeFileSync(join(dir, 'package.json'), '{"type": "module"}\n')
  writeFileSync(join(dir, 'src/base/plain.ts'), 'export const plain = 1\n')
  writeFileSync(join(dir, 'src/base/esm-only.mts'), 'export const esmOnly = 1\n')
  writeFileSync(join(dir, 'src/base/cjs-only.cts'), 'export const cjsOnly = 1\n')
  const graph = (await import(pathToFileURL(join(dir, 'test/fixtures/import-graph.ts')).href)) as {
    tsFilesUnder: (folder: string) => string[]
  }
  const modules = graph.tsFilesUnder('src')
  t.ok(modules.includes('src/base/plain.ts'), 'a .ts module is listed (holds today)')
  t.ok(modules.includes('src/base/esm-only.mts'), 'a .mts module is listed')
  t.ok(modules.includes('src/base/cjs-only.cts'), 'a .cts module is listed')
})
