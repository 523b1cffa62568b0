/**
 * A campaign's summaries over its cycles: per method (its cycles judged as verify judges a group of
 * jobs, its counts summed over every run) and for the `none` control (how often it noticed the cut).
 */
import type { CampaignReport, CycleReport, MethodSummary, RunReport } from './schema.js'

type VerdictName = keyof MethodSummary['verdicts']

/**
 * One method's verdict in one cycle, over all its runs (the jobs of `write --jobs`), as verify judges a
 * group: a failed run fails the method; a job that acknowledged nothing (inconclusive) is excused when
 * another job tested the method; the control passes when any job noticed the cut. A pass of a cycle
 * that tested nothing counts as `tested-nothing` (model.ts countedVerdict). First match wins.
 */
const cycleVerdictOrder: Record<'tested' | 'control', readonly VerdictName[]> = {
  tested: ['fail', 'not-judged', 'pass', 'tested-nothing', 'inconclusive'],
  control: ['fail', 'pass', 'not-judged', 'tested-nothing', 'inconclusive'],
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
    verdicts: { pass: 0, fail: 0, 'tested-nothing': 0, inconclusive: 0, 'not-judged': 0 },
    acked: 0,
    lost: 0,
    torn: 0,
    corrupt: 0,
    largestLossWindowMs: null,
    reorderingCycles: [],
  }
}

/** Per method: cycles counted once however many jobs ran in them, counts summed over every run. */
export function methodSummaries(cycles: readonly CycleReport[]): MethodSummary[] {
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
          runs.map((r) => r.counted!),
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

export function controlSummary(cycles: readonly CycleReport[]): CampaignReport['control'] {
  if (!cycles.some((c) => c.runs.some((r) => r.role === 'control'))) return null
  // A cycle whose cut command failed may have cut nothing: it is no cut the control could notice or miss.
  const judged = cycles.filter((c) => c.control !== null && c.outcome !== 'cut-failed')
  const noticed = judged.filter((c) => c.control === 'noticed').length
  return {
    ran: judged.length,
    noticed,
    detectionRate: judged.length === 0 ? null : noticed / judged.length,
    notNoticedCycles: judged.filter((c) => c.control === 'not-noticed').map((c) => c.cycle),
    failedCycles: judged.filter((c) => c.control === 'failed').map((c) => c.cycle),
  }
}
