/**
 * The report as one self-contained HTML file: inline CSS and SVG, no script, no external resource of
 * any kind (a Content-Security-Policy of default-src 'none' says so to the browser too). A summary
 * table with the campaigns side by side, then per campaign its cycles and a timeline per cycle: one
 * lane per method with its acks over time (from the listener's spans), the cut as a vertical line, and
 * the lost ranges of its verdict marked at the time their records were acknowledged; then the runs
 * outside campaigns as a table, each with its stored verdict or "not verified".
 *
 * Every string that came from disk (names, paths, device facts, commands, summaries) goes through esc().
 * Size is bounded: each lane draws at most maxPointsPerLane points (spans are sampled, not drawn one by
 * one), all lanes together at most maxTotalPoints, and at most maxTimelines cycles get a timeline.
 */
import type { AckSpan } from '../protocol/messages.js'
import { jobOf, type BuiltCampaign } from './model.js'
import type { CampaignReport, CycleReport, PlainRunReport, ReportDocument, RunReport } from './schema.js'
import type { RunRecord } from './inputs.js'
import {
  boot,
  countedLabel,
  cutFailedFlag,
  durationMs,
  plainRunCells,
  plainRunColumns,
  plainRunsHeading,
  plainSameBootFlag,
  relative,
  runLabel,
  sameBootFlag,
  summaryRows,
  thousands,
  verdictClass,
  time,
} from './text.js'

export const maxPointsPerLane = 400
export const minPointsPerLane = 16
export const maxTotalPoints = 200_000
export const maxTimelines = 1000

const width = 960
const laneLeft = 150
const laneRight = width - 16
const laneHeight = 56
const laneGap = 10
const top = 22
const axisHeight = 26
const palette = ['#1f77b4', '#2ca02c', '#9467bd', '#8c564b', '#17becf', '#bcbd22', '#e377c2']
const controlColour = '#7f7f7f'

/** Marks a file as a plugcheck report: report --html replaces only files that carry it. */
export const reportGenerator = 'plugcheck report'

export function renderHtml(doc: ReportDocument, built: readonly BuiltCampaign[]): string {
  const cyclesDrawn = built.flatMap((b) => b.report.cycles.map((c) => ({ b, c }))).slice(0, maxTimelines)
  const lanes = cyclesDrawn.reduce((n, { c }) => n + Math.max(1, c.runs.length), 0)
  const pointsPerLane = Math.max(minPointsPerLane, Math.min(maxPointsPerLane, Math.floor(maxTotalPoints / Math.max(1, lanes))))
  const drawn = new Set(cyclesDrawn.map(({ c }) => c))
  const body: string[] = []
  body.push(`<h1>plugcheck report</h1>`, `<p class="dir">listener directory <code>${esc(doc.dir)}</code></p>`)
  for (const caveat of doc.campaigns.flatMap((c) => c.caveats))
    body.push(`<p class="banner" data-caveat="${caveat.code}">&#9888; ${esc(caveat.message)}</p>`)
  if (doc.campaigns.length > 0) body.push(`<section class="summary"><h2>Summary</h2>${summaryTable(doc.campaigns)}</section>`)
  for (const w of doc.warnings) body.push(`<p class="warning">warning: ${esc(w)}</p>`)
  for (const b of built) {
    const c = b.report
    body.push(`<section class="campaign" id="campaign-${esc(c.name)}"><h2>Campaign ${esc(c.name)}</h2>`)
    if (c.settings !== null) {
      const s = c.settings
      body.push(
        `<p class="settings">${s.cycles} cycles, now <b>${esc(s.phase)}</b>${s.detail === null ? '' : ` (${esc(s.detail)})`}; cut by <code>${esc(s.cutCommand)}</code> ${s.cutAfterS[0]}&ndash;${s.cutAfterS[1]} s after steady; seed ${s.seed}</p>`,
      )
    }
    for (const w of c.warnings) body.push(`<p class="warning">warning: ${esc(w)}</p>`)
    body.push(cycleTable(c))
    const omitted = c.cycles.filter((cycle) => !drawn.has(cycle)).length
    for (const cycle of c.cycles) if (drawn.has(cycle)) body.push(timeline(c, cycle, b.cycleRuns.get(cycle.cycle) ?? [], pointsPerLane))
    if (omitted > 0)
      body.push(
        `<p class="note">${omitted} more cycles are in the table above; timelines are drawn for the first ${maxTimelines} cycles of the report.</p>`,
      )
    body.push(`</section>`)
  }
  if (doc.plainRuns.length > 0) body.push(plainRunsSection(doc.plainRuns))
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="${reportGenerator}">
<title>plugcheck report: ${esc([...doc.campaigns.map((c) => c.name), ...(doc.plainRuns.length > 0 ? [plainRunsHeading] : [])].join(', '))}</title>
<style>${css}</style>
</head>
<body>
${body.join('\n')}
</body>
</html>
`
}

const css = `
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px; }
code { font: 12px ui-monospace, monospace; background: #f3f3f3; padding: 1px 4px; border-radius: 3px; word-break: break-all; }
table { border-collapse: collapse; margin: 8px 0 16px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f6f6f6; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.gap td { border: none; height: 6px; padding: 0; }
tr.flag td { background: #fff4e5; }
.bad { color: #b00020; font-weight: 600; } .good { color: #1b7f3a; }
.warning, .flag-text { color: #8a4b00; } .nothing { color: #8a4b00; font-weight: 600; }
p.banner { background: #fff4e5; border: 1px solid #e0a040; color: #6b3a00; padding: 8px 12px; font-weight: 600; }
figure.timeline { margin: 12px 0 20px; } figcaption { font-weight: 600; margin-bottom: 4px; }
svg { display: block; background: #fcfcfc; border: 1px solid #e4e4e4; }
svg text { font: 11px system-ui, sans-serif; fill: #333; }
svg .acks { fill: none; stroke-width: 1.6; }
svg .lost { fill: #d62728; fill-opacity: 0.35; stroke: #d62728; stroke-width: 1; }
svg .cut { stroke: #d62728; stroke-width: 2; }
svg .planned-cut { stroke: #d62728; stroke-width: 1; stroke-dasharray: 4 3; }
svg .steady { stroke: #2ca02c; stroke-width: 1; stroke-dasharray: 2 3; }
svg .lane { fill: #fff; stroke: #eee; }
svg .axis { stroke: #999; }
`

function summaryTable(campaigns: readonly CampaignReport[]): string {
  const rows = summaryRows(campaigns)
  const [head, ...rest] = rows
  const out = [
    `<table class="summary"><thead><tr>${head!.map((cell, i) => `<th>${i === 0 ? '' : esc(cell)}</th>`).join('')}</tr></thead><tbody>`,
  ]
  for (const row of rest) {
    if (row.length === 0) {
      out.push(`<tr class="gap"><td colspan="${campaigns.length + 1}"></td></tr>`)
      continue
    }
    out.push(`<tr>${row.map((cell, i) => (i === 0 ? `<th>${esc(cell.trim())}</th>` : `<td>${esc(cell)}</td>`)).join('')}</tr>`)
  }
  out.push('</tbody></table>')
  return out.join('')
}

function cycleTable(c: CampaignReport): string {
  const out = [
    '<table class="cycles"><thead><tr><th>cycle</th><th>time (UTC)</th><th>cut planned</th><th>cut at</th><th>boot</th><th>outcome</th><th>method</th><th>acked</th><th>lost</th><th>torn</th><th>corrupt</th><th>verdict</th></tr></thead><tbody>',
  ]
  for (const cycle of c.cycles) {
    const runs: (RunReport | null)[] = cycle.runs.length === 0 ? [null] : cycle.runs
    const flagged =
      cycle.testedNothing !== null ||
      cycle.control === 'not-noticed' ||
      cycle.control === 'failed' ||
      cycle.outcome === 'cut-failed' ||
      cycle.outcome === 'did-not-come-back'
    runs.forEach((run, i) => {
      const lead =
        i === 0
          ? `<td rowspan="${runs.length}"><a href="#cycle-${esc(c.name)}-${cycle.cycle}">${cycle.cycle}</a></td><td rowspan="${runs.length}">${time(cycle.timeMs)}</td><td rowspan="${runs.length}">${relative(cycle.plannedCutMs, cycle.steadyMs)}</td><td rowspan="${runs.length}">${relative(cycle.cutMs, cycle.steadyMs)}</td><td rowspan="${runs.length}">${boot(cycle)}</td><td rowspan="${runs.length}">${esc(cycle.outcome)}</td>`
          : ''
      out.push(`<tr${flagged ? ' class="flag"' : ''}>${lead}${runCells(run)}</tr>`)
    })
    const flag = cycleFlag(cycle)
    if (flag !== null) out.push(`<tr class="flag"><td colspan="12" class="flag-text">&#9888; cycle ${cycle.cycle}: ${esc(flag)}</td></tr>`)
  }
  out.push('</tbody></table>')
  return out.join('')
}

/** The runs outside campaigns: the text's table, a verdict coloured as a cycle's is (a pass on the same boot is not green). */
function plainRunsSection(runs: readonly PlainRunReport[]): string {
  const out = [
    `<section class="plain-runs" id="plain-runs"><h2>Runs outside campaigns</h2><table class="plain-runs"><thead><tr>${plainRunColumns.map((c) => `<th>${esc(c)}</th>`).join('')}</tr></thead><tbody>`,
  ]
  for (const run of runs) {
    const cells = plainRunCells(run)
    const v = run.verdict
    // Not verified, not judged or inconclusive: nothing was shown either way. A pass is green only when
    // verified after a reboot (a same boot, or one that could not be told, proves nothing of a cut).
    const counted = v === null || v.verdict === 'not-judged' || v.verdict === 'inconclusive' ? 'nothing' : verdictClass(run)
    const cls = counted === 'good' && v?.rebootedSinceWrite !== true ? '' : counted
    const row = cells.map((cell, i) =>
      i === cells.length - 1
        ? `<td class="${cls}"${v === null ? '' : ` title="${esc(v.summary)}"`}>${esc(cell)}</td>`
        : `<td${i >= 6 ? ' class="num"' : ''}>${esc(cell)}</td>`,
    )
    out.push(`<tr data-run="${esc(run.runId)}">${row.join('')}</tr>`)
  }
  out.push('</tbody></table>')
  if (runs.some((r) => r.verdict?.verdict === 'pass' && r.verdict.rebootedSinceWrite === false))
    out.push(`<p class="flag-text">&#9888; ${esc(plainSameBootFlag)}</p>`)
  out.push('</section>')
  return out.join('')
}

function cycleFlag(cycle: CycleReport): string | null {
  if (cycle.outcome === 'cut-failed') return cutFailedFlag(cycle)
  if (cycle.testedNothing === 'same-boot') return sameBootFlag
  if (cycle.control === 'not-noticed') return 'the control (none) lost nothing: this cut was not noticed, the cycle tested nothing'
  if (cycle.control === 'failed') return "the control's file was lost: its losses prove nothing about the cut"
  if (cycle.outcome === 'did-not-come-back') return 'the agent did not come back after the cut'
  return null
}

function runCells(run: RunReport | null): string {
  if (run === null) return '<td colspan="6">no runs</td>'
  const name = runLabel(run)
  const v = run.verdict
  if (v === null)
    return `<td>${esc(name)}</td><td class="num">${thousands(run.ackedThroughSeq)}</td><td></td><td></td><td></td><td>no verdict yet</td>`
  const counted = run.counted ?? v.verdict
  const cls = verdictClass(run)
  return `<td>${esc(name)}</td><td class="num">${thousands(v.acked)}</td><td class="num">${thousands(v.lost)}</td><td class="num">${thousands(v.torn)}</td><td class="num">${thousands(v.corrupt)}</td><td class="${cls}" title="${esc(v.summary)}">${esc(countedLabel(counted))}${v.reordered ? ', reordered' : ''}</td>`
}

/** One cycle's timeline: a lane per run, acks over time, the cut, the lost ranges. */
function timeline(c: CampaignReport, cycle: CycleReport, records: readonly RunRecord[], pointsPerLane: number): string {
  const laneCount = Math.max(1, records.length)
  const height = top + laneCount * (laneHeight + laneGap) + axisHeight
  const times: number[] = []
  for (const r of records) {
    times.push(r.run.announcedMs)
    const first = r.run.spans[0]
    const last = r.run.spans.at(-1)
    if (first !== undefined) times.push(first[2])
    if (last !== undefined) times.push(last[3])
  }
  for (const t of [cycle.steadyMs, cycle.plannedCutMs, cycle.cutMs]) if (t !== null) times.push(t)
  const caption = `Cycle ${cycle.cycle}: ${esc(cycle.outcome)}${cycle.outcome === 'cut-failed' ? ' &mdash; no cut made: tested nothing' : cycle.testedNothing === 'same-boot' ? ' &mdash; same boot: tested nothing' : cycle.control === 'not-noticed' ? ' &mdash; cut not noticed by the control' : ''}`
  const id = `cycle-${esc(c.name)}-${cycle.cycle}`
  if (times.length === 0) {
    return `<figure class="timeline" id="${id}"><figcaption>${caption}</figcaption><p>no runs to draw</p></figure>`
  }
  const t0 = Math.min(...times)
  const tLast = Math.max(t0 + 1, ...times)
  // A little room after the last moment, so the cut line and its label stay inside the frame.
  const t1 = tLast + (tLast - t0) * 0.04
  const x = (t: number) => laneLeft + ((t - t0) / (t1 - t0)) * (laneRight - laneLeft)
  const parts: string[] = []
  let tested = 0
  records.forEach((record, i) => {
    const y0 = top + i * (laneHeight + laneGap)
    const control = record.summary.method === 'none'
    const colour = control ? controlColour : palette[tested++ % palette.length]!
    const spans = record.run.spans
    const maxSeq = Math.max(1, spans.at(-1)?.[1] ?? 0)
    const y = (seq: number) => y0 + laneHeight - (seq / maxSeq) * (laneHeight - 4)
    const label = runLabel({ role: control ? 'control' : 'tested', method: record.summary.method, job: jobOf(record.run.meta.path) })
    parts.push(`<g class="lane-group" data-method="${esc(record.summary.method)}">`)
    parts.push(`<rect class="lane" x="${laneLeft}" y="${y0}" width="${laneRight - laneLeft}" height="${laneHeight}"/>`)
    parts.push(`<text x="8" y="${y0 + laneHeight / 2 - 2}">${esc(label)}</text>`)
    parts.push(`<text x="8" y="${y0 + laneHeight / 2 + 12}">${thousands(spans.at(-1)?.[1] ?? 0)} acked</text>`)
    for (const [from, to] of record.summary.verdict?.lostRanges ?? []) {
      const a = timeOfSeq(spans, from)
      const b = timeOfSeq(spans, to)
      if (a === null || b === null) continue
      const xa = x(Math.min(a, b))
      const w = Math.max(2, x(Math.max(a, b)) - xa)
      parts.push(
        `<rect class="lost" x="${xa.toFixed(1)}" y="${y0}" width="${w.toFixed(1)}" height="${laneHeight}"><title>lost seqs ${from}&ndash;${to}</title></rect>`,
      )
    }
    const points = sampleAcks(spans, t0, t1, pointsPerLane)
    if (points.length > 0) {
      parts.push(
        `<polyline class="acks" stroke="${colour}" points="${points.map(([t, s]) => `${x(t).toFixed(1)},${y(s).toFixed(1)}`).join(' ')}"/>`,
      )
    }
    parts.push('</g>')
  })
  const bottom = top + laneCount * (laneHeight + laneGap) - laneGap
  // Labels sit right of their line, or left of it near the right edge or when the cut is close by.
  const marker = (t: number | null, cls: string, text: string) => {
    if (t === null) return ''
    const left = cls !== 'cut' && (x(t) > laneRight - 60 || (cycle.cutMs !== null && Math.abs(x(cycle.cutMs) - x(t)) < 50))
    const label = left || x(t) > laneRight - 30 ? `x="${(x(t) - 3).toFixed(1)}" text-anchor="end"` : `x="${(x(t) + 3).toFixed(1)}"`
    return `<line class="${cls}" x1="${x(t).toFixed(1)}" y1="${top - 6}" x2="${x(t).toFixed(1)}" y2="${bottom}"/><text ${label} y="${top - 9}">${text}</text>`
  }
  parts.push(marker(cycle.steadyMs, 'steady', 'steady'))
  parts.push(
    marker(cycle.plannedCutMs !== null && cycle.plannedCutMs !== cycle.cutMs ? cycle.plannedCutMs : null, 'planned-cut', 'planned'),
  )
  parts.push(marker(cycle.cutMs, 'cut', 'cut'))
  parts.push(`<line class="axis" x1="${laneLeft}" y1="${bottom + 4}" x2="${laneRight}" y2="${bottom + 4}"/>`)
  for (let i = 0; i <= 4; i++) {
    const t = t0 + ((tLast - t0) * i) / 4
    const anchor = i === 0 ? 'start' : i === 4 ? 'end' : 'middle'
    parts.push(
      `<text x="${x(t).toFixed(1)}" y="${bottom + 18}" text-anchor="${anchor}">${i === 0 ? time(t0) : `+${durationMs(t - t0)}`}</text>`,
    )
  }
  return `<figure class="timeline" id="${id}"><figcaption>${caption}</figcaption><svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="acks over time, cycle ${cycle.cycle}">${parts.join('')}</svg></figure>`
}

/**
 * The acks of a run as (time, highest seq acked by then) points. Few spans are drawn as they are (each
 * a segment from its first to its last ack); many are sampled at `count` evenly spaced times, so a run
 * of hours costs the same as one of seconds.
 */
export function sampleAcks(spans: readonly AckSpan[], t0: number, t1: number, count: number): Array<[number, number]> {
  if (spans.length === 0) return []
  if (spans.length * 2 <= count) {
    const points: Array<[number, number]> = []
    for (const [from, to, first, last] of spans) points.push([first, from - 1], [last, to])
    return points
  }
  const points: Array<[number, number]> = []
  let j = 0
  let done = 0
  for (let i = 0; i <= count; i++) {
    const t = t0 + ((t1 - t0) * i) / count
    while (j < spans.length && spans[j]![3] <= t) done = Math.max(done, spans[j++]![1])
    let acked = done
    const span = spans[j]
    if (span !== undefined && span[2] <= t) {
      const fraction = span[3] === span[2] ? 1 : (t - span[2]) / (span[3] - span[2])
      acked = Math.max(acked, Math.floor(span[0] - 1 + (span[1] - span[0] + 1) * fraction))
    }
    points.push([t, acked])
  }
  return points
}

/** When the listener received the ack of seq (interpolated within its span); null when no span holds it or any after it. */
export function timeOfSeq(spans: readonly AckSpan[], seq: number): number | null {
  let lo = 0
  let hi = spans.length - 1
  while (lo <= hi) {
    const mid = (lo + hi) >> 1
    const [from, to, first, last] = spans[mid]!
    if (seq < from) hi = mid - 1
    else if (seq > to) lo = mid + 1
    else return to === from ? last : first + ((last - first) * (seq - from)) / (to - from)
  }
  // A seq beyond the last span (a verdict that disagrees with the acks on record): the last ack's time.
  return lo >= spans.length && spans.length > 0 ? spans.at(-1)![3] : null
}

/** Text and attribute values from disk, made inert. */
export function esc(s: string): string {
  return s.replace(/[&<>"']/g, (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[ch]!)
}
