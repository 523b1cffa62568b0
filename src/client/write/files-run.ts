/**
 * A `--pattern files` run's directory (record/files-layout.ts): checked before anything is announced,
 * made (or an earlier run's emptied) once the run is announced, and opened for the write loop.
 *
 * Fault model: the path is the user's. It is used only when it does not exist, is an empty
 * directory (or holds only a superblock's temporary name), or is an earlier plugcheck files directory: a valid files superblock and nothing but
 * the names plugcheck makes there (superblock, rec-N, .rec-N.tmp, a superblock's temporary name), each
 * a regular file. Anything else (a file of the user's, a subdirectory, a symbolic link, a data file of
 * the append pattern at the path itself) is refused with exit 2 before anything is touched, and
 * --force never makes plugcheck delete a name it does not make (it only lets a directory of plugcheck's
 * names whose superblock is damaged be reused). The listing is bounded: the first foreign entry stops it.
 *
 * Two writers: each holds flock(LOCK_EX) on the directory's superblock file for the whole run, as on a
 * data file (data-file.ts): on an earlier run's superblock before the run is announced, on the new
 * superblock before it is renamed into place. A writer that finds the lock held is refused (exit 2).
 * Making the directory with mkdir (never an existing one) settles two writers that both found none.
 */
import { closeSync, constants, fstatSync, lstatSync, mkdirSync, opendirSync, openSync, readSync, unlinkSync, type Dirent } from 'node:fs'
import { dirname, join } from 'node:path'
import { decodeSuperblock, maxRecordSizeBytes, type RunMeta } from '../../record/format.js'
import { sectorMagic } from '../../record/records.js'
import { isSuperblockTempName, seqOfRecordFile, seqOfTempFile, superblockFileName, superblockTempName } from '../../record/files-layout.js'
import type { Pattern, PublishWay } from '../../record/patterns.js'
import { NativeError, nativePort, type FileLock, type RecordDirectory } from '../../native/index.js'
import { PlugcheckError, describeSystemError, runtimeError, usageError } from '../../base/errors.js'
import { syncDirectory } from '../../base/directory-sync.js'
import { createDataFile, directFlag, lockExisting } from './data-file.js'

/** What the write loop needs of a files run: its directory held open, and how each record file is made. */
export interface FilesRun {
  readonly directory: RecordDirectory
  readonly dirSync: boolean
  readonly publish: PublishWay
  /** Record files kept: the run's slotCount. */
  readonly keep: number
  /** The run's directory, for messages. */
  readonly path: string
}

/**
 * A record file the run kept was gone when its turn to be recycled came: only this writer deletes
 * them (it holds the run's lock), so another program did (rm, a temporary-file cleaner). Like a data
 * file deleted during the run, the run ends as 'file-changed' and verify judges nothing: the storage
 * is not to blame.
 */
export class RecordFileGone extends Error {
  constructor(path: string, name: string) {
    super(`the record file ${path}/${name} was deleted during the run, by something other than plugcheck`)
    this.name = 'RecordFileGone'
  }
}

/** The file a run's lock is held on: the data file, or a files run's superblock inside its directory. */
export function lockedFileOf(pattern: Pattern, path: string): string {
  return pattern === 'files' ? join(path, superblockFileName) : path
}

/** Whether name is one plugcheck makes in a files directory (the superblock's own name included). */
function isPlugcheckName(name: string): boolean {
  return name === superblockFileName || seqOfRecordFile(name) !== null || seqOfTempFile(name) !== null || isSuperblockTempName(name)
}

const refusalHint = 'give --file a path that does not exist (plugcheck makes the directory), or an earlier plugcheck files directory'

/**
 * Refuses (exit 2) a path a files run may not use, touching nothing; returns whether it exists.
 * reusable: --force, or the agent's own path of the last run, whose superblock a cut may have damaged.
 * own: the path is the agent's own (it made the directory); else, with --force and no files
 * superblock to show the directory is plugcheck's, a record name alone proves nothing: each file under
 * one must hold what plugcheck writes (recordFileRefusal), or the directory is refused.
 */
export function checkRunDirectory(path: string, reusable: boolean, own = false): boolean {
  let stats
  try {
    stats = lstatSync(path)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false
    throw runtimeError(`could not inspect ${path}: ${describeSystemError(error)}`)
  }
  if (stats.isSymbolicLink()) throw usageError(`refusing to use ${path} for --pattern files: it is a symbolic link`, refusalHint)
  if (stats.isFile())
    throw usageError(
      `refusing to use ${path} for --pattern files: it is a file, and the files pattern makes a directory there`,
      refusalHint,
    )
  if (!stats.isDirectory()) throw usageError(`refusing to use ${path} for --pattern files: it is not a directory`, refusalHint)
  const names = plugcheckEntries(path)
  // Nothing, or only a superblock's temporary name: a write stopped (killed, cut) while it made the directory.
  if (names.every(isSuperblockTempName)) return true
  if (reusable) {
    if (!own && (!names.includes(superblockFileName) || readSuperblock(join(path, superblockFileName)) !== null))
      for (const name of names) refuseForeignRecordFile(path, name)
    return true
  }
  if (!names.includes(superblockFileName))
    throw usageError(
      `refusing to use ${path} for --pattern files: it holds record files but no superblock, so it may not be plugcheck's`,
      'pass --force to reuse it (only the names plugcheck makes are deleted), or give --file another path',
    )
  const reading = readSuperblock(join(path, superblockFileName))
  if (reading !== null)
    throw usageError(
      `refusing to use ${path} for --pattern files: its superblock is not a files run's (${reading})`,
      'pass --force to reuse it (only the names plugcheck makes are deleted), or give --file another path',
    )
  return true
}

/**
 * The names in the directory, every one plugcheck's and a regular file; refuses (exit 2) at the first
 * other entry, so a huge foreign directory is not read to its end.
 */
function plugcheckEntries(path: string): string[] {
  const names: string[] = []
  let dir
  try {
    dir = opendirSync(path)
  } catch (error) {
    throw runtimeError(`could not list ${path}: ${describeSystemError(error)}`)
  }
  try {
    for (let entry: Dirent | null = dir.readSync(); entry !== null; entry = dir.readSync()) {
      const what = kindOf(entry, path)
      if (!isPlugcheckName(entry.name) || what !== null)
        throw usageError(
          `refusing to use ${path} for --pattern files: it holds ${JSON.stringify(entry.name)}${what === null ? '' : ` (${what})`}, which plugcheck did not make`,
          `${refusalHint}; nothing in it was touched`,
        )
      names.push(entry.name)
    }
  } catch (error) {
    if (error instanceof PlugcheckError) throw error
    throw runtimeError(`could not list ${path}: ${describeSystemError(error)}`)
  } finally {
    dir.closeSync()
  }
  return names
}

/** null for a regular file, else what the entry is. A file system that gives no type in its listing (DT_UNKNOWN) is asked with lstat. */
function kindOf(entry: Dirent, dir: string): string | null {
  const typed =
    entry.isFile() ||
    entry.isDirectory() ||
    entry.isSymbolicLink() ||
    entry.isBlockDevice() ||
    entry.isCharacterDevice() ||
    entry.isFIFO() ||
    entry.isSocket()
  const stats = typed ? entry : lstatSync(join(dir, entry.name))
  if (stats.isFile()) return null
  return stats.isDirectory() ? 'a directory' : stats.isSymbolicLink() ? 'a symbolic link' : 'not a file'
}

/** Refuses (exit 2) the directory when name is a record or temporary record name whose file holds what plugcheck never writes there. */
function refuseForeignRecordFile(path: string, name: string): void {
  if (seqOfRecordFile(name) === null && seqOfTempFile(name) === null) return
  const why = recordFileRefusal(join(path, name))
  if (why !== null)
    throw usageError(
      `refusing to use ${path} for --pattern files: ${JSON.stringify(name)} ${why}, and the directory has no files run's superblock to show it is plugcheck's`,
      `nothing in it was touched; if the directory is plugcheck's, delete its files yourself, or give --file another path`,
    )
}

/**
 * Why the file under a record name may not be plugcheck's, or null when it may be: empty, or at most
 * a record's greatest size starting with a record's sector stamp ("PCS1"), or all zeros (what a cut
 * leaves of a record). Anything else is the user's data under a record name, never deleted.
 */
function recordFileRefusal(path: string): string | null {
  let fd: number
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
  } catch (error) {
    return `cannot be read (${describeSystemError(error)})`
  }
  try {
    const stats = fstatSync(fd)
    if (!stats.isFile()) return 'is not a file'
    if (stats.size === 0) return null
    if (stats.size > maxRecordSizeBytes) return `holds ${stats.size} bytes, more than any record`
    const bytes = Buffer.alloc(stats.size)
    let done = 0
    for (let n = -1; done < bytes.length && n !== 0; done += n) n = readSync(fd, bytes, done, bytes.length - done, done)
    if (done >= 4 && bytes.readUInt32LE(0) === sectorMagic) return null
    return bytes.subarray(0, done).every((b) => b === 0) ? null : 'does not hold a plugcheck record'
  } catch (error) {
    return `cannot be read (${describeSystemError(error)})`
  } finally {
    closeSync(fd)
  }
}

/** Why the file is not a files run's superblock, or null when it is one. */
function readSuperblock(path: string): string | null {
  const head = Buffer.alloc(4096)
  let n: number
  try {
    const fd = openSync(path, 'r')
    try {
      n = readSync(fd, head, 0, head.length, 0)
    } finally {
      closeSync(fd)
    }
  } catch (error) {
    return `it cannot be read: ${describeSystemError(error)}`
  }
  const reading = decodeSuperblock(head.subarray(0, n))
  if (reading.kind !== 'valid') return reading.detail
  return reading.meta.pattern === 'files' ? null : `the superblock of an ${reading.meta.pattern} run`
}

/**
 * Makes the run's directory, or empties an earlier run's (only plugcheck's names), then writes the new
 * superblock durably (a temporary name, fsync, lock, rename, directory fsync: data-file.ts
 * createDataFile). A new directory's parent is fsynced after mkdir, so the directory itself survives a
 * cut. Returns the new superblock's lock. held: the lock taken on the earlier superblock, or null.
 */
export async function createRunDirectory(meta: RunMeta, held: FileLock | null, reusable: boolean, own = false): Promise<FileLock> {
  const path = meta.path
  const superblock = join(path, superblockFileName)
  let appeared: FileLock | null = null
  try {
    if (!checkRunDirectory(path, reusable, own)) {
      mkdirSync(path, { mode: 0o755 })
      syncDirectory(dirname(path))
    } else {
      // Another writer may have made this directory since our lock was taken: its lock refuses us here, before anything is deleted.
      if (held === null) appeared = lockExisting(superblock)
      for (const name of plugcheckEntries(path)) if (name !== superblockFileName) unlinkSync(join(path, name))
    }
    return await createDataFile(meta, held ?? appeared, undefined, undefined, {
      path: superblock,
      tmp: join(path, superblockTempName(meta.runId)),
    })
  } catch (error) {
    if (error instanceof PlugcheckError) throw error
    if ((error as NodeJS.ErrnoException).code === 'EEXIST')
      throw usageError(
        `refusing to use ${path} for --pattern files: it appeared while this run started (another writer?)`,
        'give --file another path',
      )
    throw runtimeError(`could not make ${path}: ${describeSystemError(error)}`)
  } finally {
    appeared?.release()
  }
}

/** The run's directory opened for the loop: every record file is made relative to it. */
export function openFilesRun(meta: RunMeta): FilesRun {
  let directory: RecordDirectory
  try {
    directory = nativePort().openRecordDirectory(meta.path, meta.method, { direct: meta.direct })
  } catch (error) {
    if (meta.direct && error instanceof NativeError && error.code === 'EINVAL')
      throw usageError(`--direct is not supported for ${meta.path}: the file system refused direct I/O (${directFlag()})`)
    throw runtimeError(`could not open ${meta.path}: ${describeSystemError(error)}`)
  }
  const files = meta.files!
  return { directory, dirSync: files.dirSync, publish: files.publish, keep: meta.slotCount, path: meta.path }
}
