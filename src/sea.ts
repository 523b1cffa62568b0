/**
 * plugcheck as a single executable (Node's single executable applications; `npm run build:exe`,
 * scripts/build-exe.ts): the bundle and the native modules it loads travel inside the executable as
 * assets, listed with their sha256 in a manifest asset. A native module can only be loaded from a
 * file, so they are unpacked once into a cache directory named by the manifest's hash
 * ($XDG_CACHE_HOME/plugcheck/<hash>, ~/.cache/... by default; %LOCALAPPDATA%\plugcheck\<hash> on
 * Windows), and every start checks every file there against the manifest before anything is loaded.
 *
 * Fault model: the cache is the user's own directory, so what it holds may be damaged or changed (a
 * full disk, a crash mid-write, another tool) but not swapped by an adversary between the check and
 * the load. A whole directory appears by one rename of a complete temporary one; a file found wrong
 * is rewritten the same way (temporary file, rename), so several executables starting at once
 * only ever see complete files, and identical ones when they repair together.
 */
import { createHash } from 'node:crypto'
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'

export interface SeaManifest {
  /** The bundle's file name: imported once every file is checked. */
  readonly entry: string
  /** Every asset to unpack (the entry among them), by plain file name, with its sha256 in hex. */
  readonly files: readonly { readonly name: string; readonly sha256: string }[]
}

const unpackedDirKey = Symbol.for('plugcheck.sea.dir')

/** Set by the executable's start (sea-main.ts) in its main thread, once the directory is checked. */
export function markSingleExecutable(dir: string): void {
  ;(globalThis as { [unpackedDirKey]?: string })[unpackedDirKey] = dir
}

/** The checked directory when this process is a single executable, else undefined. */
export function singleExecutableDir(): string | undefined {
  return (globalThis as { [unpackedDirKey]?: string })[unpackedDirKey]
}

/**
 * The command that starts this plugcheck again (the demo's writer, the agent's service): the
 * executable alone in a single executable, else this node and the script.
 */
export function selfCommand(script: string): string[] {
  return singleExecutableDir() === undefined ? [process.execPath, script] : [process.execPath]
}

/** Where the unpacked directories live: the platform's per-user cache. */
export function cacheRoot(env: NodeJS.ProcessEnv, platform: NodeJS.Platform): string {
  if (platform === 'win32') return join(env.LOCALAPPDATA || join(homedir(), 'AppData', 'Local'), 'plugcheck')
  const xdg = env.XDG_CACHE_HOME
  return join(xdg !== undefined && xdg.startsWith('/') ? xdg : join(homedir(), '.cache'), 'plugcheck')
}

/** The directory's name: the first 16 hex digits of the manifest's sha256, so each build has its own. */
export function unpackDirName(manifest: SeaManifest): string {
  return sha256(Buffer.from(JSON.stringify(manifest))).slice(0, 16)
}

function sha256(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex')
}

/** The manifest's files that are missing or differ in dir. */
export function mismatchedFiles(dir: string, manifest: SeaManifest): string[] {
  return manifest.files
    .filter((file) => {
      try {
        return sha256(readFileSync(join(dir, file.name))) !== file.sha256
      } catch {
        return true
      }
    })
    .map((file) => file.name)
}

function isMissing(error: unknown): boolean {
  return (error as NodeJS.ErrnoException).code === 'ENOENT'
}

/**
 * Unpacks the manifest's files (read with readAsset) under root unless they are there already, and
 * rewrites any file there that does not match; returns the checked directory. Throws when an asset
 * does not match its own manifest (a damaged executable) or when the directory stays wrong.
 */
export function ensureUnpacked(manifest: SeaManifest, root: string, readAsset: (name: string) => Uint8Array, notice: (text: string) => void): string {
  const dir = join(root, unpackDirName(manifest))
  const asset = (name: string): Uint8Array => {
    const bytes = readAsset(name)
    const wanted = manifest.files.find((file) => file.name === name)?.sha256
    if (sha256(bytes) !== wanted) throw new Error(`this executable is damaged: its asset ${name} does not match its manifest`)
    return bytes
  }
  let wrong = mismatchedFiles(dir, manifest)
  if (wrong.length === 0) return dir
  mkdirSync(root, { recursive: true, mode: 0o700 })
  if (wrong.length === manifest.files.length) {
    // Nothing usable there (the first run): a complete directory appears by one rename.
    const staging = mkdtempSync(join(root, '.unpack-'))
    try {
      for (const file of manifest.files) writeFileSync(join(staging, file.name), asset(file.name))
      renameSync(staging, dir)
    } catch (error) {
      // Another executable's rename came first (EEXIST, ENOTEMPTY; EPERM on Windows): its files are checked below.
      rmSync(staging, { recursive: true, force: true })
      if (isMissing(error) || (error as NodeJS.ErrnoException).syscall !== 'rename') throw error
    }
    wrong = mismatchedFiles(dir, manifest)
  }
  if (wrong.length > 0) {
    notice(`the unpacked files in ${dir} did not match this executable (${wrong.join(', ')}); unpacking them again`)
    for (const name of wrong) {
      const temporary = join(dir, `.${name}.${process.pid}.tmp`)
      writeFileSync(temporary, asset(name))
      renameSync(temporary, join(dir, name))
    }
    wrong = mismatchedFiles(dir, manifest)
    if (wrong.length > 0) throw new Error(`the unpacked files in ${dir} still do not match this executable after unpacking them again (${wrong.join(', ')})`)
  }
  return dir
}
