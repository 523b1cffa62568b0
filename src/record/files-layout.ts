/**
 * The layout of a `--pattern files` run: a directory of its own (the run's path) holding
 *
 *   superblock        the run's superblock, exactly as block 0 of a data file (format.ts)
 *   rec-<seq>         one record (records.ts), seq in decimal without leading zeros
 *   .rec-<seq>.tmp    the record while it is being made, before it is published
 *   .superblock.plugcheck-<runId>.tmp   the superblock while it is being made (fsynced, then renamed to superblock)
 *
 * Each record is made the way a careful program makes a file (PostgreSQL's durable_rename):
 *   1. create .rec-<seq>.tmp (O_EXCL, the method's open flags), write the record, the method's file sync, close;
 *   2. publish: rename(.rec-<seq>.tmp, rec-<seq>), or with --publish link: link(tmp, rec-<seq>), unlink(tmp);
 *   3. recycle: when seq > keep (the run's slotCount), unlink rec-<seq - keep>, the oldest kept;
 *   4. the method's directory sync (left out with --no-dir-sync);
 *   5. only then the ack of seq.
 * So an acknowledged seq s promises (with the directory sync): rec-s holds its record, unless a later
 * acknowledged seq deleted it (s + keep acknowledged), in which case rec-s is gone for good.
 * A record's slot is (seq - 1) % keep, as in append, so its bytes are those of the same seq in an
 * append run of the same window.
 */
/** Seqs above this cannot be real (the same bound as verify's maxJudgedSeq: more than a year at a million records a second). */
const maxFileSeq = 2 ** 45

/** The most record files a run keeps (--keep-files): the slot bound of every run but append's (format.ts maxOverwriteSlots). */
export const maxKeptFiles = 2 ** 24

export const superblockFileName = 'superblock'

export function recordFileName(seq: number): string {
  return `rec-${seq}`
}

export function tempFileName(seq: number): string {
  return `.rec-${seq}.tmp`
}

/** The superblock's name while it is being made, before it is renamed to superblockFileName. */
export function superblockTempName(runId: string): string {
  return `.${superblockFileName}.plugcheck-${runId}.tmp`
}

const superblockTemp = /^\.superblock\.plugcheck-[0-9a-f]{16}\.tmp$/

/** Whether name is a superblock's temporary name (of any run). */
export function isSuperblockTempName(name: string): boolean {
  return superblockTemp.test(name)
}

const recordName = /^rec-([1-9][0-9]{0,15})$/
const tempName = /^\.rec-([1-9][0-9]{0,15})\.tmp$/

/** The seq a record file's name carries, or null for any other name (or a seq no run reaches). */
export function seqOfRecordFile(name: string): number | null {
  return seqOf(recordName.exec(name)?.[1])
}

/** The seq a temporary record file's name carries, or null. */
export function seqOfTempFile(name: string): number | null {
  return seqOf(tempName.exec(name)?.[1])
}

function seqOf(digits: string | undefined): number | null {
  if (digits === undefined) return null
  const seq = Number(digits)
  return Number.isSafeInteger(seq) && seq <= maxFileSeq ? seq : null
}

/** The record file step `seq` deletes (recycling), or null while the window is not full. */
export function recycledBy(seq: number, keep: number): number | null {
  return seq > keep ? seq - keep : null
}
