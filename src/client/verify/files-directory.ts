/**
 * A files run's place and listing (judge-files.ts judges what they hold): what lies at the run's path,
 * and its directory's names, entry by entry. Nothing is followed (lstat only; a symbolic link at the
 * path is exit 3), and the listing is bounded by maxFilesRunEntries: a directory of any size costs at
 * most that many names, never memory per name. An unreadable place or listing (EIO, ...) is a value
 * the judging loses records by; any other failure is an operating error (exit 3).
 */
import { lstatSync, opendirSync, type Dir, type Stats } from 'node:fs'
import { maxOverwriteSlots } from '../../record/format.js'
import { describeSystemError, runtimeError } from '../../base/errors.js'
import { isUnreadable } from './read-ahead.js'
import { fileKind } from './data-file-read.js'

/**
 * Entries of a run's directory verify lists at most: the most record files a run keeps (slotCount,
 * maxOverwriteSlots) and room for temporary files, unacknowledged ones and strays. One number per
 * record file is kept while judging (8 bytes: 128 MiB at the bound, as overwrite's slot table).
 */
export const maxFilesRunEntries = maxOverwriteSlots + 2 ** 20

/** Seq-sorted numbers, grown by doubling: seq * 256 + code, or plain seqs. */
export class PackedList {
  private values = new Float64Array(1024)
  length = 0
  push(value: number): void {
    if (this.length === this.values.length) {
      const larger = new Float64Array(this.values.length * 2)
      larger.set(this.values)
      this.values = larger
    }
    this.values[this.length++] = value
  }
  sorted(): Float64Array {
    return this.values.subarray(0, this.length).sort()
  }
}

export function lstatOrNull(path: string): Stats | null {
  try {
    return lstatSync(path)
  } catch {
    return null
  }
}

/** What lies at a files run's path: its directory, nothing, a file, or what cannot be judged (thrown, exit 3). */
export function runPlace(path: string): 'directory' | 'missing' | 'file' | { readonly unreadable: string } {
  let stats: Stats
  try {
    stats = lstatSync(path)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 'missing'
    if (isUnreadable(error)) return { unreadable: describeSystemError(error) }
    throw runtimeError(`could not stat ${path}: ${describeSystemError(error)}`)
  }
  if (stats.isDirectory()) return 'directory'
  if (stats.isFile()) return 'file'
  if (stats.isSymbolicLink())
    throw runtimeError(
      `${path} is a symbolic link, not the directory write made: verify never follows one out of a run's place`,
      "give --file the run's directory itself (the path given to write)",
    )
  throw runtimeError(`${path} is ${fileKind(stats)}, not a directory`, "give --file the run's directory (the path given to write)")
}

/** Lists the directory at path, each name to entry; the errno when the storage would not list it to its end. Past maxEntries: exit 3. */
export function listDirectory(path: string, entry: (name: string) => void, maxEntries: number): string | null {
  let dir: Dir
  try {
    dir = opendirSync(path, { bufferSize: 1024 })
  } catch (error) {
    if (isUnreadable(error)) return describeSystemError(error)
    throw runtimeError(`could not list ${path}: ${describeSystemError(error)}`)
  }
  try {
    let entries = 0
    for (;;) {
      const listed = dir.readSync()
      if (listed === null) return null
      if (++entries > maxEntries)
        throw runtimeError(
          `${path} holds more than ${maxEntries.toLocaleString('en-US')} entries, more than a files run makes (it keeps at most ${maxOverwriteSlots.toLocaleString('en-US')} record files); nothing was judged`,
          "give --file a files run's directory, holding only what write made there",
        )
      entry(listed.name)
    }
  } catch (error) {
    if (isUnreadable(error)) return describeSystemError(error)
    throw error
  } finally {
    dir.closeSync()
  }
}
