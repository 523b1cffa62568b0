/**
 * The report's document as --json prints it: per run, per cycle, per method, per device and per
 * campaign, each a zod schema (reportDocumentSchema validates a document before it is printed) and
 * the type it infers. model.ts builds it; text.ts and html.ts render it.
 */
import { z } from 'zod'
import { cycleOutcomes } from '../store/campaign-file.js'
import { endReasons, storedVerdictSchema } from '../protocol/messages.js'

/** 2: a pass in a cycle that tested nothing is counted as `tested-nothing` (run `counted`, cycle `testedNothing`, method `verdicts`), and each campaign has `caveats`. */
export const reportFormatVersion = 2

/** A run's or a method's verdict as a campaign counts it: verify's verdicts, and a pass that proved nothing. */
export const countedVerdicts = ['pass', 'fail', 'tested-nothing', 'inconclusive', 'not-judged'] as const
export type CountedVerdict = (typeof countedVerdicts)[number]

/** Why a cycle tested nothing: no verdict saw a new boot (the page cache held every record), or the control lost nothing. */
export const testedNothingReasons = ['same-boot', 'control-not-noticed'] as const

/** What makes a whole campaign's passes prove less than they seem; each is flagged at the top of every rendering. */
export const campaignCaveats = [
  /** No `none` control ran: nothing shows that the cuts were real. */
  'no-control',
  /** Every verdict that could tell saw the same boot: the machine never rebooted after a write. */
  'same-boot',
  /** Every judged cycle tested nothing (for another reason than the same boot: the control never noticed a cut). */
  'nothing-tested',
] as const

const ms = z.number().int().nonnegative().nullable()
const count = z.number().int().nonnegative()

export const runReportSchema = z.object({
  runId: z.string(),
  method: z.string(),
  role: z.enum(['tested', 'control']),
  /** The job of a `write --jobs N` group the run belongs to (its file's .jobK); null for a run of one job. */
  job: z.number().int().positive().nullable(),
  announcedMs: z.number().int(),
  ackedThroughSeq: count,
  end: z.enum([...endReasons, 'vanished']).nullable(),
  /** The stored verdict; null while none was reported (the agent has not come back yet). */
  verdict: storedVerdictSchema
    .pick({
      verdict: true,
      acked: true,
      intact: true,
      lost: true,
      torn: true,
      corrupt: true,
      lossWindowMs: true,
      reordered: true,
      lostRanges: true,
      rebootedSinceWrite: true,
      summary: true,
      atMs: true,
    })
    .nullable(),
  /**
   * The verdict as the campaign counts it: the stored one, except that a pass in a cycle that tested
   * nothing (cycleReport testedNothing) is `tested-nothing`. A loss is a fail whatever else. null without a verdict.
   */
  counted: z.enum(countedVerdicts).nullable(),
})
export type RunReport = z.infer<typeof runReportSchema>

/** How the `none` control saw a cycle's cut. */
export const controlSights = [
  /** It lost records of its own: the cut was real. */
  'noticed',
  /** It lost nothing: the cut (or the reboot) tested nothing. Flagged. */
  'not-noticed',
  /** Its file was lost (a synced creation): its losses prove nothing about the cut. Flagged. */
  'failed',
] as const

export const cycleReportSchema = z.object({
  cycle: z.number().int().positive(),
  /** When the cycle's writer reported steady, else when its first run was announced. */
  timeMs: ms,
  steadyMs: ms,
  plannedCutMs: ms,
  cutMs: ms,
  cutExitCode: z.number().int().nullable(),
  cameBackMs: ms,
  outcome: z.enum(cycleOutcomes),
  /** true when any verdict saw a new boot, false when every one saw the same boot, null when unknown. */
  bootChanged: z.boolean().nullable(),
  /** null: no judged control in this cycle. */
  control: z.enum(controlSights).nullable(),
  /** Why this cycle tested nothing (its passes count as `tested-nothing`); null when it tested something or has no verdict. */
  testedNothing: z.enum(testedNothingReasons).nullable(),
  runs: z.array(runReportSchema),
})
export type CycleReport = z.infer<typeof cycleReportSchema>

export const methodSummarySchema = z.object({
  method: z.string(),
  role: z.enum(['tested', 'control']),
  /** Cycles in which this method ran and has a verdict (a `--jobs` cycle counts once). */
  cycles: count,
  /** Runs of this method with a verdict: one per job per cycle. */
  runs: count,
  /** Of those cycles, the ones in which any of its runs lost, tore or corrupted acknowledged records. */
  cyclesWithLoss: count,
  /** Per cycle, the method's verdict over all its runs (jobs), as verify gives it for a group (cycleVerdict). */
  verdicts: z.object({ pass: count, fail: count, 'tested-nothing': count, inconclusive: count, 'not-judged': count }),
  acked: count,
  lost: count,
  torn: count,
  corrupt: count,
  largestLossWindowMs: z.number().nonnegative().nullable(),
  reorderingCycles: z.array(z.number().int().positive()),
})
export type MethodSummary = z.infer<typeof methodSummarySchema>

export const deviceSchema = z.object({
  /** Every distinct value seen across the campaign's writers, most frequent first. */
  hosts: z.array(z.string()),
  paths: z.array(z.string()),
  model: z.array(z.string()),
  /** Not in fingerprints yet: empty unless a future fingerprint carries it. */
  firmware: z.array(z.string()),
  writeCache: z.array(z.string()),
  fileSystem: z.array(z.string()),
  kernel: z.array(z.string()),
  virtualMachine: z.array(z.boolean()),
})
export type DeviceReport = z.infer<typeof deviceSchema>

export const campaignReportSchema = z.object({
  name: z.string(),
  settings: z
    .object({
      cycles: z.number().int().positive(),
      cycle: z.number().int().positive(),
      phase: z.string(),
      detail: z.string().nullable(),
      cutCommand: z.string(),
      cutAfterS: z.tuple([z.number(), z.number()]),
      rebootTimeoutS: z.number(),
      seed: z.number().int(),
      createdMs: z.number().int(),
    })
    .nullable(),
  /** What makes the campaign's passes prove less than they seem (flagged at the top of the text and HTML); empty when nothing does. */
  caveats: z.array(z.object({ code: z.enum(campaignCaveats), message: z.string() })),
  device: deviceSchema,
  cycles: z.array(cycleReportSchema),
  methods: z.array(methodSummarySchema),
  control: z
    .object({
      /** Cycles with a judged control, but for those whose cut command failed (they may have cut nothing). */
      ran: count,
      noticed: count,
      /** noticed / ran; null when it never ran. */
      detectionRate: z.number().min(0).max(1).nullable(),
      /** Every cut the control did not notice (flagged), and every cycle whose control file was lost. */
      notNoticedCycles: z.array(z.number().int().positive()),
      failedCycles: z.array(z.number().int().positive()),
    })
    .nullable(),
  warnings: z.array(z.string()),
})
export type CampaignReport = z.infer<typeof campaignReportSchema>

/**
 * A run of no campaign (a hand-run write, verified by hand with verify --server): where it wrote, how
 * it ended, the verdict the listener stores for it (null: not verified), and `counted`, that verdict
 * as a campaign's cycle counts it over the runs of its write (model.ts countedCut).
 */
export const plainRunReportSchema = runReportSchema.extend({
  /** Why the cut of its write (its group) tested nothing, as a cycle's `testedNothing`; null when it tested something or has no verdict. */
  testedNothing: z.enum(testedNothingReasons).nullable(),
  host: z.string(),
  path: z.string(),
  /** Still writing (its writer connected, no end recorded). */
  live: z.boolean(),
})
export type PlainRunReport = z.infer<typeof plainRunReportSchema>

export const reportDocumentSchema = z.object({
  tool: z.literal('plugcheck report'),
  formatVersion: z.literal(reportFormatVersion),
  dir: z.string(),
  campaigns: z.array(campaignReportSchema),
  /** The runs outside campaigns, oldest first; empty when the report names its campaigns (--campaign). Absent from documents of earlier versions: read as empty. */
  plainRuns: z.array(plainRunReportSchema).default([]),
  /** What the listener's store skipped or could not use (a damaged verdict file, a torn log tail). */
  warnings: z.array(z.string()),
})
export type ReportDocument = z.infer<typeof reportDocumentSchema>
