/**
 * How far a files run's writer got past its acknowledged seqs (judge-files.ts excuses the deletions
 * of the steps past them): the record and temporary files above the acks, and E, the highest seq among
 * them whose file holds exactly its own record of this run. A name alone proves nothing (a user's
 * rec-999999, another run's file, garbage under the name): counting it would excuse every absent
 * acknowledged record as deleted by steps that never ran. At most maxReachedReads files are read.
 */
import { join } from 'node:path'
import { recordFileName, tempFileName } from '../../record/files-layout.js'
import { lstatOrNull, PackedList } from './files-directory.js'
import type { RecordFiles } from './files-record.js'

/** Unacknowledged record and temporary files writerReached reads at most, the highest first. */
export const maxReachedReads = 64

/** The record and temporary files listed above the acknowledged seqs. */
export class UnacknowledgedFiles {
  /** How many were listed (a name listed twice counts twice, as listed). */
  count = 0
  /** seq * 2, + 1 for a temporary name. */
  private readonly files = new PackedList()

  push(seq: number, temporary: boolean): void {
    this.count++
    this.files.push(seq * 2 + (temporary ? 1 : 0))
  }

  /**
   * The highest seq whose record or temporary file in dir holds exactly its own record of this run
   * (0: none does). Files are read from the highest down until one holds its record, reading at most
   * maxReachedReads files of a record's size (others are passed on their lstat): a writer's last
   * complete step is its highest file or the one below (the next step's temporary file), so a
   * directory of a million unacknowledged files costs a few reads, not a million.
   */
  writerReached(dir: string, records: RecordFiles): number {
    const files = this.files.sorted()
    let reads = 0
    for (let i = files.length - 1; i >= 0 && reads < maxReachedReads; i--) {
      const value = files[i]!
      const temporary = value % 2 === 1
      const seq = (value - (temporary ? 1 : 0)) / 2
      if (i + 1 < files.length && files[i + 1] === value) continue // the same name listed twice
      const path = join(dir, temporary ? tempFileName(seq) : recordFileName(seq))
      const stats = lstatOrNull(path)
      if (stats?.isFile() !== true || stats.size !== records.meta.recordSizeBytes) continue // no record: nothing to read
      reads++
      if (records.holdsOwnRecord(path, stats, seq)) return seq
    }
    return 0
  }
}
