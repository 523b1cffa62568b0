/**
 * The writer's watch over its own data files during a run: at each housekeeping tick (and before the
 * run is called complete) every file is stat'ed, the head of its superblock read back, and one record
 * the file must hold read back by its stamp.
 *
 * Two different things can make a file lose what the writer put there, and verify must hear which:
 *   - another program changed the file (deleted, replaced, truncated it, wrote another run's
 *     superblock into it, took its lock): the storage is not to blame, verify judges nothing;
 *   - the storage lost an acknowledged record (or the superblock synced before the first record)
 *     while the run was going: our own file, still ours by every sign, reads back wrong. That is the
 *     finding plugcheck exists for, and verify must judge it (FAIL), not hide it as tampering.
 * So another program is blamed only on evidence of one. Decision table, first row that holds wins:
 *
 *   check                                                          finding
 *   path missing, or stat fails                                    changed  (deleted, or cannot be inspected)
 *   path names another file (dev/ino differ from the lock's)       changed  (replaced)
 *   size below the bytes records reach                             changed  (truncated)
 *   overwrite: fewer bytes allocated than were preallocated        changed  (a hole punched)
 *   superblock head reads back unlike ours:
 *     a valid superblock of another run                            changed  (another run's superblock written over ours)
 *   superblock or a sampled record cannot be read (EIO)            unreadable (a failed call: the run stops as after a failed write)
 *   superblock or a sampled record reads back unlike ours, and:
 *     the file's lock can be taken by a new descriptor             changed  (our lock was lost: someone else may hold the file)
 *     fewer bytes are allocated than records were written          changed  (a hole: truncated and extended again by the
 *                                                                            next record, or a hole punched)
 *     otherwise                                                    lost     (the storage lost it while running)
 *   everything as written                                          none
 *
 * Fault model and limits: a truncation is soon hidden by the next append, which extends the file over
 * a hole; the allocation (st_blocks) shows the hole where the file system keeps sparse files (ext4,
 * xfs, btrfs, tmpfs, APFS). Where it does not (NTFS extends a file with allocated zeros) or where
 * st_blocks trails the writes (ZFS, until its transaction group commits), a truncation hidden that
 * way is taken for a storage loss, or a storage loss for a hole. Writing zeros or old bytes into the
 * file in place through the same inode cannot be told apart from the storage losing them, and is
 * judged as the storage's.
 *
 * A files run (--pattern files) is watched through its superblock file, the one file of its directory
 * that lives as long as the run: the same checks, its lock, identity, size and head. Its record files
 * are not read back here: each is made, published, deleted by the loop itself (recycling), and judged
 * by verify, name by name; the loop's own calls would fail on one that vanished under it.
 */
import { readSync, statSync, type Stats } from 'node:fs'
import { join } from 'node:path'
import { superblockFileName } from '../../record/files-layout.js'
import { nativePort } from '../../native/index.js'
import { decodeSuperblock, type RunMeta } from '../../record/format.js'
import { readStamp, slotOf, slotOffsetBytes, stampBytes, type RunKey } from '../../record/records.js'
import { describeSystemError } from '../../base/errors.js'

/** What the watch needs of a run the writer is writing. */
export interface WatchedRun {
  readonly meta: RunMeta
  readonly key: RunKey
  /** The data file's identity when the run began (its lock's): a different one at the path means someone replaced it. */
  readonly identity: { readonly dev: number; readonly ino: number }
  /** How far into the file records have been written: a shorter file means someone truncated it. */
  readonly endBytes: number
  /**
   * Bytes the file system had allocated to the file once it was created (before the first record),
   * at most its size: speculative preallocation past the end (XFS) is given back later, not a hole.
   */
  readonly allocatedAtStartBytes: number
  /** The first bytes of the superblock as written (superblockHeadBytes of them, or the whole block if shorter). */
  readonly superblockHead: Buffer
  /** A read-only descriptor of the same file. */
  readonly checkFd: number
  /** Highest seq reported to the listener. */
  readonly lastSeq: number
}

export type FileFinding =
  /** Another program changed the file: the run ends as 'file-changed', verify judges nothing. */
  | { readonly kind: 'changed'; readonly message: string }
  /** Reading the file back failed: a failed call, the run stops as after a failed write. */
  | { readonly kind: 'unreadable'; readonly run: WatchedRun; readonly error: unknown; readonly message: string }
  /** The storage lost an acknowledged record (seq > 0) or the superblock (seq 0) of our own file while the run was going. */
  | { readonly kind: 'lost'; readonly run: WatchedRun; readonly seq: number; readonly slot: number | null; readonly message: string }

/**
 * The superblock's magic, metadata length, checksum and metadata sit in its first bytes (the rest is
 * zeros): reading this much each tick sees it rewritten without reading a 1 MiB block every 50 ms.
 */
export const superblockHeadBytes = 4096

const scratch = Buffer.alloc(superblockHeadBytes)

/** Looks at every run's file; the first finding, or null when every file is as the writer left it. */
export function watchFiles(runs: readonly WatchedRun[]): FileFinding | null {
  for (const run of runs) {
    const finding = watchFile(run)
    if (finding !== null) return finding
  }
  return null
}

function watchFile(run: WatchedRun): FileFinding | null {
  const path = watchedPath(run)
  let stats: Stats | undefined
  try {
    stats = statSync(path, { throwIfNoEntry: false })
  } catch (error) {
    return changed(
      `the data file ${path} can no longer be inspected during the run (${describeSystemError(error)}): something else changed it`,
    )
  }
  if (stats === undefined) return changed(`the data file ${path} was deleted during the run, by something other than plugcheck`)
  if (stats.ino !== run.identity.ino || stats.dev !== run.identity.dev)
    return changed(`the data file ${path} was replaced by another file during the run, by something other than plugcheck`)
  if (stats.size < run.endBytes) {
    return changed(
      `the data file ${path} was truncated to ${n(stats.size)} bytes during the run (records reach ${n(run.endBytes)}), by something other than plugcheck`,
    )
  }
  // An overwrite file was preallocated and synced whole before the first record, and only ever
  // overwritten in place: its allocation never shrinks unless someone punched a hole in it. Looked
  // at every tick, since a record the hole took is read back only if it is the one sampled.
  if (run.meta.pattern === 'overwrite' && stats.blocks * 512 + run.meta.recordSizeBytes < run.allocatedAtStartBytes) {
    return changed(holeMessage(path, stats.blocks * 512, run.allocatedAtStartBytes))
  }
  const superblock = checkSuperblock(run)
  if (superblock !== null && superblock.kind !== 'wrong') return superblock
  let record: Wrong | FileFinding | null = null
  for (let i = 0; superblock === null && record === null && i < recordsCheckedPerTick(run); i++) record = checkRecord(run)
  if (record !== null && record.kind !== 'wrong') return record
  const wrong = superblock ?? record
  if (wrong === null) return null
  return evidenceOfAnother(run, stats) ?? { kind: 'lost', run, seq: wrong.seq, slot: wrong.slot, message: lostMessage(run, wrong) }
}

/** Something of ours read back unlike what was written: the superblock (seq 0) or a record. */
interface Wrong {
  readonly kind: 'wrong'
  readonly seq: number
  readonly slot: number | null
  readonly offsetBytes: number
  /** What the bytes are instead: "zeros", "record 12 of this run", ... */
  readonly found: string
}

function checkSuperblock(run: WatchedRun): Wrong | FileFinding | null {
  const head = run.superblockHead
  const read = readAt(run, head.length, 0)
  if (typeof read !== 'number') return read
  const bytes = scratch.subarray(0, read)
  if (bytes.equals(head)) return null
  const reading = decodeSuperblock(bytes)
  if (reading.kind === 'valid' && reading.meta.runId !== run.meta.runId) {
    return changed(
      `the superblock of the data file ${run.meta.path} now holds run ${reading.meta.runId}, not run ${run.meta.runId}: something other than plugcheck wrote it during the run`,
    )
  }
  const found =
    read < head.length
      ? `${n(read)} of its ${n(head.length)} first bytes`
      : bytes.every((b) => b === 0)
        ? 'zeros'
        : `damaged bytes (${reading.kind === 'valid' ? 'another copy of this run' : reading.detail})`
  return { kind: 'wrong', seq: 0, slot: null, offsetBytes: 0, found }
}

/** One record the file must hold now (see sampleSeq), checked by its stamp: its run and seq. */
function checkRecord(run: WatchedRun): Wrong | FileFinding | null {
  const seq = sampleSeq(run)
  if (seq === 0) return null
  const slot = slotOf(run.key, run.meta.pattern, seq, run.meta.slotCount)
  const offsetBytes = slotOffsetBytes(run.meta.recordSizeBytes, slot)
  const read = readAt(run, stampBytes, offsetBytes, seq)
  if (typeof read !== 'number') return read
  const stamp = read === stampBytes ? readStamp(scratch, 0) : null
  if (stamp !== null && stamp.seq === seq && stamp.runLo === run.key.lo && stamp.runHi === run.key.hi) return null
  let found: string
  if (read < stampBytes) found = 'nothing (the file ends before it)'
  else if (stamp === null) found = scratch.subarray(0, stampBytes).every((b) => b === 0) ? 'zeros' : 'bytes that are not a record of ours'
  else if (stamp.runLo !== run.key.lo || stamp.runHi !== run.key.hi) found = "another run's record"
  else found = `record ${n(stamp.seq)} of this run`
  return { kind: 'wrong', seq, slot, offsetBytes, found }
}

/** Bytes read into scratch, or the finding when the read failed. */
function readAt(run: WatchedRun, lengthBytes: number, offsetBytes: number, seq = 0): number | FileFinding {
  try {
    return readSync(run.checkFd, scratch, 0, lengthBytes, offsetBytes)
  } catch (error) {
    const what = seq === 0 ? 'its superblock' : `record ${n(seq)}`
    return {
      kind: 'unreadable',
      run,
      error,
      message: `pread failed on ${run.meta.path} after seq ${run.lastSeq} (method ${run.meta.method}): ${describeSystemError(error)}, reading back ${what} at byte ${n(offsetBytes)}`,
    }
  }
}

/**
 * Signs that another program had the file, looked for only once something of ours read back wrong:
 * our lock taken from us, or a hole where records were written (a truncation the next append hid).
 */
function evidenceOfAnother(run: WatchedRun, stats: Stats): FileFinding | null {
  const path = watchedPath(run)
  if (lockIsFree(path))
    return changed(
      `the lock plugcheck held on the data file ${path} was lost during the run: something other than plugcheck may have had the file`,
    )
  const allocatedBytes = stats.blocks * 512
  const expectedBytes = Math.max(run.allocatedAtStartBytes, run.meta.pattern === 'append' ? run.endBytes : 0)
  // One record of slack: a file system may round the last block of a record differently.
  if (allocatedBytes + run.meta.recordSizeBytes < expectedBytes) {
    return changed(holeMessage(path, allocatedBytes, expectedBytes))
  }
  return null
}

function holeMessage(path: string, allocatedBytes: number, expectedBytes: number): string {
  return `the data file ${path} has a hole where records were written (${n(allocatedBytes)} bytes allocated, ${n(expectedBytes)} written): it was truncated and extended again, or a hole was punched in it, during the run, by something other than plugcheck`
}

/** Whether a new descriptor can take the lock the writer holds: then the writer no longer holds it. */
function lockIsFree(path: string): boolean {
  let lock
  try {
    lock = nativePort().lockExclusive(path, false)
  } catch {
    return false // cannot tell: no evidence
  }
  if (lock === 'busy' || lock === 'missing') return false
  lock.release()
  return true
}

function lostMessage(run: WatchedRun, wrong: Wrong): string {
  const m = run.meta
  const what =
    wrong.seq === 0
      ? `the superblock of ${m.path} (written and fsynced before the first record) reads back as ${wrong.found}`
      : `acknowledged record ${n(wrong.seq)} of run ${m.runId} (${m.method}) reads back as ${wrong.found} from slot ${n(wrong.slot!)} of ${m.path} (byte ${n(wrong.offsetBytes)})`
  return `the storage lost data while the run was going: ${what}, though the file is still the one written, not shorter, its superblock and lock still ours`
}

/**
 * Records read back per look, at random among those the file must hold (append): a storage that
 * drops a percent of its flushed blocks is seen within seconds, at a few 4 KiB reads per 50 ms. In
 * overwrite only the latest record's slot is sure (see sampleSeq): one.
 */
function recordsCheckedPerTick(run: WatchedRun): number {
  if (run.meta.pattern === 'files') return 0 // its records are files of their own (see the header)
  return run.meta.pattern === 'append' ? 4 : 1
}

/** The file watched: the data file, or a files run's superblock file. */
function watchedPath(run: WatchedRun): string {
  return run.meta.pattern === 'files' ? join(run.meta.path, superblockFileName) : run.meta.path
}

/**
 * A seq whose record must be in the file now, its slot not yet rewritten by a later seq: any of the
 * last slotCount seqs in append (slots in order), only the latest in overwrite (slots at random).
 */
function sampleSeq(run: WatchedRun): number {
  if (run.lastSeq === 0) return 0
  if (run.meta.pattern !== 'append') return run.lastSeq
  const oldest = Math.max(1, run.lastSeq - run.meta.slotCount + 1)
  return oldest + Math.floor(Math.random() * (run.lastSeq - oldest + 1))
}

const changed = (message: string): FileFinding => ({ kind: 'changed', message })
const n = (value: number): string => value.toLocaleString('en-US')
