/**
 * plugcheck --version names package.json's version from any working directory: the built CLI (the
 * build writes the version into the bundle, so a global install or a copied executable knows it
 * without a package.json beside it) and the sources. Before, dist/bin.js run from a directory
 * outside the package printed "unknown".
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { plugcheckVersion } from '../../../src/cli/version.js'

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url))
const version = (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version

t.test('the sources read package.json beside them', async (t) => {
  t.match(version, /^\d+\.\d+\.\d+/)
  t.equal(plugcheckVersion(), version)
})

t.test('the built CLI, run from an empty directory, prints the version written into it', async (t) => {
  const empty = mkdtempSync(join(tmpdir(), 'plugcheck-version-'))
  t.teardown(() => rmSync(empty, { recursive: true, force: true }))
  const built = ['bin.js', ...readdirSync(join(repoRoot, 'dist', 'chunks')).map((name) => join('chunks', name))]
    .filter((name) => name.endsWith('.js'))
    .map((name) => readFileSync(join(repoRoot, 'dist', name), 'utf8'))
  t.ok(
    built.some((text) => text.includes('function plugcheckVersion')),
    'the version module is in the build',
  )
  t.notOk(
    built.some((text) => text.includes('PLUGCHECK_VERSION')),
    'the build replaced its name with the version',
  )
  const printed = execFileSync(process.execPath, [join(repoRoot, 'dist', 'bin.js'), '--version'], { cwd: empty, encoding: 'utf8' })
  t.equal(printed.trim(), version)
  const viaBin = execFileSync(process.execPath, [join(repoRoot, 'bin', 'plugcheck.js'), '--version'], { cwd: empty, encoding: 'utf8' })
  t.equal(viaBin.trim(), version)
})
