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
 * plugcheck never writes where data may not be its own: plugcheck/ and <hash>/ must be real
 * directories (a symbolic link or junction there could lead to a user's directory), on POSIX owned by
 * this user and writable by no one else, or the start is refused; a file there that is not a regular
 * file is never read or written through, only replaced by a rename.
 */
import { createHash } from 'node:crypto'
import { lstatSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync, type Stats } from 'node:fs'
import { homedir } from 'node:os'
import { dirname, join } from 'node:path'
import { runtimeError, type PlugcheckError } from '../base/errors.js'

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
  return join(xdg?.startsWith('/') ? xdg : join(homedir(), '.cache'), 'plugcheck')
}

/** The directory's name: the first 16 hex digits of the manifest's sha256, so each build has its own. */
export function unpackDirName(manifest: SeaManifest): string {
  return sha256(Buffer.from(JSON.stringify(manifest))).slice(0, 16)
}

function sha256(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex')
}

/** The manifest's files that are missing, differ, or are no regular file (never read through) in dir. */
export function mismatchedFiles(dir: string, manifest: SeaManifest): string[] {
  return manifest.files
    .filter((file) => {
      const path = join(dir, file.name)
      try {
        return !lstatSync(path).isFile() || sha256(readFileSync(path)) !== file.sha256
      } catch {
        return true
      }
    })
    .map((file) => file.name)
}

function isMissing(error: unknown): boolean {
  return (error as NodeJS.ErrnoException).code === 'ENOENT'
}

function lstatIfPresent(path: string): Stats | undefined {
  return lstatSync(path, { throwIfNoEntry: false })
}

function refused(path: string, why: string): PlugcheckError {
  return runtimeError(
    `the cache directory ${path} ${why}: plugcheck writes only into a directory of its own`,
    `remove ${path} (plugcheck makes it again)`,
  )
}

/** Refuses (exit 3) a cache directory that may hold data not plugcheck's own. */
function checkOwnDir(path: string, stats: Stats): void {
  // On Windows lstat reports a junction as a symbolic link too.
  if (stats.isSymbolicLink()) throw refused(path, 'is a symbolic link')
  if (!stats.isDirectory()) throw refused(path, 'is not a directory')
  if (process.platform === 'win32') return
  const uid = process.getuid!()
  if (stats.uid !== uid) throw refused(path, `belongs to uid ${stats.uid}, not to this user (uid ${uid})`)
  if ((stats.mode & 0o022) !== 0) throw refused(path, `is writable by others than its owner (mode ${(stats.mode & 0o777).toString(8)})`)
}

/**
 * Makes root (its parents as needed), then checks it. Its own mkdir is not recursive: Node's
 * recursive mkdir reports ENOENT where the cause is EROFS.
 */
function ensureOwnRoot(root: string): void {
  if (lstatIfPresent(root) === undefined) {
    try {
      mkdirSync(root, { mode: 0o700 })
    } catch (error) {
      if (isMissing(error)) {
        mkdirSync(dirname(root), { recursive: true })
        mkdirSync(root, { mode: 0o700 })
      } else if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
    }
  }
  checkOwnDir(root, lstatSync(root))
}

/** Checks dir when it is there; says whether it is. */
function checkOwnDirIfPresent(dir: string): boolean {
  const stats = lstatIfPresent(dir)
  if (stats !== undefined) checkOwnDir(dir, stats)
  return stats !== undefined
}

/**
 * Unpacks the manifest's files (read with readAsset) under root unless they are there already, and
 * rewrites any file there that does not match; returns the checked directory. Throws when an asset
 * does not match its own manifest (a damaged executable) or when the directory stays wrong, and a
 * PlugcheckError (exit 3, with a hint) when plugcheck/ or <hash>/ is not a directory of its own.
 */
export function ensureUnpacked(
  manifest: SeaManifest,
  root: string,
  readAsset: (name: string) => Uint8Array,
  notice: (text: string) => void,
): string {
  const dir = join(root, unpackDirName(manifest))
  const asset = (name: string): Uint8Array => {
    const bytes = readAsset(name)
    const wanted = manifest.files.find((file) => file.name === name)?.sha256
    if (sha256(bytes) !== wanted) throw new Error(`this executable is damaged: its asset ${name} does not match its manifest`)
    return bytes
  }
  ensureOwnRoot(root)
  let wrong = checkOwnDirIfPresent(dir) ? mismatchedFiles(dir, manifest) : manifest.files.map((file) => file.name)
  if (wrong.length === 0) return dir
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
      checkOwnDirIfPresent(dir)
    }
    wrong = mismatchedFiles(dir, manifest)
  }
  if (wrong.length > 0) {
    notice(`the unpacked files in ${dir} did not match this executable (${wrong.join(', ')}); unpacking them again`)
    for (const name of wrong) {
      const temporary = join(dir, `.${name}.${process.pid}.tmp`)
      // A name left there (a crash, or a link planted at it) is removed, never written through: 'wx' is O_EXCL.
      rmSync(temporary, { force: true })
      writeFileSync(temporary, asset(name), { flag: 'wx' })
      renameSync(temporary, join(dir, name))
    }
    wrong = mismatchedFiles(dir, manifest)
    if (wrong.length > 0)
      throw new Error(`the unpacked files in ${dir} still do not match this executable after unpacking them again (${wrong.join(', ')})`)
  }
  return dir
}
