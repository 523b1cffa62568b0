/**
 * bin/plugcheck.js picks what to run: dist/ when no file under src/ is newer than dist/bin.js, else
 * the sources through tsx, else (no tsx) a one-line error; never an old dist/ in silence. Run on a
 * copy of the launcher in a scratch tree whose dist/bin.js and src/bin.ts say which one ran.
 */
import { execFile } from 'node:child_process'
import { copyFileSync, mkdirSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { binPath, tempDir, type CliResult } from '../../fixtures/cli.js'

const repoModules = fileURLToPath(new URL('../../../node_modules', import.meta.url))

/** A tree with bin/plugcheck.js, and dist/bin.js and src/ as asked; returns its launcher. */
function scratchTree(dir: string, parts: { dist: boolean; src: boolean; tsx: boolean }): string {
  mkdirSync(join(dir, 'bin'))
  copyFileSync(binPath, join(dir, 'bin', 'plugcheck.js'))
  writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n')
  if (parts.src) {
    mkdirSync(join(dir, 'src', 'client'), { recursive: true })
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the text of a TypeScript file that uses a template
    writeFileSync(join(dir, 'src', 'bin.ts'), "const from: string = 'src'\nprocess.stdout.write(`${from}\\n`)\n")
    writeFileSync(join(dir, 'src', 'client', 'deep.ts'), 'export {}\n')
  }
  if (parts.dist) {
    mkdirSync(join(dir, 'dist'))
    writeFileSync(join(dir, 'dist', 'bin.js'), "process.stdout.write('dist\\n')\n")
  }
  if (parts.tsx) symlinkSync(repoModules, join(dir, 'node_modules'))
  return join(dir, 'bin', 'plugcheck.js')
}

function setMtime(path: string, epochS: number): void {
  utimesSync(path, epochS, epochS)
}

function run(launcher: string): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(process.execPath, [launcher, '--help'], { timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : -1, stdout, stderr })
    })
  })
}

const builtS = 1_700_000_000

t.test('a dist/ built after every source runs', async (t) => {
  const dir = tempDir(t)
  const launcher = scratchTree(dir, { dist: true, src: true, tsx: false })
  for (const path of ['src', 'src/bin.ts', 'src/client', 'src/client/deep.ts']) setMtime(join(dir, path), builtS - 10)
  setMtime(join(dir, 'dist', 'bin.js'), builtS)
  t.same(await run(launcher), { code: 0, stdout: 'dist\n', stderr: '' })
})

t.test('a source newer than dist/ runs the sources through tsx, even deep in src/', async (t) => {
  const dir = tempDir(t)
  const launcher = scratchTree(dir, { dist: true, src: true, tsx: true })
  for (const path of ['src', 'src/bin.ts', 'src/client']) setMtime(join(dir, path), builtS - 10)
  setMtime(join(dir, 'src', 'client', 'deep.ts'), builtS + 1)
  setMtime(join(dir, 'dist', 'bin.js'), builtS)
  t.same(await run(launcher), { code: 0, stdout: 'src\n', stderr: '' }, 'no note on stderr when it is not a terminal')
})

t.test('no dist/ yet runs the sources through tsx', async (t) => {
  const launcher = scratchTree(tempDir(t), { dist: false, src: true, tsx: true })
  t.same(await run(launcher), { code: 0, stdout: 'src\n', stderr: '' })
})

t.test('a stale dist/ without tsx is refused, not run', async (t) => {
  const dir = tempDir(t)
  const launcher = scratchTree(dir, { dist: true, src: true, tsx: false })
  setMtime(join(dir, 'dist', 'bin.js'), builtS)
  t.same(await run(launcher), {
    code: 3,
    stdout: '',
    stderr: 'plugcheck: dist/ is older than src/ and tsx is not installed\nhint: run npm run build (or npm ci)\n',
  })
})

t.test('an installation without dist/ and src/ says it is incomplete', async (t) => {
  const launcher = scratchTree(tempDir(t), { dist: false, src: false, tsx: false })
  t.same(await run(launcher), {
    code: 3,
    stdout: '',
    stderr: 'plugcheck: dist/bin.js is missing: this installation is incomplete\nhint: install plugcheck again\n',
  })
})
