/**
 * A built plugcheck whose dist/ was damaged after the build (a chunk truncated by a full disk or an
 * interrupted copy): exit 3 with one line naming the file and a hint to rebuild, no stack trace.
 * Built with scripts/build.ts in a scratch copy of the checkout, then a chunk is cut short there.
 */
import { execFile } from 'node:child_process'
import { cpSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { tempDir, type CliResult } from '../../fixtures/cli.js'

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url))
const timeoutMs = 120_000

function run(args: readonly string[], cwd: string): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(process.execPath, args, { cwd, timeout: timeoutMs }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : -1, stdout, stderr })
    })
  })
}

t.test('a truncated chunk in dist/: the damaged file named, a rebuild hinted, exit 3', async (t) => {
  const dir = tempDir(t, 'plugcheck-damaged-build-')
  for (const part of ['bin', 'src', 'scripts', 'package.json', 'tsconfig.json'])
    cpSync(join(repoRoot, part), join(dir, part), { recursive: true })
  symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'))
  const built = await run(['--import', 'tsx', join('scripts', 'build.ts')], dir)
  t.equal(built.code, 0, built.stderr)
  const launcher = join(dir, 'bin', 'plugcheck.js')
  t.equal((await run([launcher, 'methods'], dir)).code, 0, 'the fresh build runs')

  const cliChunk = /import\("\.\/(chunks\/cli-[\w-]+\.js)"\)/.exec(readFileSync(join(dir, 'dist', 'bin.js'), 'utf8'))?.[1]
  if (cliChunk === undefined) throw new Error('dist/bin.js imports no chunks/cli-*.js')
  const chunk = join(dir, 'dist', cliChunk)
  const bytes = readFileSync(chunk)
  // Cut inside a line, as a full disk cuts a copy; writing it keeps dist/bin.js the newest build file.
  writeFileSync(chunk, bytes.subarray(0, Math.floor(bytes.length / 2)))
  const result = await run([launcher, 'methods'], dir)
  t.equal(result.code, 3)
  t.equal(result.stdout, '')
  t.match(
    result.stderr,
    /^plugcheck: this installation's built files are damaged: (.*) does not compile \(SyntaxError: [^\n]+\)\nhint: run npm run build \(or install plugcheck again\)\n$/,
  )
  t.equal(/damaged: (.*) does not compile/.exec(result.stderr)?.[1], chunk, 'names the truncated file')
})
