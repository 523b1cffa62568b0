/**
 * What pg_test_fsync cannot say: whether a figure is too good to be true. Speed alone never proves
 * a flush is honoured (only a plug test does), but some speeds prove it is not:
 *
 *   in-memory-file-system          the target is tmpfs/ramfs: nothing survives a power cut.
 *   faster-than-flush              the device reports a volatile write cache, yet a durable op
 *                                  (per sync it implies) completes faster than any such device can
 *                                  move data to stable storage.
 *   indistinguishable-from-no-sync a durable op costs about what a write without any sync costs:
 *                                  the sync did not reach a device at all (a metadata row: what
 *                                  the same create, rename and delete cost without any sync).
 *   same-call                      rows that run the same kernel path on this platform (a static
 *                                  table): a difference between them is noise, not a finding.
 *
 * Decisions use p50 latency, which one stall or a noisy neighbour does not move.
 */
import { hasVolatileWriteCache, isRotating } from '../env/fingerprint.js'
import { kilobytesLabel } from './sections/plan.js'
import type { PlausibilityFlag, RowResult, SectionResult } from './schema.js'
import type { Fingerprint } from '../env/fingerprint-schema.js'

/**
 * Fastest plausible flush of a volatile write cache, in microseconds per sync. A rotating disk must
 * bring the platter under the head (a 15,000 rpm revolution takes 4 ms); flash must program NAND.
 * Both floors are far below what honest devices show, so an honest device is never flagged.
 */
export const flushFloorUsRotating = 1000
export const flushFloorUsSolidState = 15

/** A durable write within this of a non-synced one (per write, p50) did not reach a device. */
export const maxNoSyncRatio = 2
export const noSyncMarginUs = 5

interface SameCallGroup {
  readonly rowNames: readonly string[]
  readonly why: string
}

/** Rows (of the one-write section) that are the same kernel path, per platform. */
export const sameCallTable: Partial<Record<NodeJS.Platform, readonly SameCallGroup[]>> = {
  linux: [
    {
      rowNames: ['fdatasync', 'open_datasync-buffered', 'pwritev2_dsync'],
      why: "O_DSYNC and RWF_DSYNC make a buffered write run fdatasync's path (generic_write_sync, then vfs_fsync_range with datasync) on the range just written",
    },
    {
      rowNames: ['fsync', 'open_sync-buffered'],
      why: "O_SYNC makes a buffered write run fsync's path (generic_write_sync, then vfs_fsync_range without datasync) on the range just written",
    },
  ],
  win32: [
    {
      rowNames: ['fsync', 'fsync_writethrough'],
      why: 'both are FlushFileBuffers after the write, as in PostgreSQL',
    },
  ],
  darwin: [
    {
      rowNames: ['open_sync-buffered', 'open_datasync-buffered'],
      why: 'xnu treats O_DSYNC as O_SYNC (bsd/vfs/vfs_vnops.c)',
    },
  ],
}

const platformNames: Partial<Record<NodeJS.Platform, string>> = {
  linux: 'Linux',
  win32: 'Windows',
  darwin: 'macOS',
  freebsd: 'FreeBSD',
  openbsd: 'OpenBSD',
}

/** Methods whose op is writes then one sync call. */
const syncAfterWrites: ReadonlySet<string> = new Set(['fsync', 'fdatasync', 'fsync_writethrough', 'barrier_fsync', 'flush_data_only'])

/** How many durability points (flushes) one op of the row implies. */
function syncsPerOp(row: RowResult): number {
  return syncAfterWrites.has(row.method) ? 1 : row.writesPerOp
}

function formatUs(us: number): string {
  return us < 10 ? us.toFixed(1) : us.toFixed(0)
}

/** "fdatasync" in the one-write section, "fdatasync (2 x 8kB writes)" in the two-write one, "fdatasync (files ...)" in the metadata one. */
function rowName(row: RowResult, section: SectionResult): string {
  if (section.id === 'metadata') return `${row.label} (files created, renamed, directory synced)`
  return section.id === 'two-writes' ? `${row.label} (${row.writesPerOp} x ${kilobytesLabel(row.writeBytes)} writes)` : row.label
}

function joinNames(names: readonly string[]): string {
  return names.length <= 2 ? names.join(' and ') : `${names.slice(0, -1).join(', ')} and ${names.at(-1)}`
}

export function assessPlausibility(
  sections: readonly SectionResult[],
  fingerprint: Fingerprint,
  platform: NodeJS.Platform = process.platform,
): PlausibilityFlag[] {
  const flags: PlausibilityFlag[] = []
  const measured = (row: RowResult): row is RowResult & { latencyUsP50: number } => row.status === 'ok' && row.latencyUsP50 !== null
  const durableRows = sections.flatMap((section) =>
    section.rows.filter((row) => row.durable && measured(row)).map((row) => ({ row, section })),
  )

  if (fingerprint.target.inMemory) {
    flags.push({
      kind: 'in-memory-file-system',
      rowIds: durableRows.map(({ row }) => row.id),
      message: `${fingerprint.target.path} is on ${fingerprint.target.fileSystem.type}, which lives in memory: nothing written there survives a power cut, whatever the sync method. These figures measure software, not storage.`,
    })
  }

  const baseline = sections.flatMap((s) => s.rows).find((row) => !row.durable && measured(row))
  // The metadata section has a baseline of its own: the same creates, renames and deletes without a
  // sync cost far more than a plain write, so its durable rows are set against its none row (the
  // plain write's when that did not run: a lower bound still).
  const metadataBaseline = sections.find((s) => s.id === 'metadata')?.rows.find((row) => row.method === 'none' && measured(row))
  const volatileCache = hasVolatileWriteCache(fingerprint.device)
  // Virtual disks (virtio-blk, most virtual SCSI) say "rotational" by default, whatever backs them.
  const floorUs = isRotating(fingerprint.device) && !fingerprint.virtualMachine ? flushFloorUsRotating : flushFloorUsSolidState
  for (const { row, section } of durableRows) {
    const p50Us = row.latencyUsP50!
    const perSyncUs = p50Us / syncsPerOp(row)
    if (volatileCache && perSyncUs < floorUs) {
      const perSync = syncsPerOp(row) === 1 ? '' : ` (${formatUs(perSyncUs)} us per sync)`
      flags.push({
        kind: 'faster-than-flush',
        rowIds: [row.id],
        message: `${rowName(row, section)} at ${formatUs(p50Us)} us/op${perSync} on a device with a volatile write cache: flushes are not reaching stable storage; run a plug test`,
      })
      continue
    }
    // Reopening rows carry open/close costs the baseline lacks; they are judged by the rule above only.
    const sectionBaseline = (section.id === 'metadata' ? metadataBaseline : undefined) ?? baseline
    if (sectionBaseline === undefined || section.id === 'non-write-descriptor') continue
    const baselineUs = sectionBaseline.latencyUsP50!
    const perWriteUs = p50Us / row.writesPerOp
    if (perWriteUs <= Math.max(maxNoSyncRatio * baselineUs, baselineUs + noSyncMarginUs)) {
      flags.push({
        kind: 'indistinguishable-from-no-sync',
        rowIds: [row.id],
        message: `${rowName(row, section)} at ${formatUs(p50Us)} us/op is indistinguishable from ${sectionBaseline === metadataBaseline ? 'the same files made without any sync' : 'a write without any sync'} (${formatUs(baselineUs)} us): the sync is not reaching a device; run a plug test`,
      })
    }
  }

  const oneWrite = sections.find((s) => s.id === 'one-write')
  for (const group of sameCallTable[platform] ?? []) {
    const rows = group.rowNames
      .map((name) => oneWrite?.rows.find((row) => row.id === `one-write/${name}`))
      .filter((row): row is RowResult => row !== undefined && row.status === 'ok')
    if (rows.length < 2) continue
    flags.push({
      kind: 'same-call',
      rowIds: rows.map((row) => row.id),
      message: `${joinNames(rows.map((row) => row.label))} are the same call on ${platformNames[platform] ?? platform}: ${group.why}; a difference between them is noise`,
    })
  }
  return flags
}
