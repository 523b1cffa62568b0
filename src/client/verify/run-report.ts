/**
 * What judging one run reports (judge.ts): its counts, which are always exact, and the first
 * maxDetailList of its lost ranges and damaged records.
 */
import type { RunVerdict } from './verdict-rules.js'

/** Per-record detail lists and lostRanges are capped; counts are always exact. */
export const maxDetailList = 1000

export interface SeqRange {
  readonly fromSeq: number
  readonly toSeq: number
  readonly count: number
  /** Why these seqs are gone (zeros, older data, past the end of the file, another run's data). */
  readonly reason: string
  /** When the listener received the acks of these seqs (ms since the epoch; span precision 100 ms). */
  readonly ackedFromMs: number
  readonly ackedToMs: number
}

export interface RecordFinding {
  readonly seq: number
  readonly slot: number
  readonly offsetBytes: number
  readonly lengthBytes: number
  readonly detail: string
}

export interface RunReport {
  readonly runId: string
  readonly groupId: string
  readonly method: string
  /** `none` is the negative control: its losses prove the cut was real. Every other method is tested. */
  readonly role: 'control' | 'tested'
  readonly direct: boolean
  readonly recordSize: number
  readonly pattern: string
  readonly path: string
  readonly createdMs: number
  readonly ended: string | null
  /** false: this machine has not rebooted since the write (same boot id); null: unknown. */
  readonly rebootedSinceWrite: boolean | null
  readonly acked: number
  readonly superseded: number
  readonly intact: number
  /** Records lost, torn or corrupt are counted apart; unreadable ones (the storage would not return them) are in lost too. */
  readonly lost: number
  /** Of lost: acknowledged records whose read failed (EIO, EBADMSG, ...), or of a file that could not be opened. */
  readonly unreadable: number
  readonly torn: number
  readonly corrupt: number
  /** Overwrites of a newer, unacknowledged seq cut mid-record: the device's atomic write unit, not a failure. */
  readonly interrupted: number
  /**
   * tested: pass (every acknowledged record survived), fail (one did not, or the superblock did not),
   * inconclusive (nothing was acknowledged). control: pass (it lost records: the cut was real),
   * inconclusive (it lost nothing: the cut tested nothing).
   */
  readonly verdict: RunVerdict
  readonly superblock: { readonly kind: string; readonly detail: string; readonly runId?: string }
  /** Exact number of lost ranges; lostRanges holds the first maxDetailList of them, in seq order. */
  readonly lostRangeCount: number
  readonly lostRanges: readonly SeqRange[]
  readonly tornRecords: readonly RecordFinding[]
  readonly corruptRecords: readonly RecordFinding[]
  readonly interruptedRecords: readonly RecordFinding[]
  /** The first maxDetailList unreadable records found by reading (not those of a file that could not be opened), in file order. */
  readonly unreadableRecords: readonly RecordFinding[]
  /** Acknowledged seqs lost, torn or corrupt while a later record survived: writes reordered across a flush. */
  readonly reordering: { readonly count: number; readonly survivedSeq: number; readonly earliestLostSeq: number } | null
  /** A files run's own findings (judge-files.ts); present exactly for runs of `--pattern files`. */
  readonly files?: FilesFindings
}

/**
 * What a files run's directory showed beyond the counts every run has. Each failure here is counted
 * in `lost` too (as unreadable is), so the verdict, the stored verdict and the report count it as a
 * loss; the deleted records checked absent are `superseded`.
 */
export interface FilesFindings {
  /** Record files the run keeps (its slotCount): seq s is deleted once s + keep is acknowledged. */
  readonly keep: number
  readonly dirSync: boolean
  readonly publish: string
  /** Acknowledged deletions checked: records whose file must be gone. */
  readonly deleted: number
  /**
   * Acknowledged records whose file is gone, deleted by a later step whose ack the listener never got
   * (the writer deletes, syncs the directory, then acks): not judged. superseded = deleted - cameBack + this.
   */
  readonly deletedUnacknowledged: number
  /** The highest seq of a record or temporary file found in the directory (0: none). */
  readonly highestSeq: number
  /** The highest seq above the acknowledged ones whose file holds exactly its own record (0: none): how far the writer evidently got. */
  readonly reachedSeq: number
  /** Of lost: acknowledged records absent under their final name, present under their temporary one. */
  readonly renameLost: number
  /** Of lost: acknowledged records whose file is there but empty. */
  readonly zeroLength: number
  /** Of lost: acknowledged records whose file is there but shorter than a record. */
  readonly short: number
  /** Of lost: acknowledged records whose name holds no file (a directory, a symbolic link, a FIFO, ...). */
  readonly notAFile: number
  /** Of lost: records whose deletion was acknowledged and whose file is there again. */
  readonly cameBack: number
  /** Record and temporary files of seqs never acknowledged: fine, not judged. */
  readonly unacknowledged: number
  /** Names no files run makes (foreign files, rec-01, subdirectories, ...): noted, never a failure. */
  readonly strays: number
  /** The first maxDetailList stray names, as printable text. */
  readonly strayNames: readonly string[]
  /** The first maxDetailList zero-length, short and deleted-but-back files, in seq order (lengthBytes: the size found). */
  readonly records: readonly RecordFinding[]
}
