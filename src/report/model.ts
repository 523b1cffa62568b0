/**
 * The report's model: what a listener's directory says about its campaigns, per cycle, per method and
 * per device, as one document (the --json output, validated against reportDocumentSchema before it is
 * printed; the text and HTML renderings are made from it).
 *
 * Assumptions: the runs come from AckStore (validated there) and the campaign files were validated
 * against campaignFileSchema by load.ts (history in cycle order). What remains hostile is their
 * consistency: a run listed in two cycles, a run listed but not on record, a tagged run of a replaced group. Those become warnings in the
 * report, never a crash and never a run counted twice.
 */
import { z } from 'zod'
import type { Fingerprint, BlockDeviceInfo } from '../env/fingerprint-schema.js'
import { cycleOutcomes, type CampaignFile, type CycleRecord } from '../store/campaign-file.js'
import { endReasons, storedVerdictSchema, type RunSummary, type StoredRun, type StoredVerdict } from '../protocol/messages.js'

export const reportFormatVersion = 1

/** One run as the ack store holds it: its summary (verdict, steady time, campaign tag) and its acks. */
export interface RunRecord {
  readonly summary: RunSummary
  readonly run: StoredRun
}

/** A campaign as found on disk: its state file (null when only tagged runs name it) and its runs. */
export interface CampaignInput {
  readonly name: string
  readonly file: CampaignFile | null
}

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
  verdicts: z.object({ pass: count, fail: count, inconclusive: count, 'not-judged': count }),
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
  device: deviceSchema,
  cycles: z.array(cycleReportSchema),
  methods: z.array(methodSummarySchema),
  control: z
    .object({
      /** Cycles with a judged control. */
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

export const reportDocumentSchema = z.object({
  tool: z.literal('plugcheck report'),
  formatVersion: z.literal(reportFormatVersion),
  dir: z.string(),
  campaigns: z.array(campaignReportSchema),
  /** What the listener's store skipped or could not use (a damaged verdict file, a torn log tail). */
  warnings: z.array(z.string()),
})
export type ReportDocument = z.infer<typeof reportDocumentSchema>

/** The records of one run per cycle, in display order (tested methods by name, the control last). */
export interface CycleRuns {
  readonly cycle: number
  readonly records: readonly RunRecord[]
}

export interface BuiltCampaign {
  readonly report: CampaignReport
  /** The records behind each cycle (for the HTML timeline, which needs their spans). */
  readonly cycleRuns: ReadonlyMap<number, readonly RunRecord[]>
}

export function buildCampaign(input: CampaignInput, records: readonly RunRecord[]): BuiltCampaign {
  const warnings: string[] = []
  const byId = new Map(records.map((r) => [r.summary.runId, r]))
  const history = new Map<number, CycleRecord>()
  // load.ts refuses a history out of order: one entry per cycle.
  for (const entry of input.file?.history ?? []) history.set(entry.cycle, entry)

  // A run belongs to the cycle whose history lists it. A run tagged with a cycle that has an entry
  // but is not listed there belongs to a group the engine replaced (a writer started again within the
  // cycle): not counted, said. Only a cycle without an entry (no campaign file) goes by the tags.
  const cycleOfRun = new Map<string, number>()
  for (const entry of history.values()) {
    for (const runId of entry.runIds) {
      const earlier = cycleOfRun.get(runId)
      if (earlier !== undefined && earlier !== entry.cycle) {
        warnings.push(`run ${runId} is listed in cycles ${earlier} and ${entry.cycle}: counted in cycle ${earlier} only`)
        continue
      }
      if (!byId.has(runId)) {
        warnings.push(`run ${runId} of cycle ${entry.cycle} is not in the listener's directory`)
        continue
      }
      cycleOfRun.set(runId, entry.cycle)
    }
  }
  for (const record of records) {
    const tag = record.summary.campaign
    if (tag === null || tag.name !== input.name || cycleOfRun.has(record.summary.runId)) continue
    if (history.has(tag.cycle)) {
      warnings.push(
        `run ${record.summary.runId} (${record.summary.method}) is tagged with cycle ${tag.cycle} but is not in that cycle's group: not counted`,
      )
      continue
    }
    cycleOfRun.set(record.summary.runId, tag.cycle)
  }

  const cycleRuns = new Map<number, RunRecord[]>()
  for (const cycle of history.keys()) cycleRuns.set(cycle, [])
  for (const [runId, cycle] of cycleOfRun) {
    const list = cycleRuns.get(cycle) ?? []
    list.push(byId.get(runId)!)
    cycleRuns.set(cycle, list)
  }
  for (const list of cycleRuns.values()) list.sort(displayOrder)

  const cycles: CycleReport[] = [...cycleRuns.keys()]
    .sort((a, b) => a - b)
    .map((cycle) => cycleReport(cycle, history.get(cycle) ?? null, cycleRuns.get(cycle)!))

  return {
    report: {
      name: input.name,
      settings:
        input.file === null
          ? null
          : {
              cycles: input.file.cycles,
              cycle: input.file.cycle,
              phase: input.file.phase,
              detail: input.file.detail ?? null,
              cutCommand: input.file.cutCommand,
              cutAfterS: input.file.cutAfterS,
              rebootTimeoutS: input.file.rebootTimeoutS,
              seed: input.file.seed,
              createdMs: input.file.createdMs,
            },
      device: deviceReport([...cycleRuns.values()].flat()),
      cycles,
      methods: methodSummaries(cycles),
      control: controlSummary(cycles),
      warnings,
    },
    cycleRuns,
  }
}

function displayOrder(a: RunRecord, b: RunRecord): number {
  const controlA = a.summary.method === 'none' ? 1 : 0
  const controlB = b.summary.method === 'none' ? 1 : 0
  const job = (r: RunRecord) => jobOf(r.run.meta.path) ?? 0
  return (
    controlA - controlB ||
    a.summary.method.localeCompare(b.summary.method) ||
    job(a) - job(b) ||
    a.summary.announcedMs - b.summary.announcedMs
  )
}

function cycleReport(cycle: number, entry: CycleRecord | null, records: readonly RunRecord[]): CycleReport {
  const runs = records.map(runReport)
  const steadyMs = entry?.steadyMs ?? minOrNull(records.map((r) => r.summary.steadyMs).filter((v): v is number => v !== null))
  const reboots = runs.map((r) => r.verdict?.rebootedSinceWrite ?? null)
  const bootChanged = reboots.some((b) => b === true) ? true : reboots.length > 0 && reboots.every((b) => b === false) ? false : null
  const controls = runs.filter((r) => r.role === 'control' && r.verdict !== null).map((r) => controlSight(r.verdict!))
  // The control of a cycle is all its jobs: one that lost records of its own shows the cut was real,
  // whatever an idle or luckier job lost; a lost control file is flagged over everything.
  const control = controls.includes('failed')
    ? 'failed'
    : controls.includes('noticed')
      ? 'noticed'
      : controls.includes('not-noticed')
        ? 'not-noticed'
        : null
  return {
    cycle,
    timeMs: steadyMs ?? minOrNull(records.map((r) => r.summary.announcedMs)),
    steadyMs,
    plannedCutMs: entry?.plannedCutMs ?? null,
    cutMs: entry?.cutMs ?? null,
    cutExitCode: entry?.cutExitCode ?? null,
    cameBackMs: entry?.cameBackMs ?? null,
    // Runs tagged with a cycle the file has no entry for: under way as far as the report can tell.
    outcome: entry?.outcome ?? 'pending',
    bootChanged,
    control,
    runs,
  }
}

/**
 * The control's sight of a cut, following verify's judgement of `none`: pass = it lost records of its
 * own (noticed), inconclusive with records acknowledged = it lost nothing (not noticed), fail = its
 * file was lost. Nothing acknowledged or not judged: it did not run, null.
 */
function controlSight(v: NonNullable<RunReport['verdict']>): (typeof controlSights)[number] | null {
  if (v.verdict === 'not-judged' || v.acked === 0) return null
  if (v.verdict === 'fail') return 'failed'
  return v.verdict === 'pass' && v.lost + v.torn + v.corrupt > 0 ? 'noticed' : 'not-noticed'
}

function runReport(record: RunRecord): RunReport {
  const s = record.summary
  return {
    runId: s.runId,
    method: s.method,
    role: s.method === 'none' ? 'control' : 'tested',
    job: jobOf(record.run.meta.path),
    announcedMs: s.announcedMs,
    ackedThroughSeq: s.ackedThroughSeq,
    end: s.end?.reason ?? null,
    verdict: s.verdict === null ? null : verdictReport(s.verdict),
  }
}

function verdictReport(v: StoredVerdict): NonNullable<RunReport['verdict']> {
  return {
    verdict: v.verdict,
    acked: v.acked,
    intact: v.intact,
    lost: v.lost,
    torn: v.torn,
    corrupt: v.corrupt,
    lossWindowMs: v.lossWindowMs,
    reordered: v.reordered,
    lostRanges: v.lostRanges.map(([a, b]) => [a, b] as [number, number]),
    rebootedSinceWrite: v.rebootedSinceWrite,
    summary: v.summary,
    atMs: v.atMs,
  }
}

/** The job number of a run of `write --jobs N` (its file is PATH.jobK or PATH.method.jobK), else null. */
export function jobOf(path: string): number | null {
  const match = /\.job([1-9][0-9]{0,5})$/.exec(path)
  return match === null ? null : Number(match[1])
}

type VerdictName = keyof MethodSummary['verdicts']

/**
 * One method's verdict in one cycle, over all its runs (the jobs of `write --jobs`), as verify judges a
 * group: a failed run fails the method; a job that acknowledged nothing (inconclusive) is excused when
 * another job tested the method; the control passes when any job noticed the cut. First match wins.
 */
const cycleVerdictOrder: Record<'tested' | 'control', readonly VerdictName[]> = {
  tested: ['fail', 'not-judged', 'pass', 'inconclusive'],
  control: ['fail', 'pass', 'not-judged', 'inconclusive'],
}

function cycleVerdict(role: 'tested' | 'control', verdicts: readonly VerdictName[]): VerdictName {
  return cycleVerdictOrder[role].find((v) => verdicts.includes(v))!
}

function newMethodSummary(run: RunReport): MethodSummary {
  return {
    method: run.method,
    role: run.role,
    cycles: 0,
    runs: 0,
    cyclesWithLoss: 0,
    verdicts: { pass: 0, fail: 0, inconclusive: 0, 'not-judged': 0 },
    acked: 0,
    lost: 0,
    torn: 0,
    corrupt: 0,
    largestLossWindowMs: null,
    reorderingCycles: [],
  }
}

/** Per method: cycles counted once however many jobs ran in them, counts summed over every run. */
function methodSummaries(cycles: readonly CycleReport[]): MethodSummary[] {
  const byMethod = new Map<string, MethodSummary>()
  for (const cycle of cycles) {
    const judgedByMethod = new Map<string, RunReport[]>()
    for (const run of cycle.runs) {
      if (!byMethod.has(run.method)) byMethod.set(run.method, newMethodSummary(run))
      if (run.verdict !== null) judgedByMethod.set(run.method, [...(judgedByMethod.get(run.method) ?? []), run])
    }
    for (const [method, runs] of judgedByMethod) {
      const m = byMethod.get(method)!
      m.cycles++
      m.verdicts[
        cycleVerdict(
          m.role,
          runs.map((r) => r.verdict!.verdict),
        )
      ]++
      if (runs.some((r) => r.verdict!.lost + r.verdict!.torn + r.verdict!.corrupt > 0)) m.cyclesWithLoss++
      if (runs.some((r) => r.verdict!.reordered)) m.reorderingCycles.push(cycle.cycle)
      for (const { verdict: v } of runs) {
        m.runs++
        m.acked += v!.acked
        m.lost += v!.lost
        m.torn += v!.torn
        m.corrupt += v!.corrupt
        if (v!.lossWindowMs !== null) m.largestLossWindowMs = Math.max(m.largestLossWindowMs ?? 0, v!.lossWindowMs)
      }
    }
  }
  return [...byMethod.values()].sort((a, b) => (a.role === b.role ? a.method.localeCompare(b.method) : a.role === 'control' ? 1 : -1))
}

function controlSummary(cycles: readonly CycleReport[]): CampaignReport['control'] {
  if (!cycles.some((c) => c.runs.some((r) => r.role === 'control'))) return null
  const judged = cycles.filter((c) => c.control !== null)
  const noticed = judged.filter((c) => c.control === 'noticed').length
  return {
    ran: judged.length,
    noticed,
    detectionRate: judged.length === 0 ? null : noticed / judged.length,
    notNoticedCycles: judged.filter((c) => c.control === 'not-noticed').map((c) => c.cycle),
    failedCycles: judged.filter((c) => c.control === 'failed').map((c) => c.cycle),
  }
}

/** The device under test as its writers described it (at write time; the verifier's view as a fallback). */
function deviceReport(records: readonly RunRecord[]): DeviceReport {
  const tally = {
    hosts: new Tally<string>(),
    paths: new Tally<string>(),
    model: new Tally<string>(),
    firmware: new Tally<string>(),
    writeCache: new Tally<string>(),
    fileSystem: new Tally<string>(),
    kernel: new Tally<string>(),
    virtualMachine: new Tally<boolean>(),
  }
  for (const { summary, run } of records) {
    tally.hosts.add(summary.host)
    tally.paths.add(summary.path)
    const fingerprint: Fingerprint | null = run.writer?.fingerprint ?? summary.verdict?.fingerprint ?? null
    if (fingerprint === null) continue
    const devices = flatten(fingerprint.device)
    const named = devices.find((d) => d.model !== null || d.vendor !== null)
    if (named !== undefined)
      tally.model.add(
        [named.vendor, named.model]
          .filter((s) => s !== null && s.trim() !== '')
          .map((s) => s!.trim())
          .join(' '),
      )
    const firmware = devices.map((d) => (d as { firmware?: unknown }).firmware).find((f): f is string => typeof f === 'string' && f !== '')
    if (firmware !== undefined) tally.firmware.add(firmware)
    const cache = devices.find((d) => d.writeCache !== null)
    if (cache !== undefined) tally.writeCache.add(`${cache.writeCache}${cache.fua === true ? ', FUA' : ''} (${cache.name})`)
    const fs = fingerprint.target.fileSystem
    tally.fileSystem.add(
      `${fs.type}${fs.mountPoint === null ? '' : ` on ${fs.mountPoint}`}${fingerprint.target.inMemory ? ' (in memory)' : ''}`,
    )
    tally.kernel.add(`${fingerprint.os.platform} ${fingerprint.os.kernel}`)
    tally.virtualMachine.add(fingerprint.virtualMachine)
  }
  return {
    hosts: tally.hosts.values(),
    paths: tally.paths.values(),
    model: tally.model.values(),
    firmware: tally.firmware.values(),
    writeCache: tally.writeCache.values(),
    fileSystem: tally.fileSystem.values(),
    kernel: tally.kernel.values(),
    virtualMachine: tally.virtualMachine.values(),
  }
}

/** A device and the devices under it, depth first (bounded by the fingerprint schema's stacking limit). */
function flatten(device: BlockDeviceInfo | null): BlockDeviceInfo[] {
  if (device === null) return []
  return [device, ...device.underlying.flatMap((d) => flatten(d))]
}

class Tally<T> {
  private readonly counts = new Map<T, number>()
  add(value: T): void {
    this.counts.set(value, (this.counts.get(value) ?? 0) + 1)
  }
  /** Distinct values, most frequent first. */
  values(): T[] {
    return [...this.counts.entries()].sort((a, b) => b[1] - a[1]).map(([v]) => v)
  }
}

function minOrNull(values: readonly number[]): number | null {
  let min: number | null = null
  for (const v of values) if (min === null || v < min) min = v
  return min
}
