/**
 * The report for people: the campaigns side by side as columns (device, cycles, per method, the
 * control's detection rate), then each campaign's cycles, one line per method and cycle, with the
 * cuts the control did not notice flagged; then the runs outside campaigns, each with its stored verdict
 * or "not verified". Everything here comes from the validated document.
 */
import type { CampaignReport, CountedVerdict, CycleReport, MethodSummary, PlainRunReport, ReportDocument, RunReport } from './schema.js'
import { spaced } from '../base/printable.js'

/** A side-by-side column is cut to this width (the JSON document has every value in full). */
const maxColumnChars = 44

export function renderText(doc: ReportDocument): string {
  const out: string[] = [`plugcheck report: ${doc.dir}`, '']
  const caveats = doc.campaigns.flatMap((c) => c.caveats)
  if (caveats.length > 0) out.push(...caveats.map((caveat) => `! ${spaced(caveat.message)}`), '')
  if (doc.campaigns.length > 0) out.push(...sideBySide(doc.campaigns), '')
  for (const campaign of doc.campaigns) out.push(...cycleTable(campaign), '')
  if (doc.plainRuns.length > 0) out.push(...plainRunsTable(doc.plainRuns), '')
  for (const warning of doc.warnings) out.push(`warning: ${spaced(warning)}`)
  return `${out.join('\n').trimEnd()}\n`
}

function sideBySide(campaigns: readonly CampaignReport[]): string[] {
  const rows = summaryRows(campaigns)
  const widths: number[] = []
  for (const r of rows)
    r.forEach((cell, i) => {
      widths[i] = Math.max(widths[i] ?? 0, Math.min(cell.length, maxColumnChars))
    })
  return rows.map((r) =>
    r.length === 0
      ? ''
      : r
          .map((cell, i) => clip(cell).padEnd(i === r.length - 1 ? 0 : widths[i]!))
          .join('  ')
          .trimEnd(),
  )
}

/** Rows of label + one cell per campaign (an empty row between groups); the HTML summary uses them too. */
export function summaryRows(campaigns: readonly CampaignReport[]): string[][] {
  const rows: string[][] = []
  const row = (label: string, cell: (c: CampaignReport) => string) => rows.push([label, ...campaigns.map(cell)])
  row('campaign', (c) => c.name)
  row('host', (c) => list(c.device.hosts))
  row('path', (c) => list(c.device.paths))
  row('device', (c) => list(c.device.model))
  row('firmware', (c) => (c.device.firmware.length === 0 ? 'not recorded' : list(c.device.firmware)))
  row('write cache', (c) => list(c.device.writeCache))
  row('file system', (c) => list(c.device.fileSystem))
  row('kernel', (c) => list(c.device.kernel))
  row('virtual machine', (c) => list(c.device.virtualMachine.map((v) => (v ? 'yes' : 'no'))))
  row('cycles', (c) => cyclesCell(c))
  const methods = [...new Set(campaigns.flatMap((c) => c.methods.map((m) => `${m.role === 'control' ? '1' : '0'}${m.method}`)))]
    .sort()
    .map((k) => k.slice(1))
  for (const method of methods) {
    const of = (c: CampaignReport): MethodSummary | undefined => c.methods.find((m) => m.method === method)
    const cell = (f: (m: MethodSummary) => string) => (c: CampaignReport) => {
      const m = of(c)
      return m === undefined ? '-' : f(m)
    }
    const control = method === 'none'
    rows.push([])
    row(control ? 'none (control)' : method, (c) => {
      const m = of(c)
      return m === undefined ? '-' : verdictCounts(m, c)
    })
    row(
      '  cycles with loss',
      cell((m) => `${m.cyclesWithLoss} of ${m.cycles}`),
    )
    // With write --jobs a cycle holds several runs of the method: said, so the totals below read right.
    if (campaigns.some((c) => (of(c)?.runs ?? 0) !== (of(c)?.cycles ?? 0)))
      row(
        '  runs (jobs)',
        cell((m) => thousands(m.runs)),
      )
    row(
      '  acked',
      cell((m) => thousands(m.acked)),
    )
    row(
      '  lost / torn / corrupt',
      cell((m) => `${thousands(m.lost)} / ${thousands(m.torn)} / ${thousands(m.corrupt)}`),
    )
    if (!control) {
      row(
        '  largest loss window',
        cell((m) => (m.largestLossWindowMs === null ? '-' : durationMs(m.largestLossWindowMs))),
      )
      row(
        '  reordering',
        cell((m) => (m.reorderingCycles.length === 0 ? 'none seen' : `cycles ${m.reorderingCycles.join(', ')}`)),
      )
    } else {
      row('  detection rate', (c) => {
        const k = c.control
        if (k === null || k.detectionRate === null) return '-'
        return `${k.noticed}/${k.ran} cuts noticed (${Math.round(k.detectionRate * 100)}%)`
      })
      row('  cuts not noticed', (c) =>
        c.control === null || c.control.notNoticedCycles.length === 0 ? 'none' : `cycles ${c.control.notNoticedCycles.join(', ')}`,
      )
      // A lost control file says nothing about the cut (its losses prove nothing): counted apart.
      row('  control file lost', (c) =>
        c.control === null || c.control.failedCycles.length === 0
          ? 'none'
          : `cycles ${c.control.failedCycles.join(', ')} (its fsynced creation lost)`,
      )
    }
  }
  return rows
}

function cyclesCell(c: CampaignReport): string {
  const done = c.cycles.filter((y) => y.outcome === 'verdict').length
  if (c.settings === null) return `${c.cycles.length} (no campaign file)`
  return `${done} of ${c.settings.cycles} judged, ${c.settings.phase}`
}

/**
 * A method's headline over the campaign. Passes of cycles that tested nothing are counted apart, and
 * the passes of a campaign without a control never read as plain passes: nothing showed its cuts real.
 */
function verdictCounts(m: MethodSummary, c: CampaignReport): string {
  const unconfirmed = m.role === 'tested' && c.caveats.some((caveat) => caveat.code === 'no-control')
  const parts = (['pass', 'fail', 'tested-nothing', 'inconclusive', 'not-judged'] as const)
    .filter((v) => m.verdicts[v] > 0)
    .map((v) => `${countedLabel(v)} ${m.verdicts[v]}${v === 'pass' && unconfirmed ? ' (unconfirmed: no control)' : ''}`)
  return parts.length === 0 ? 'no verdict yet' : parts.join(', ')
}

/** A counted verdict as the text and HTML say it. */
export function countedLabel(verdict: CountedVerdict): string {
  return verdict === 'tested-nothing' ? 'tested nothing' : verdict
}

/**
 * A verdict's colour in the HTML, for a cycle's run and a run outside campaigns alike: green only for
 * a tested method's pass that tested something (a pass that tested nothing proved nothing), red for a
 * tested method's loss, whatever was counted.
 */
export function verdictClass(run: Pick<RunReport, 'role' | 'counted' | 'verdict'>): 'nothing' | 'bad' | 'good' | '' {
  const v = run.verdict
  if (v === null) return 'nothing'
  const counted = run.counted ?? v.verdict
  if (counted === 'tested-nothing') return 'nothing'
  if (run.role !== 'tested') return ''
  if (v.lost + v.torn + v.corrupt > 0 || v.verdict === 'fail') return 'bad'
  return counted === 'pass' ? 'good' : ''
}

/** The flag of a cycle that tested nothing because no verdict saw a new boot. */
export const sameBootFlag = 'every verdict saw the same boot as the write (no reboot): the cycle tested nothing'

/** A cycle whose cut command failed made no cut: nothing to notice, whatever its verdicts saw. */
export function cutFailedFlag(cycle: CycleReport): string {
  return `the cut command failed${cycle.cutExitCode === null ? '' : ` (exit ${cycle.cutExitCode})`}: no cut was made, the cycle tested nothing`
}

function cycleTable(c: CampaignReport): string[] {
  const head: string[] = [`campaign ${c.name}`]
  if (c.settings !== null) {
    const s = c.settings
    head.push(
      `  ${s.cycles} cycles, now ${s.phase}${s.detail === null ? '' : ` (${spaced(s.detail)})`}; cut by: ${spaced(s.cutCommand)}; ${s.cutAfterS[0]}-${s.cutAfterS[1]} s after steady, seed ${s.seed}`,
    )
  }
  const rows: string[][] = [
    ['cycle', 'time (UTC)', 'cut planned', 'cut at', 'boot', 'outcome', 'method', 'acked', 'lost', 'torn', 'corrupt', 'verdict'],
  ]
  const flags: string[] = []
  for (const cycle of c.cycles) {
    const first = [
      String(cycle.cycle),
      time(cycle.timeMs),
      relative(cycle.plannedCutMs, cycle.steadyMs),
      relative(cycle.cutMs, cycle.steadyMs),
      boot(cycle),
      cycle.outcome,
    ]
    const runs = cycle.runs.length === 0 ? [null] : cycle.runs
    runs.forEach((run, i) => {
      rows.push([...(i === 0 ? first : first.map(() => '')), ...runCells(run)])
    })
    if (cycle.outcome === 'cut-failed') flags.push(`  ! cycle ${cycle.cycle}: ${cutFailedFlag(cycle)}`)
    else if (cycle.testedNothing === 'same-boot') flags.push(`  ! cycle ${cycle.cycle}: ${sameBootFlag}`)
    else if (cycle.control === 'not-noticed')
      flags.push(`  ! cycle ${cycle.cycle}: the control (none) lost nothing: this cut was not noticed, the cycle tested nothing`)
    if (cycle.control === 'failed')
      flags.push(`  ! cycle ${cycle.cycle}: the control's file was lost: its losses prove nothing about the cut`)
    if (cycle.outcome === 'did-not-come-back') flags.push(`  ! cycle ${cycle.cycle}: the agent did not come back after the cut`)
  }
  const widths = rows.reduce<number[]>((w, r) => r.map((cell, i) => Math.max(w[i] ?? 0, cell.length)), [])
  const numeric = new Set([7, 8, 9, 10])
  const lines = rows.map((r) =>
    r
      .map((cell, i) => (numeric.has(i) ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd(),
  )
  return [...head, ...lines.map((l) => `  ${l}`), ...flags, ...c.warnings.map((w) => `  warning: ${spaced(w)}`)]
}

/** The runs outside campaigns: one line each, oldest first, with the verdict stored for it or "not verified". */
function plainRunsTable(runs: readonly PlainRunReport[]): string[] {
  const rows: string[][] = [[...plainRunColumns]]
  for (const run of runs) rows.push(plainRunCells(run).map((cell) => spaced(cell)))
  const widths = rows.reduce<number[]>((w, r) => r.map((cell, i) => Math.max(w[i] ?? 0, cell.length)), [])
  const numeric = new Set([6, 7, 8, 9])
  const lines = rows.map((r) =>
    r
      .map((cell, i) => (numeric.has(i) ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd(),
  )
  const flags = runs.some((r) => r.verdict?.verdict === 'pass' && r.verdict.rebootedSinceWrite === false)
    ? [`  ! ${plainSameBootFlag}`]
    : []
  return [plainRunsHeading, ...lines.map((l) => `  ${l}`), ...flags]
}

export const plainRunsHeading = 'runs outside campaigns'
export const plainRunColumns = [
  'run',
  'started (UTC)',
  'host',
  'path',
  'method',
  'end',
  'acked',
  'lost',
  'torn',
  'corrupt',
  'verdict',
] as const
export const plainSameBootFlag =
  'same boot: verified on the boot of its write (no reboot since): the page cache held every record, so a pass proves nothing about power loss'

/** A run outside campaigns as the cells of plainRunColumns (the HTML table has the same). */
export function plainRunCells(run: PlainRunReport): string[] {
  const lead = [run.runId, time(run.announcedMs), run.host, run.path, runLabel(run), run.live ? 'live' : (run.end ?? '-')]
  const v = run.verdict
  if (v === null) return [...lead, thousands(run.ackedThroughSeq), '', '', '', run.live ? 'not verified (still writing)' : 'not verified']
  return [...lead, thousands(v.acked), thousands(v.lost), thousands(v.torn), thousands(v.corrupt), plainVerdictLabel(run, v)]
}

/**
 * A run outside campaigns' verdict as counted over its write's runs (model.ts countedCut), as a
 * cycle's is: a pass of a write whose control lost nothing tested nothing; a pass on the boot of its
 * write, or whose reboot could not be told, says so (flagged below the table).
 */
function plainVerdictLabel(run: PlainRunReport, v: NonNullable<PlainRunReport['verdict']>): string {
  if (run.counted === 'tested-nothing' && run.testedNothing === 'control-not-noticed') return 'tested nothing (the control lost nothing)'
  const counted = run.counted === 'tested-nothing' ? v.verdict : (run.counted ?? v.verdict)
  return `${countedLabel(counted)}${v.reordered ? ', reordered' : ''}${v.verdict === 'pass' ? passBootNote(v.rebootedSinceWrite) : ''}`
}

/** A pass proves something only when verified after a reboot: said when it was not, or could not be told. */
export function passBootNote(rebootedSinceWrite: boolean | null): string {
  return rebootedSinceWrite === false ? ', same boot' : rebootedSinceWrite === null ? ', reboot unknown' : ''
}

/** A run's name in the cycle tables: its method (the control said), and its job in a `--jobs` group. */
export function runLabel(run: Pick<RunReport, 'role' | 'method' | 'job'>): string {
  return `${run.role === 'control' ? 'none (control)' : run.method}${run.job === null ? '' : ` job ${run.job}`}`
}

function runCells(run: RunReport | null): string[] {
  if (run === null) return ['-', '', '', '', '', '']
  const name = runLabel(run)
  const v = run.verdict
  if (v === null) return [name, thousands(run.ackedThroughSeq), '', '', '', 'no verdict yet']
  return [
    name,
    thousands(v.acked),
    thousands(v.lost),
    thousands(v.torn),
    thousands(v.corrupt),
    countedLabel(run.counted ?? v.verdict) + (v.reordered ? ', reordered' : ''),
  ]
}

export function boot(cycle: CycleReport): string {
  return cycle.bootChanged === null ? '?' : cycle.bootChanged ? 'new boot' : 'same boot'
}

export function time(ms: number | null): string {
  return ms === null ? '-' : new Date(ms).toISOString().slice(0, 19).replace('T', ' ')
}

/** A cut moment as seconds after steady (the campaign's clock), or the time of day when steady is unknown. */
export function relative(ms: number | null, steadyMs: number | null): string {
  if (ms === null) return '-'
  if (steadyMs === null) return new Date(ms).toISOString().slice(11, 23)
  const s = ((ms - steadyMs) / 1000).toFixed(1)
  return `${s.startsWith('-') ? '' : '+'}${s} s`
}

export function durationMs(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`
}

export function thousands(n: number): string {
  return n.toLocaleString('en-US')
}

function list(values: readonly string[]): string {
  return values.length === 0 ? '-' : values.map((value) => spaced(value)).join('; ')
}

/** Strings from disk on one line, without control characters (a terminal must not be steered by them). */

function clip(s: string): string {
  return s.length <= maxColumnChars ? s : `${s.slice(0, maxColumnChars - 1)}…`
}
