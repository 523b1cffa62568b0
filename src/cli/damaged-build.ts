/**
 * The message for a built plugcheck (dist/) that Node cannot compile, e.g. a file truncated by a
 * full disk or an interrupted copy. Node's SyntaxError from a module import names no file, so the
 * files are compiled one by one in a child process (vm.SourceTextModule is behind a flag) to name
 * the first that fails. Loaded only after a load failed.
 */
import { spawnSync } from 'node:child_process'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const compileEach = `
const { readFileSync } = require('node:fs')
const { SourceTextModule } = require('node:vm')
for (const file of process.argv.slice(1)) {
  try { new SourceTextModule(readFileSync(file, 'utf8')) } catch { process.stdout.write(file); break }
}`

/** The first .js file under dir that does not compile as a module, or undefined. */
export function uncompilableFile(dir: string): string | undefined {
  const files = (readdirSync(dir, { recursive: true }) as string[])
    .filter((name) => name.endsWith('.js'))
    .sort()
    .map((name) => join(dir, name))
  const child = spawnSync(process.execPath, ['--experimental-vm-modules', '--no-warnings', '-e', compileEach, ...files], {
    encoding: 'utf8',
    timeout: 30_000,
  })
  return child.stdout === '' || child.stdout === null ? undefined : child.stdout
}

/** Two lines for stderr: the damaged installation, its file when one is found, and the hint. */
export function damagedBuildMessage(error: SyntaxError, distDir: URL): string {
  const file = uncompilableFile(fileURLToPath(distDir))
  const what = file === undefined ? `${error.name}: ${error.message}` : `${file} does not compile (${error.name}: ${error.message})`
  return `plugcheck: this installation's built files are damaged: ${what}\nhint: run npm run build (or install plugcheck again)\n`
}
