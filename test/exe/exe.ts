/**
 * Shared by the tests under test/exe/: the single executables of this checkout, built once per
 * content of what goes into them (src/, the build script, the lockfile, this node) and kept under
 * node_modules/.cache/plugcheck-exe/, so a second run of the tests reuses them.
 */
import { createHash } from 'node:crypto'
import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { buildExe, exeName, type ExeTarget } from '../../scripts/build-exe.js'
import { repoRoot } from '../../scripts/wine.js'

function hashTree(hash: ReturnType<typeof createHash>, dir: string): void {
  for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const path = join(dir, entry.name)
    hash.update(path)
    if (entry.isDirectory()) hashTree(hash, path)
    else hash.update(readFileSync(path))
  }
}

function inputsKey(target: ExeTarget): string {
  const hash = createHash('sha256').update(`${target} ${process.version}`)
  hashTree(hash, join(repoRoot, 'src'))
  for (const file of ['scripts/build-exe.ts', 'package-lock.json']) hash.update(readFileSync(join(repoRoot, file)))
  return hash.digest('hex').slice(0, 16)
}

/** The path of this checkout's executable for target, built when it is not there yet. */
export async function builtExe(target: ExeTarget): Promise<string> {
  const dir = join(repoRoot, 'node_modules', '.cache', 'plugcheck-exe', inputsKey(target))
  const path = join(dir, exeName(target))
  if (!existsSync(path)) await buildExe(target, dir)
  return path
}

/** Throws, saying why, where the linux-x64 executable cannot be built: only a Linux x64 node builds it. */
export function ensureLinuxX64(): void {
  if (process.platform === 'linux' && process.arch === 'x64') return
  throw new Error(`the linux-x64 executable is built from a Linux x64 node, and this is ${process.platform}-${process.arch}\nhint: run the suite on Linux x64, as CI does`)
}
