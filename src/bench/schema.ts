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
import { fingerprintSchema } from '../env/fingerprint-schema.js'

export const benchFormatVersion = 1

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
