/**
 * What the build commands leave and say: `npm pack`'s tarball is ignored by git, and the setup steps
 * `npm run build:exe` runs (fetching node.exe and koffi's Windows build) are labelled `build-exe:`
 * like its own lines, `plugcheck-wine:` only under `npm run wine`.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import * as wine from '../../scripts/wine.js'

const repoRoot = join(import.meta.dirname, '..', '..')

t.test("npm pack's tarball is ignored by git, in the checkout's root", async (t) => {
  const version = (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version
  const tarball = `plugcheck-${version}.tgz`
  // check-ignore exits 0 when the path is ignored, 1 when not (execFileSync throws then).
  const rule = execFileSync('git', ['check-ignore', '-v', '--no-index', tarball], { cwd: repoRoot, encoding: 'utf8' })
  t.match(rule, new RegExp(`^\\.gitignore:\\d+:\\*\\.tgz\\t${tarball.replace(/[.]/g, '\\.')}\\n$`))
})

/** The lines fn writes on stderr. */
function stderrOf(fn: () => void): string {
  const write = process.stderr.write
  let text = ''
  process.stderr.write = ((chunk: string | Uint8Array) => {
    text += chunk.toString()
    return true
  }) as typeof process.stderr.write
  try {
    fn()
  } finally {
    process.stderr.write = write
  }
  return text
}

t.test("a setup step's lines carry the label of the script that runs it", async (t) => {
  let result = 0
  const labelled = stderrOf(() => (result = wine.step('fetching node.exe 20.0.0', () => 42, 'build-exe')))
  t.equal(result, 42)
  t.match(labelled, /^build-exe: fetching node\.exe 20\.0\.0 \.\.\.\nbuild-exe: fetching node\.exe 20\.0\.0: done in \d+\.\d s\n$/)
  const plain = stderrOf(() => wine.step('creating the Wine prefix (once)', () => 0))
  t.match(plain, /^plugcheck-wine: creating the Wine prefix \(once\) \.\.\.\n/, 'npm run wine keeps its own label')
})

t.test('build:exe asks for the Windows builds under its own label', async (t) => {
  const labels: unknown[] = []
  const { buildExe } = await t.mockImport<typeof import('../../scripts/build-exe.js')>('../../scripts/build-exe.js', {
    '../../scripts/wine.js': {
      ...wine,
      ensureWindowsBuilds: (label?: string) => {
        labels.push(label)
        throw new Error('stopped here by the test')
      },
    },
  })
  await t.rejects(buildExe('win-x64', t.testdir()), /stopped here by the test/)
  t.same(labels, ['build-exe'])
})
