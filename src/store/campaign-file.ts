/**
 * A campaign's durable state at the listener: <dir>/campaigns/<name>.json, rewritten whole (temporary
 * file, fsync, rename, directory fsync) at every step, so a listener killed at any moment resumes the
 * campaign where it was and no cycle is counted twice or lost. `report` reads the same file.
 *
 * The file carries its checksum (campaignFileText): a flipped bit in a cut time or a run id must not
 * resume a campaign, or report it, from values nobody wrote. Files of older listeners have none: they
 * are read as they are, but only with the schema's own fields (an unknown field there is a damaged
 * name, refused like any damage).
 */
import { z } from 'zod'
import { xxh64 } from '../record/checksum.js'
import { campaignNameSchema, campaignPhases, epochMsSchema } from '../protocol/messages.js'
import { runIdSchema } from '../record/run-id.js'
import { maxGroupRuns } from '../record/run-id.js'

/**
 * 2: `cutCommandChanges` (a campaign stopped by a failed cut resumed with another --cut-command). A
 * file of version 1 has none and loads as it is; the listener writes the next state as version 2.
 */
export const campaignFileVersion = 2

export const cycleOutcomes = [
  /** Under way. */
  'pending',
  /** The agent came back after the cut and reported its verdicts (see the runs' verdicts). */
  'verdict',
  /** No agent came back within the reboot timeout: the campaign stopped. */
  'did-not-come-back',
  /** The cut command failed (non-zero exit, or it could not start): the campaign stopped. */
  'cut-failed',
] as const

export const cycleRecordSchema = z.object({
  cycle: z.number().int().positive().max(100_000),
  /** The group the agent's writer announced for this cycle; null until it did. */
  groupId: runIdSchema.nullable(),
  runIds: z.array(runIdSchema).max(maxGroupRuns),
  host: z.string().max(255).nullable(),
  path: z.string().max(4096).nullable(),
  steadyMs: epochMsSchema.nullable(),
  /** When the cut was planned for (steady + the seeded random delay) and when the command ran. */
  plannedCutMs: epochMsSchema.nullable(),
  cutMs: epochMsSchema.nullable(),
  cutExitCode: z.number().int().nullable(),
  /** The cut command's output, the last 4 KiB. */
  cutOutput: z.string().max(4096),
  /** When the agent reported the verdicts of this cycle's runs. */
  cameBackMs: epochMsSchema.nullable(),
  outcome: z.enum(cycleOutcomes),
})
export type CycleRecord = z.infer<typeof cycleRecordSchema>

/** The most cut command changes a campaign file keeps: a campaign that made them all takes no other. */
export const maxCutCommandChanges = 10_000

/** A campaign stopped by a failed cut, resumed with another cut command: the change, and the cycle's attempt that failed. */
export const cutCommandChangeSchema = z.object({
  cycle: z.number().int().positive().max(100_000),
  atMs: epochMsSchema,
  from: z.string().min(1).max(4096),
  to: z.string().min(1).max(4096),
  /** The cycle's record as the failed cut left it (its runs are not the cycle's any more: it is written again). */
  failedAttempt: cycleRecordSchema,
})
export type CutCommandChange = z.infer<typeof cutCommandChangeSchema>

export const campaignFileSchema = z.object({
  version: z.union([z.literal(1), z.literal(campaignFileVersion)]),
  name: campaignNameSchema,
  cycles: z.number().int().positive().max(100_000),
  cutCommand: z.string().min(1).max(4096),
  /** [min, max] seconds after steady. */
  cutAfterS: z
    .tuple([z.number().nonnegative().max(86_400), z.number().nonnegative().max(86_400)])
    .refine(([a, b]) => b >= a, 'cut-after MIN-MAX runs backwards'),
  rebootTimeoutS: z.number().positive().max(86_400),
  seed: z
    .number()
    .int()
    .nonnegative()
    .max(2 ** 32 - 1),
  createdMs: epochMsSchema,
  phase: z.enum(campaignPhases),
  /** The cycle under way (1-based); cycles + 1 once done. */
  cycle: z.number().int().positive().max(100_001),
  detail: z.string().max(4096).optional(),
  history: z.array(cycleRecordSchema).max(100_000),
  /** Version 2: every change of the cut command, oldest first (absent when there was none). */
  cutCommandChanges: z.array(cutCommandChangeSchema).max(maxCutCommandChanges).optional(),
})
export type CampaignFile = z.infer<typeof campaignFileSchema>

/** The field holding the checksum: xxh64 of the other fields as compact JSON, 16 hex digits. */
const checksumField = 'xxh64'

function checksumHex(text: string): string {
  return xxh64(Buffer.from(text, 'utf8')).toString(16).padStart(16, '0')
}

/**
 * The file as written: the campaign's fields, then its checksum. The checksum covers
 * JSON.stringify of the fields, which the reader recomputes from the fields it parsed: every value is
 * a string, a finite number, a boolean, null, an array or an object with non-numeric keys, all of which
 * JSON.parse and JSON.stringify give back unchanged, in order.
 */
export function campaignFileText(file: CampaignFile): string {
  return `${JSON.stringify({ ...file, [checksumField]: checksumHex(JSON.stringify(file)) }, null, 2)}\n`
}

/**
 * What is wrong with a parsed campaign file's checksum, or undefined when it matches. A file without
 * one (an older listener's) passes only with no field the schema does not know: a checksum field
 * whose name was damaged must not make a damaged file pass for an old one.
 */
export function campaignChecksumProblem(json: unknown): string | undefined {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return undefined // the schema says what it is not
  const { [checksumField]: stored, ...fields } = json as Record<string, unknown>
  if (stored === undefined) {
    const unknown = Object.keys(fields).find((key) => !Object.hasOwn(campaignFileSchema.shape, key))
    return unknown === undefined ? undefined : `field ${JSON.stringify(unknown).slice(0, 80)} is not a campaign file's (a damaged name?)`
  }
  if (stored !== checksumHex(JSON.stringify(fields))) return `it does not match its checksum (field ${checksumField})`
  return undefined
}
