/**
 * The table of contents: pg_test_fsync's sections in its order, with its labels, plus the rows it
 * lacks (buffered open_datasync/open_sync, pwritev2 RWF_DSYNC). Each row names the method whose
 * availability decides whether it runs and the shape of one op (see ops.ts).
 */
import type { MethodName } from '../../native/registry.js'

export type OpShape =
  /** Descriptor opened with O_DSYNC/O_SYNC: every pwrite is durable when it returns. */
  | 'sync-at-open'
  /** pwrite each piece, then one fdatasync or fsync for the op. */
  | 'write-then-sync'
  /** pwritev2 with RWF_DSYNC for each piece. */
  | 'pwritev2-dsync'
  /** pwrite only. */
  | 'write-only'
  /** open, pwrite, fsync, close, then open and close (pg_test_fsync's "write, fsync, close"). */
  | 'write-fsync-close'
  /** open, pwrite, close, open, fsync, close (fsync on a descriptor that did not write). */
  | 'write-close-fsync'
  /**
   * write --pattern files' record (record/files-layout.ts): create a new file (O_EXCL, the method's
   * open flags), write, the method's sync, close, rename to its final name, delete the one
   * metadataKeptFiles back, the method's directory sync (native/methods.ts directorySyncs).
   */
  | 'create-rename'

export interface RowSpec {
  readonly id: string
  readonly label: string
  readonly method: MethodName
  readonly direct: boolean
  readonly durable: boolean
  readonly shape: OpShape
  readonly writesPerOp: number
  readonly writeBytes: number
}

export interface SectionSpec {
  readonly id: string
  /** Printed above the rows, as pg_test_fsync does. */
  readonly title: string
  /** What its rows measure, in a few words: bench's progress names it beside the row's label. */
  readonly brief: string
  readonly rows: readonly RowSpec[]
}

/** "8kB" as pg_test_fsync writes sizes; "512B" below a kilobyte. */
export function kilobytesLabel(bytes: number): string {
  return bytes % 1024 === 0 ? `${bytes / 1024}kB` : `${bytes}B`
}

/** The rows of the one- and two-write sections, in wal_sync_method preference order as pg_test_fsync lists them. */
function syncMethodRows(sectionId: string, writesPerOp: number, recordSizeBytes: number): RowSpec[] {
  const row = (name: string, label: string, method: MethodName, shape: OpShape, direct: boolean): RowSpec => ({
    id: `${sectionId}/${name}`,
    label,
    method,
    direct,
    durable: true,
    shape,
    writesPerOp,
    writeBytes: recordSizeBytes,
  })
  return [
    // pg_test_fsync's open_datasync and open_sync rows use O_DIRECT; PostgreSQL itself writes WAL
    // buffered unless wal_level is minimal, so both rows are shown.
    row('open_datasync-buffered', 'open_datasync (buffered)', 'open_datasync', 'sync-at-open', false),
    row('open_datasync-direct', 'open_datasync (direct)', 'open_datasync', 'sync-at-open', true),
    row('fdatasync', 'fdatasync', 'fdatasync', 'write-then-sync', false),
    row('fsync', 'fsync', 'fsync', 'write-then-sync', false),
    row('fsync_writethrough', 'fsync_writethrough', 'fsync_writethrough', 'write-then-sync', false),
    row('open_sync-buffered', 'open_sync (buffered)', 'open_sync', 'sync-at-open', false),
    row('open_sync-direct', 'open_sync (direct)', 'open_sync', 'sync-at-open', true),
    row('pwritev2_dsync', 'pwritev2 RWF_DSYNC', 'pwritev2_dsync', 'pwritev2-dsync', false),
    // Not durability promises (an ordering barrier; data out without a device flush): measured to show
    // what they cost next to the real thing, never judged as syncs.
    { ...row('barrier_fsync', 'barrier_fsync', 'barrier_fsync', 'write-then-sync', false), durable: false },
    { ...row('flush_data_only', 'flush_data_only', 'flush_data_only', 'write-then-sync', false), durable: false },
  ]
}

/** Files the metadata section keeps in its directory: each op past them deletes the oldest, as write --pattern files recycles. */
export const metadataKeptFiles = 16

/** The metadata section: per method, a file created, synced, renamed and its directory synced per op; none is its baseline. */
function metadataRows(recordSizeBytes: number): RowSpec[] {
  const row = (method: MethodName, label: string, durable: boolean): RowSpec => ({
    id: `metadata/${method}`,
    label,
    method,
    direct: false,
    durable,
    shape: 'create-rename',
    writesPerOp: 1,
    writeBytes: recordSizeBytes,
  })
  return [
    row('open_datasync', 'open_datasync', true),
    row('fdatasync', 'fdatasync', true),
    row('fsync', 'fsync', true),
    row('fsync_writethrough', 'fsync_writethrough', true),
    row('open_sync', 'open_sync', true),
    row('pwritev2_dsync', 'pwritev2 RWF_DSYNC', true),
    row('barrier_fsync', 'barrier_fsync', false),
    row('flush_data_only', 'flush_data_only', false),
    row('none', 'none (no sync)', false),
  ]
}

/** The open_sync size ladder: 2 records' worth (16 kB by default) in 1, 2, 4, 8 and 16 writes. */
export const openSyncPieceCounts = [1, 2, 4, 8, 16] as const

export function benchPlan(recordSizeBytes: number): SectionSpec[] {
  const record = kilobytesLabel(recordSizeBytes)
  const totalBytes = 2 * recordSizeBytes
  const preferenceNote = "(in wal_sync_method preference order, except fdatasync is Linux's default)"
  return [
    {
      id: 'one-write',
      brief: `one ${record} write`,
      title: `Compare file sync methods using one ${record} write:\n${preferenceNote}`,
      rows: syncMethodRows('one-write', 1, recordSizeBytes),
    },
    {
      id: 'two-writes',
      brief: `two ${record} writes`,
      title: `Compare file sync methods using two ${record} writes:\n${preferenceNote}`,
      rows: syncMethodRows('two-writes', 2, recordSizeBytes),
    },
    {
      id: 'open-sync-sizes',
      brief: `${kilobytesLabel(totalBytes)} in different write sizes`,
      title: `Compare open_sync with different write sizes:\n(the cost of writing ${kilobytesLabel(totalBytes)} in different write sizes; O_DIRECT, as pg_test_fsync does)`,
      rows: openSyncPieceCounts.map((pieces) => {
        const pieceBytes = Math.floor(totalBytes / pieces)
        return {
          id: `open-sync-sizes/${pieces}x${pieceBytes}`,
          label: `${String(pieces).padStart(2)} * ${kilobytesLabel(pieceBytes).padStart(4)} open_sync write${pieces === 1 ? '' : 's'}`,
          method: 'open_sync',
          direct: true,
          durable: true,
          shape: 'sync-at-open',
          writesPerOp: pieces,
          writeBytes: pieceBytes,
        }
      }),
    },
    {
      id: 'non-write-descriptor',
      brief: 'fsync on a non-write descriptor',
      title:
        'Test if fsync on non-write file descriptor is honored:\n(If the times are similar, fsync() can sync data written on a different\ndescriptor.)',
      rows: [
        {
          id: 'non-write-descriptor/write-fsync-close',
          label: 'write, fsync, close',
          method: 'fsync',
          direct: false,
          durable: true,
          shape: 'write-fsync-close',
          writesPerOp: 1,
          writeBytes: recordSizeBytes,
        },
        {
          id: 'non-write-descriptor/write-close-fsync',
          label: 'write, close, fsync',
          method: 'fsync',
          direct: false,
          durable: true,
          shape: 'write-close-fsync',
          writesPerOp: 1,
          writeBytes: recordSizeBytes,
        },
      ],
    },
    {
      id: 'non-sync',
      brief: `non-synced ${record} writes`,
      title: `Non-sync'ed ${record} writes:`,
      rows: [
        {
          id: 'non-sync/write',
          label: 'write',
          method: 'none',
          direct: false,
          durable: false,
          shape: 'write-only',
          writesPerOp: 1,
          writeBytes: recordSizeBytes,
        },
      ],
    },
    {
      id: 'metadata',
      brief: `${record} files created, renamed, directory synced`,
      title: `Compare metadata syncs: one ${record} file per op, created, written, synced, renamed, directory synced:\n(write --pattern files' record; the method's sync on the file and on the directory, none for the baseline)`,
      rows: metadataRows(recordSizeBytes),
    },
  ]
}
