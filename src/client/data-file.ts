/**
 * Creating the data file safely. We never write over a path that holds data that is not ours
 * unless --force says so, and never over a device. The new file is built under a temporary name
 * beside the target, made durable, renamed into place, and the directory fsynced: after a cut the
 * path holds either the old file or the complete new superblock, never half of one.
 */
import { closeSync, fsyncSync, openSync, readSync, renameSync, statSync, unlinkSync, writeSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { decodeSuperblock, encodeSuperblock, slotOffsetBytes, type RunMeta } from '../record/format.js'
import { describeSystemError, runtimeError, usageError } from '../errors.js'

const zeroChunkBytes = 4 * 1024 * 1024

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
    throw usageError(`refusing to overwrite ${path}: it is not a plugcheck data file (${reading.detail})`, 'choose another --file, or pass --force to replace it')
  }
}

/** Writes the superblock (and, for overwrite, the zero-filled region), makes it durable, renames it into place. */
export function createDataFile(meta: RunMeta): void {
  const tmp = join(dirname(meta.path), `.${basename(meta.path)}.plugcheck-${meta.runId}.tmp`)
  let fd: number
  try {
    fd = openSync(tmp, 'wx', 0o644)
  } catch (error) {
    throw runtimeError(`could not create ${tmp}: ${describeSystemError(error)}`)
  }
  let open = true
  try {
    writeSync(fd, encodeSuperblock(meta), 0, meta.recordSizeBytes, 0)
    if (meta.pattern === 'overwrite') {
      // Explicit zeros, not fallocate: the blocks must be allocated and written, so the run tests in-place overwrites.
      const zeros = Buffer.alloc(zeroChunkBytes)
      const end = slotOffsetBytes(meta.recordSizeBytes, meta.slotCount)
      for (let offset = meta.recordSizeBytes; offset < end; offset += zeros.length) {
        writeSync(fd, zeros, 0, Math.min(zeros.length, end - offset), offset)
      }
    }
    fsyncSync(fd)
    open = false
    closeSync(fd)
    renameSync(tmp, meta.path)
    syncDirectory(dirname(meta.path))
  } catch (error) {
    if (open) closeSync(fd)
    try {
      unlinkSync(tmp)
    } catch {
      // nothing to clean
    }
    throw runtimeError(`could not create ${meta.path}: ${describeSystemError(error)}`)
  }
}

export function syncDirectory(dir: string): void {
  const fd = openSync(dir, 'r')
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}
