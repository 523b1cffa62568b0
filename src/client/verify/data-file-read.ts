/**
 * Reading a data file for verify: opened read-only and only when it is a regular file, read in full
 * or up to its end, its superblock sized by its own header. A file or superblock the storage cannot
 * return (EIO, EBADMSG, ...: isUnreadable) is a finding, 'unreadable'; any other failure to open or
 * read is a one-line runtime error.
 */
import { closeSync, constants, fstatSync, lstatSync, openSync, readSync, statSync, type Stats } from 'node:fs'
import { join } from 'node:path'
import { superblockFileName } from '../../record/files-layout.js'
import {
  decodeSuperblock,
  maxRecordSizeBytes,
  superblockHeaderBytes,
  superblockMagic,
  type SuperblockReading,
} from '../../record/format.js'
import { describeSystemError, runtimeError } from '../../base/errors.js'
import { isUnreadable } from './read-ahead.js'

/** A data file, or its superblock, that the storage would not return: the file system lost or damaged it. */
export interface UnreadableFile {
  readonly kind: 'unreadable'
  readonly detail: string
}

/**
 * Opens the data file read-only; null when it does not exist, 'unreadable' when the storage refuses to
 * open it (ext4 gives EBADMSG for an inode whose checksum failed). Only regular files: a FIFO would
 * hang, a directory would not read.
 */
export function openDataFile(path: string, noFollow = false): number | null | UnreadableFile {
  let fd: number
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | (noFollow ? constants.O_NOFOLLOW : 0))
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null
    if (isUnreadable(error)) return { kind: 'unreadable', detail: `the data file cannot be opened: ${describeSystemError(error)}` }
    throw runtimeError(`could not open ${path}: ${describeSystemError(error)}`)
  }
  let stats: Stats
  try {
    stats = fstatSync(fd)
  } catch (error) {
    closeSync(fd)
    throw runtimeError(`could not stat ${path}: ${describeSystemError(error)}`)
  }
  if (!stats.isFile()) {
    closeSync(fd)
    throw runtimeError(`${path} is ${fileKind(stats)}, not a regular file`, 'give --file the data file that write created')
  }
  return fd
}

/** lstat, or null when nothing is there, or 'unreadable' when the storage cannot say (EIO, EBADMSG, ...). */
function lstatOrNull(path: string): Stats | null | UnreadableFile {
  try {
    return lstatSync(path)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null
    if (isUnreadable(error)) return { kind: 'unreadable', detail: `the superblock cannot be read: ${describeSystemError(error)}` }
    throw runtimeError(`could not stat ${path}: ${describeSystemError(error)}`)
  }
}

/** What a file that is not a regular one is, in words: 'a directory', 'a FIFO', ... */
export function fileKind(stats: Stats): string {
  if (stats.isDirectory()) return 'a directory'
  if (stats.isFIFO()) return 'a FIFO'
  if (stats.isSocket()) return 'a socket'
  if (stats.isCharacterDevice()) return 'a character device'
  if (stats.isBlockDevice()) return 'a block device'
  if (stats.isSymbolicLink()) return 'a symbolic link'
  return 'not a file'
}

/**
 * What the file at path says about its run; 'missing' when there is no file. A directory at path is a
 * files run's (files-layout.ts): its superblock is the file `superblock` in it, never followed when
 * it is a symbolic link. A symbolic link to a directory is refused: a files run's directory is read
 * only as write made it.
 */
export function readSuperblock(path: string): SuperblockReading | UnreadableFile | { readonly kind: 'missing'; readonly detail: string } {
  const kind = runDirectoryKind(path)
  if (kind === 'directory') return readSuperblockFile(join(path, superblockFileName), true)
  if (kind === 'link-to-directory') throw linkedDirectory(path)
  return readSuperblockFile(path, false)
}

/** A symbolic link where a files run's directory was: refused, since verify never follows one out of a run's place. */
export function linkedDirectory(path: string): Error {
  return runtimeError(
    `${path} is a symbolic link to a directory, not the directory write made: verify reads a files run's directory only where write made it`,
    "give --file the run's directory itself (the path given to write)",
  )
}

/** Whether path is a directory (not followed), a symbolic link to one, or anything else (a file, nothing, ...). */
function runDirectoryKind(path: string): 'directory' | 'link-to-directory' | 'other' {
  try {
    const stats = lstatSync(path)
    if (stats.isDirectory()) return 'directory'
    if (stats.isSymbolicLink() && statSync(path).isDirectory()) return 'link-to-directory'
  } catch {
    // Missing, a dangling link or unreadable: the file's own open says which.
  }
  return 'other'
}

/** The superblock of the file at path; inDirectory: a files run's `superblock`, opened without following a link. */
function readSuperblockFile(
  path: string,
  inDirectory: boolean,
): SuperblockReading | UnreadableFile | { readonly kind: 'missing'; readonly detail: string } {
  if (inDirectory) {
    const stats = lstatOrNull(path)
    if (stats === null) return { kind: 'missing', detail: 'the run directory holds no superblock' }
    if ('kind' in stats) return stats
    if (!stats.isFile()) return { kind: 'damaged', detail: `the run directory's superblock is ${fileKind(stats)}, not a file` }
  }
  const fd = openDataFile(path, inDirectory)
  if (fd === null) return { kind: 'missing', detail: 'the data file does not exist' }
  if (typeof fd !== 'number') return fd
  try {
    return readSuperblockFd(fd, path)
  } finally {
    closeSync(fd)
  }
}

/**
 * The superblock as its own header sizes it: its metadata, then the rest of its block (the record
 * size it names), never the listener's idea of the record size, which is what it cross-checks.
 */
export function readSuperblockFd(fd: number, path: string): SuperblockReading | UnreadableFile {
  try {
    return readSuperblockBlock(fd, path)
  } catch (error) {
    if (error instanceof UnreadableRead)
      return { kind: 'unreadable', detail: `the superblock cannot be read: ${describeSystemError(error.cause)}` }
    throw error
  }
}

/** A read the storage refused for the data itself, inside readFully. */
class UnreadableRead extends Error {}

function readSuperblockBlock(fd: number, path: string): SuperblockReading {
  const head = Buffer.alloc(superblockHeaderBytes)
  const got = readFully(fd, head, head.length, 0, path)
  const metaLength = got === head.length ? head.readUInt32LE(12) : 0
  if (got < head.length || !head.subarray(0, 8).equals(superblockMagic) || metaLength > maxRecordSizeBytes - head.length)
    return decodeSuperblock(head.subarray(0, got))
  let block = Buffer.alloc(head.length + metaLength)
  let reading = decodeSuperblock(block.subarray(0, readFully(fd, block, block.length, 0, path)))
  if (reading.kind === 'valid' && reading.meta.recordSizeBytes > block.length) {
    block = Buffer.alloc(reading.meta.recordSizeBytes)
    reading = decodeSuperblock(block.subarray(0, readFully(fd, block, block.length, 0, path)))
  }
  return reading
}

/** Reads up to `wanted` bytes; short only at end of file. An unreadable range throws UnreadableRead, any other read error a one-line runtime error. */
function readFully(fd: number, buffer: Buffer, wanted: number, offset: number, path: string): number {
  let done = 0
  try {
    while (done < wanted) {
      const n = readSync(fd, buffer, done, wanted - done, offset + done)
      if (n === 0) break
      done += n
    }
  } catch (error) {
    if (isUnreadable(error)) throw new UnreadableRead('unreadable', { cause: error })
    throw runtimeError(`could not read ${path} at offset ${offset + done}: ${describeSystemError(error)}`)
  }
  return done
}
