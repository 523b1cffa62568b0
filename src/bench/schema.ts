/**
 * The document `plugcheck bench --json` prints, defined once. Scripts depend on it; the types the
 * bench modules build are inferred from it, so the code cannot drift from the schema.
 *
 * Units are last in every name: opsPerSec, usecsPerOp, latencyUsP99, recordSizeBytes.
 * A row that did not run has status "n/a" (the platform lacks the method) or "n/a*" (the file
 * system refused it, e.g. O_DIRECT), a reason, and null figures.
 */
import { z } from 'zod'
import { methodNames } from '../native/methods.js'

export const benchFormatVersion = 1

export type BlockDeviceInfo = {
  name: string
  partition: string | null
  model: string | null
  vendor: string | null
  /** Absent in fingerprints from before it was collected. */
  firmware?: string | null
  driver: string | null
  writeCache: string | null
  fua: boolean | null
  rotational: boolean | null
  logicalBlockBytes: number | null
  physicalBlockBytes: number | null
  underlying: BlockDeviceInfo[]
}

/**
 * Bounds on what a fingerprint may hold: it crosses the network in a writer's announcement and is
 * stored and replayed by the listener, so every string, list and level of device stacking is capped.
 */
export const maxFingerprintStringLength = 4096
export const maxFingerprintListLength = 64
/** dm on md on partitions is three or four levels; nothing real nests this deep. */
export const maxDeviceStackDepth = 8
const boundedString = z.string().max(maxFingerprintStringLength)

/** A device with at most `depth` levels of devices under it. */
function blockDeviceSchemaOfDepth(depth: number): z.ZodType<BlockDeviceInfo> {
  return z.object({
    /** Kernel name, e.g. "vda", "nvme0n1", "dm-0". */
    name: boundedString,
    /** The partition the file system sits on, when it is one ("sda2"). */
    partition: boundedString.nullable(),
    model: boundedString.nullable(),
    vendor: boundedString.nullable(),
    /** The device's firmware revision (NVMe firmware_rev, SCSI/SATA rev); optional, so older fingerprints still validate. */
    firmware: boundedString.nullable().optional(),
    driver: boundedString.nullable(),
    /** queue/write_cache: "write back" is a volatile cache that each sync must flush. */
    writeCache: boundedString.nullable(),
    fua: z.boolean().nullable(),
    rotational: z.boolean().nullable(),
    logicalBlockBytes: z.number().int().positive().nullable(),
    physicalBlockBytes: z.number().int().positive().nullable(),
    /** Devices under a stacked one (dm, md), each described the same way. */
    underlying: depth === 0 ? z.array(z.never()).max(0) : z.array(blockDeviceSchemaOfDepth(depth - 1)).max(maxFingerprintListLength),
  })
}

export const blockDeviceSchema: z.ZodType<BlockDeviceInfo> = blockDeviceSchemaOfDepth(maxDeviceStackDepth)

export const fingerprintSchema = z.object({
  os: z.object({
    platform: boundedString,
    kernel: boundedString,
    kernelVersion: boundedString,
    arch: boundedString,
    distribution: boundedString.nullable(),
  }),
  bootId: boundedString.nullable(),
  /** A hypervisor was detected: device facts such as "rotational" are then whatever the host chose to say. */
  virtualMachine: z.boolean(),
  target: z.object({
    path: boundedString,
    fileSystem: z.object({
      /** From the mount table where known ("ext4"), else from the statfs magic. */
      type: boundedString,
      /** statfs f_type, "0xef53". */
      magic: boundedString.regex(/^0x[0-9a-f]+$/).nullable(),
      mountPoint: boundedString.nullable(),
      source: boundedString.nullable(),
      mountOptions: z.array(boundedString).max(maxFingerprintListLength),
      superOptions: z.array(boundedString).max(maxFingerprintListLength),
    }),
    /** tmpfs or ramfs: nothing there survives a power cut. */
    inMemory: z.boolean(),
  }),
  device: blockDeviceSchema.nullable(),
})
export type Fingerprint = z.infer<typeof fingerprintSchema>

export const rowStatuses = ['ok', 'n/a', 'n/a*'] as const

export const rowSchema = z.object({
  /** Stable id, "<section>/<row>", e.g. "one-write/fdatasync". */
  id: z.string(),
  /** What pg_test_fsync (or we, for rows it lacks) print. */
  label: z.string(),
  /** The wal_sync_method-style name whose availability decides the row; "none" for non-synced writes. */
  method: z.enum(methodNames),
  direct: z.boolean(),
  /** Whether the row claims durability when an op returns. */
  durable: z.boolean(),
  writesPerOp: z.number().int().positive(),
  writeBytes: z.number().int().positive(),
  /** The system calls of one op, in order. */
  calls: z.string(),
  status: z.enum(rowStatuses),
  reason: z.string().nullable(),
  opCount: z.number().int().nonnegative().nullable(),
  elapsedS: z.number().nonnegative().nullable(),
  opsPerSec: z.number().nonnegative().nullable(),
  usecsPerOp: z.number().nonnegative().nullable(),
  latencyUsP50: z.number().nonnegative().nullable(),
  latencyUsP99: z.number().nonnegative().nullable(),
  latencyUsMax: z.number().nonnegative().nullable(),
})
export type RowResult = z.infer<typeof rowSchema>

export const sectionSchema = z.object({
  id: z.string(),
  title: z.string(),
  rows: z.array(rowSchema),
})
export type SectionResult = z.infer<typeof sectionSchema>

export const flagKinds = [
  /** The target lives in memory (tmpfs, ramfs). */
  'in-memory-file-system',
  /** A durable row costs about what a write without any sync costs. */
  'indistinguishable-from-no-sync',
  /** A durable row is faster than a device with a volatile write cache can plausibly flush. */
  'faster-than-flush',
  /** Rows that run the same kernel path on this platform (static table). */
  'same-call',
] as const

export const flagSchema = z.object({
  kind: z.enum(flagKinds),
  rowIds: z.array(z.string()),
  message: z.string(),
})
export type PlausibilityFlag = z.infer<typeof flagSchema>

export const benchReportSchema = z.object({
  tool: z.literal('plugcheck bench'),
  formatVersion: z.literal(benchFormatVersion),
  secsPerTest: z.number().positive(),
  recordSizeBytes: z.number().int().positive(),
  file: z.string(),
  fingerprint: fingerprintSchema,
  sections: z.array(sectionSchema),
  flags: z.array(flagSchema),
  /** "n/a*" explanations, as pg_test_fsync prints under its tables. */
  footnotes: z.array(z.string()),
})
export type BenchReport = z.infer<typeof benchReportSchema>
