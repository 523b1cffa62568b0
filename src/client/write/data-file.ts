/**
 * Creating the data file safely. We never write over a path that holds data that is not ours
 * unless --force says so, and never over a device. The new file is built under a temporary name
 * beside the target, made durable, renamed into place, and the directory fsynced: after a cut the
 * path holds either the old file or the complete new superblock, never half of one.
 */
import { closeSync, fsyncSync, openSync, readSync, renameSync, statSync, unlinkSync, writeSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import { basename, dirname, join } from 'node:path'
import { decodeSuperblock, encodeSuperblock, type RunMeta } from '../../record/format.js'
import { slotOffsetBytes } from '../../record/records.js'
import { NativeError, nativePort, type FileLock } from '../../native/index.js'
import { PlugcheckError, describeSystemError, runtimeError, usageError } from '../../base/errors.js'
import { holdExclusiveLock } from '../../base/locks.js'
import { syncDirectory } from '../../base/directory-sync.js'
import { yieldToEventLoop } from './stop-signals.js'

const zeroChunkBytes = 4 * 1024 * 1024

/**
 * Where the zero fill of a new overwrite file is (fill-progress.ts says it): after each chunk ('filling'),
 * before the fsync, and how it ended ('stopped': a stop signal cut the fill short, the file is made anyway).
 */
export type FillStep =
  | { readonly kind: 'filling'; readonly filledBytes: number }
  | { readonly kind: 'syncing' | 'done' | 'failed' | 'stopped' }

/** Refuses (exit 2) a data file whose folder is missing, before anything is announced or created. */
export function checkFolder(dir: string): void {
  let stats
  try {
    stats = statSync(dir)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT')
      throw usageError(
        `the folder ${dir} does not exist`,
        'create it (on the storage to test), or give --file a path in an existing folder',
      )
    throw runtimeError(`could not inspect ${dir}: ${describeSystemError(error)}`)
  }
  if (!stats.isDirectory()) throw usageError(`${dir} is not a folder`, 'give --file a path in a folder on the storage to test')
}

/** Refuses (exit 2) a path that is not safe to replace. */
export function checkReplaceable(path: string, force: boolean): void {
  let stats
  try {
    stats = statSync(path)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return
    throw runtimeError(`could not inspect ${path}: ${describeSystemError(error)}`)
  }
  if (stats.isBlockDevice() || stats.isCharacterDevice()) {
    throw usageError(`refusing to write to ${path}: it is a device; plugcheck writes a data file on a file system`)
  }
  if (stats.isDirectory()) throw usageError(`refusing to write to ${path}: it is a directory`, 'give --file a file name inside it')
  if (!stats.isFile()) throw usageError(`refusing to write to ${path}: it is not a regular file`)
  if (stats.size === 0 || force) return
  const head = Buffer.alloc(4096)
  const fd = openSync(path, 'r')
  let n: number
  try {
    n = readSync(fd, head, 0, head.length, 0)
  } finally {
    closeSync(fd)
  }
  const reading = decodeSuperblock(head.subarray(0, n))
  if (reading.kind !== 'valid') {
    throw usageError(
      `refusing to overwrite ${path}: it is not a plugcheck data file (${reading.detail})`,
      'choose another --file, or pass --force to replace it',
    )
  }
}

/*
 * Two writers on one file. A second `write` on a path that a live run is writing would replace the
 * file under it, and verify would then blame the storage for every record of the first run. So each
 * writer holds flock(LOCK_EX) on its data file for the whole run: on the existing file before the
 * run is announced (lockExisting), and on the new file before it is renamed into place
 * (createDataFile). flock follows the inode through the rename and lasts as long as the descriptor,
 * and the process's exit (even SIGKILL) releases it. The listener's 'path-busy' refusal covers what
 * a lock cannot: two writers that both found no file, or writers on different machines.
 */

function busy(path: string): PlugcheckError {
  return usageError(
    `refusing to write to ${path}: another plugcheck write is running on it (it holds the file's lock)`,
    'wait for that run to end, or give --file another path',
  )
}

/**
 * Takes the exclusive lock on the file at path, if there is one, and returns it (null when there is
 * no file). Refuses (exit 2) when another process holds the lock.
 */
export function lockExisting(path: string): FileLock | null {
  return holdExclusiveLock(path, false, () => busy(path))
}

/**
 * Writes the superblock (and, for overwrite, the zero-filled region, each chunk told to report),
 * makes it durable, renames it into place. Returns the new file's lock (taken before the rename, so no moment exists in which the
 * path names an unlocked file of this run). held is the lock lockExisting took on the old file, or null.
 * target: where the superblock goes, when it is not the run's path (a files run's superblock file, and its temporary name).
 *
 * A 2 GiB fill takes seconds, a moment the user may well press Ctrl-C. Node runs a signal's JS handler
 * only when the event loop turns, which a synchronous loop never lets it do; so the fill yields to the
 * event loop after each 4 MiB chunk (one setImmediate hop, microseconds against the chunk's
 * milliseconds) and asks `stopped` (stop-signals.ts: the flag the write's handlers set). Once stopped it
 * writes no more zeros but still makes the file (superblock, fsync, rename): the run was announced
 * and ends as interrupted having written no record, so nothing is judged against the region left
 * unfilled, and the path never names a half-made file.
 */
export async function createDataFile(
  meta: RunMeta,
  held: FileLock | null = null,
  report?: (step: FillStep) => void,
  stopped: () => boolean = () => false,
  target: { readonly path: string; readonly tmp: string } = {
    path: meta.path,
    tmp: join(dirname(meta.path), `.${basename(meta.path)}.plugcheck-${meta.runId}.tmp`),
  },
): Promise<FileLock> {
  const tmp = target.tmp
  let fd: number
  try {
    fd = openSync(tmp, 'wx', 0o644)
  } catch (error) {
    report?.({ kind: 'failed' })
    throw runtimeError(`could not create ${tmp}: ${describeSystemError(error)}`)
  }
  let open = true
  let fillStopped = stopped()
  let lock: FileLock | null = null
  let appeared: FileLock | null = null
  try {
    writeSync(fd, encodeSuperblock(meta), 0, meta.recordSizeBytes, 0)
    if (meta.pattern === 'overwrite') {
      // Explicit zeros, not fallocate: the blocks must be allocated and written, so the run tests in-place overwrites.
      const zeros = Buffer.alloc(zeroChunkBytes)
      const end = slotOffsetBytes(meta.recordSizeBytes, meta.slotCount)
      for (let offset = meta.recordSizeBytes; offset < end && !fillStopped; offset += zeros.length) {
        writeSync(fd, zeros, 0, Math.min(zeros.length, end - offset), offset)
        report?.({ kind: 'filling', filledBytes: Math.min(offset + zeros.length, end) })
        await yieldToEventLoop() // lets a stop signal's handler run (see above)
        fillStopped = stopped()
      }
      if (!fillStopped) report?.({ kind: 'syncing' })
    }
    fsyncSync(fd)
    closeSync(fd)
    open = false
    // The temporary name is ours alone (random run id, created with O_EXCL): nobody else holds it.
    lock = holdExclusiveLock(tmp, false, () => runtimeError(`${tmp} is locked by another process`))
    if (lock === null) throw runtimeError(`${tmp} vanished while it was being created`)
    // A file that appeared at the path since lockExisting (another writer that also found none) must
    // not be replaced while its writer runs.
    appeared = lockAppeared(target.path, held)
    if (held !== null && !nativePort().renameReplacesOpenFiles) held.release()
    renameSync(tmp, target.path)
    syncDirectory(dirname(target.path))
    report?.({ kind: fillStopped ? 'stopped' : 'done' })
    return lock
  } catch (error) {
    report?.({ kind: 'failed' })
    if (open) closeSync(fd)
    lock?.release()
    try {
      unlinkSync(tmp)
    } catch {
      // nothing to clean
    }
    if (error instanceof PlugcheckError) throw error
    throw runtimeError(`could not create ${target.path}: ${describeSystemError(error)}`)
  } finally {
    appeared?.release()
  }
}

/** Locks a file that is at path now but is not the one held locks; null when there is none. */
function lockAppeared(path: string, held: FileLock | null): FileLock | null {
  let current
  try {
    current = statSync(path)
  } catch {
    return null
  }
  if (held !== null && held.ino === current.ino && held.dev === current.dev) return null
  return lockExisting(path)
}

/** The flag --direct sets here, as the platform's table names it: O_DIRECT, F_NOCACHE, FILE_FLAG_NO_BUFFERING. */
export function directFlag(): string {
  const direct = nativePort().table().direct
  return direct.applies ? (/\(([A-Z_]+)\)/.exec(direct.how)?.[1] ?? 'direct I/O') : 'direct I/O'
}

/**
 * O_DIRECT is refused by some file systems only at open. Probe it with a scratch file of our own in
 * the target directory before the run is announced or any file is replaced, so a refusal (exit 2)
 * never costs the user the previous data file.
 */
export function checkDirectSupported(dir: string): void {
  const direct = nativePort().table().direct
  if (!direct.applies) throw usageError(`--direct is not available here: ${direct.reason}`)
  const probe = join(dir, `.plugcheck-direct-probe.${randomBytes(6).toString('hex')}`)
  try {
    nativePort().probeDirect(probe)
  } catch (error) {
    if (error instanceof NativeError && error.code === 'EINVAL') {
      throw usageError(
        `--direct is not supported in ${dir}: the file system refused direct I/O (${directFlag()})`,
        'leave out --direct, or test a file system that supports it',
      )
    }
    throw runtimeError(`could not create ${probe}: ${describeSystemError(error)}`)
  } finally {
    // Some file systems create the file and only then refuse direct I/O: remove it either way.
    try {
      unlinkSync(probe)
    } catch {
      // never created
    }
  }
}
