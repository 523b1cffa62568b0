/**
 * The document `plugcheck bench --json` prints, defined once. Scripts depend on it; the types the
 * bench modules build are inferred from it, so the code cannot drift from the schema.
 *
 * Units are last in every name: opsPerSec, usecsPerOp, latencyUsP99, recordSizeBytes.
 * A row that did not run has status "n/a" (the platform lacks the method) or "n/a*" (the file
 * system refused it, e.g. O_DIRECT), a reason, and null figures.
 */
import { z } from 'zod'
import { methodNames } from '../native/methods/types.js'

export const benchFormatVersion = 1

export type BlockDeviceInfo = {
  name: string
  partition: string | null
  model: string | null
  vendor: string | null
  driver: string | null
  writeCache: string | null
  fua: boolean | null
  rotational: boolean | null
  logicalBlockBytes: number | null
  physicalBlockBytes: number | null
  underlying: BlockDeviceInfo[]
}

export const blockDeviceSchema: z.ZodType<BlockDeviceInfo> = z.lazy(() =>
  z.object({
    /** Kernel name, e.g. "vda", "nvme0n1", "dm-0". */
    name: z.string(),
    /** The partition the file system sits on, when it is one ("sda2"). */
    partition: z.string().nullable(),
    model: z.string().nullable(),
    vendor: z.string().nullable(),
    driver: z.string().nullable(),
    /** queue/write_cache: "write back" is a volatile cache that each sync must flush. */
    writeCache: z.string().nullable(),
    fua: z.boolean().nullable(),
    rotational: z.boolean().nullable(),
    logicalBlockBytes: z.number().int().positive().nullable(),
    physicalBlockBytes: z.number().int().positive().nullable(),
    /** Devices under a stacked one (dm, md), each described the same way. */
    underlying: z.array(blockDeviceSchema),
  }),
)

export const fingerprintSchema = z.object({
  os: z.object({
    platform: z.string(),
    kernel: z.string(),
    kernelVersion: z.string(),
    arch: z.string(),
    distribution: z.string().nullable(),
  }),
  bootId: z.string().nullable(),
  /** A hypervisor was detected: device facts such as "rotational" are then whatever the host chose to say. */
  virtualMachine: z.boolean(),
  target: z.object({
    path: z.string(),
    fileSystem: z.object({
      /** From the mount table where known ("ext4"), else from the statfs magic. */
      type: z.string(),
      /** statfs f_type, "0xef53". */
      magic: z.string().regex(/^0x[0-9a-f]+$/),
      mountPoint: z.string().nullable(),
      source: z.string().nullable(),
      mountOptions: z.array(z.string()),
      superOptions: z.array(z.string()),
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
