/**
 * A campaign's durable state at the listener: <dir>/campaigns/<name>.json, rewritten whole (temporary
 * file, fsync, rename, directory fsync) at every step, so a listener killed at any moment resumes the
 * campaign where it was and no cycle is counted twice or lost. `report` reads the same file.
 */
import { z } from 'zod'
import { campaignNameSchema, campaignPhases, epochMsSchema } from '../protocol/messages.js'
import { runIdSchema } from '../record/format.js'

export const campaignFileVersion = 1

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
  runIds: z.array(runIdSchema).max(64),
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

export const campaignFileSchema = z.object({
  version: z.literal(campaignFileVersion),
  name: campaignNameSchema,
  cycles: z.number().int().positive().max(100_000),
  cutCommand: z.string().min(1).max(4096),
  /** [min, max] seconds after steady. */
  cutAfterS: z.tuple([z.number().nonnegative().max(86_400), z.number().nonnegative().max(86_400)]).refine(([a, b]) => b >= a, 'cut-after MIN-MAX runs backwards'),
  rebootTimeoutS: z.number().positive().max(86_400),
  seed: z.number().int().nonnegative().max(2 ** 32 - 1),
  createdMs: epochMsSchema,
  phase: z.enum(campaignPhases),
  /** The cycle under way (1-based); cycles + 1 once done. */
  cycle: z.number().int().positive().max(100_001),
  detail: z.string().max(4096).optional(),
  history: z.array(cycleRecordSchema).max(100_000),
})
export type CampaignFile = z.infer<typeof campaignFileSchema>
