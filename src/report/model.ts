/**
 * The report's model: what a listener's directory says about its campaigns, per cycle, per method and
 * per device, and of its runs outside campaigns (buildPlainRuns), as one document (the --json output, validated against reportDocumentSchema (schema.ts)
 * before it is printed; the text and HTML renderings are made from it). The summaries per method and of
 * the control are method-summary.ts; the device, device.ts.
 *
 * Assumptions: the runs come from AckStore (validated there) and the campaign files were validated
 * against campaignFileSchema by load.ts (history in cycle order). What remains hostile is their
 * consistency: a run listed in two cycles, a run listed but not on record, a tagged run of a replaced group. Those become warnings in the
 * report, never a crash and never a run counted twice.
 */
import type { CycleRecord } from '../store/campaign-file.js'
import type { StoredVerdict } from '../protocol/messages.js'
import type { CampaignInput, RunRecord } from './inputs.js'
import type {
  CampaignReport,
  CountedVerdict,
  CycleReport,
  PlainRunReport,
  RunReport,
  controlSights,
  testedNothingReasons,
} from './schema.js'
import { deviceReport } from './device.js'
import { controlSummary, methodSummaries } from './method-summary.js'

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
  const retried = new Set((input.file?.cutCommandChanges ?? []).flatMap((change) => change.failedAttempt.runIds))
  warnings.push(...failedAttemptLosses(input, byId))
  for (const record of records) {
    const tag = record.summary.campaign
    if (tag === null || tag.name !== input.name || cycleOfRun.has(record.summary.runId)) continue
    // The runs of a cycle whose cut command failed, written again with another command: not the cycle's, and no surprise.
    if (retried.has(record.summary.runId)) continue
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

  const methods = methodSummaries(cycles)
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
      caveats: campaignCaveats(input.name, cycles),
      device: deviceReport([...cycleRuns.values()].flat()),
      cycles,
      methods,
      control: controlSummary(cycles),
      warnings,
    },
    cycleRuns,
  }
}

/**
 * The runs of a cycle's failed cut attempt are not counted (the cycle was written again), but a cut
 * command can fail after the power went off: a run of the attempt whose stored verdict is a fail lost,
 * tore or corrupted acknowledged records, and a loss is never hidden. One warning per such run.
 */
function failedAttemptLosses(input: CampaignInput, byId: ReadonlyMap<string, RunRecord>): string[] {
  const warnings: string[] = []
  for (const change of input.file?.cutCommandChanges ?? []) {
    for (const runId of change.failedAttempt.runIds) {
      const verdict = byId.get(runId)?.summary.verdict
      if (verdict?.verdict !== 'fail') continue
      warnings.push(
        `run ${runId} (${byId.get(runId)!.summary.method}) of cycle ${change.cycle}'s failed cut attempt failed: ${verdict.lost} lost, ${verdict.torn} torn, ${verdict.corrupt} corrupt of ${verdict.acked} acknowledged; not counted, the cycle was written again, but the loss is real`,
      )
    }
  }
  return warnings
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
  const steadyMs = entry?.steadyMs ?? minOrNull(records.map((r) => r.summary.steadyMs).filter((v): v is number => v !== null))
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
    ...countedCut(records.map(runReport)),
  }
}

/**
 * What one cut tested, from the verdicts of the runs it judged (a campaign's cycle, or the group of
 * one hand-run write): whether the boot changed, what the control saw, why it tested nothing, and
 * each run's verdict counted by that. The one rule for campaigns and runs outside them.
 */
function countedCut(
  stored: readonly Omit<RunReport, 'counted'>[],
): Pick<CycleReport, 'bootChanged' | 'control' | 'testedNothing' | 'runs'> {
  // Every verdict of the cut: a run without one (never reported, or not shown) saw no boot at all.
  const reboots = stored.flatMap((r) => (r.verdict === null ? [] : [r.verdict.rebootedSinceWrite]))
  const bootChanged = reboots.some((b) => b === true) ? true : reboots.length > 0 && reboots.every((b) => b === false) ? false : null
  const controls = stored.filter((r) => r.role === 'control' && r.verdict !== null).map((r) => controlSight(r.verdict!))
  // The control of a cut is all its jobs: one that lost records of its own shows the cut was real,
  // whatever an idle or luckier job lost; a lost control file is flagged over everything.
  const control = controls.includes('failed')
    ? 'failed'
    : controls.includes('noticed')
      ? 'noticed'
      : controls.includes('not-noticed')
        ? 'not-noticed'
        : null
  const testedNothing = testedNothingReason(bootChanged, control, stored)
  return { bootChanged, control, testedNothing, runs: stored.map((r) => ({ ...r, counted: countedVerdict(r, testedNothing) })) }
}

/**
 * Why a cycle with verdicts tested nothing, or null: every verdict saw the boot of the write (no
 * reboot: the page cache held every record, whatever the cut did), or the control lost nothing (the
 * cut, or the reboot, did not reach the storage). A cycle whose boot is unknown (a platform without a
 * boot id) is judged by its control alone.
 */
function testedNothingReason(
  bootChanged: boolean | null,
  control: CycleReport['control'],
  runs: readonly Omit<RunReport, 'counted'>[],
): (typeof testedNothingReasons)[number] | null {
  if (!runs.some((r) => r.verdict !== null)) return null
  if (bootChanged === false) return 'same-boot'
  if (control === 'not-noticed') return 'control-not-noticed'
  return null
}

/** A run's verdict as the campaign counts it: a pass of a cycle that tested nothing proves nothing; a loss is a fail whatever else. */
function countedVerdict(run: Omit<RunReport, 'counted'>, testedNothing: CycleReport['testedNothing']): CountedVerdict | null {
  if (run.verdict === null) return null
  return run.verdict.verdict === 'pass' && testedNothing !== null ? 'tested-nothing' : run.verdict.verdict
}

/**
 * What makes a campaign's passes prove less than they seem, each with the line every rendering puts
 * at its top: no control ran (nothing shows the cuts were real), every verdict saw the same boot, or
 * no judged cycle tested anything.
 */
function campaignCaveats(name: string, cycles: readonly CycleReport[]): CampaignReport['caveats'] {
  // A cycle whose cut command failed says nothing of what the cut command does when it works.
  const judged = cycles.filter((c) => c.outcome !== 'cut-failed' && c.runs.some((r) => r.verdict !== null))
  const caveats: CampaignReport['caveats'] = []
  if (cycles.some((c) => c.runs.length > 0) && !cycles.some((c) => c.runs.some((r) => r.role === 'control')))
    caveats.push({
      code: 'no-control',
      message: `campaign ${name} ran no control (none): nothing shows that its cuts were real, so its passes are unconfirmed; give the agent --method with none added (e.g. --method fdatasync,none)`,
    })
  const boots = judged.map((c) => c.bootChanged).filter((b) => b !== null)
  if (boots.length > 0 && boots.every((b) => b === false))
    caveats.push({
      code: 'same-boot',
      message: `every verdict of campaign ${name} saw the same boot as its write: the machine never rebooted, the page cache held every record, and the campaign tested nothing; make the cut command cut the power (not restart the agent)`,
    })
  else if (judged.length > 0 && judged.every((c) => c.testedNothing !== null))
    caveats.push({
      code: 'nothing-tested',
      message: `no cycle of campaign ${name} tested anything: in every one the control (none) lost nothing or no reboot was seen; check that the cut command really cuts the power`,
    })
  return caveats
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

/**
 * The runs of no campaign (written and verified by hand), oldest first, each with its stored verdict
 * and that verdict counted as a campaign's cycle counts it, over the runs of its write (its group:
 * one cut): a pass of a group whose control lost nothing, or whose every verdict saw the write's boot,
 * tested nothing.
 */
export function buildPlainRuns(records: readonly RunRecord[]): PlainRunReport[] {
  const plain = records.filter((r) => r.summary.campaign === null)
  const groups = new Map<string, RunRecord[]>()
  for (const r of plain) groups.set(r.summary.groupId, [...(groups.get(r.summary.groupId) ?? []), r])
  const counted = new Map<string, { run: RunReport; testedNothing: PlainRunReport['testedNothing'] }>()
  for (const group of groups.values()) {
    const cut = countedCut(group.map(runReport))
    for (const run of cut.runs) counted.set(run.runId, { run, testedNothing: cut.testedNothing })
  }
  return plain
    .sort((a, b) => a.summary.announcedMs - b.summary.announcedMs || displayOrder(a, b))
    .map((r) => {
      const { run, testedNothing } = counted.get(r.summary.runId)!
      return { ...run, testedNothing, host: r.summary.host, path: r.summary.path, live: r.summary.live }
    })
}

/** A run as every table shows it, without how a campaign counts its verdict. */
export function runReport(record: RunRecord): Omit<RunReport, 'counted'> {
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

function minOrNull(values: readonly number[]): number | null {
  let min: number | null = null
  for (const v of values) if (min === null || v < min) min = v
  return min
}
