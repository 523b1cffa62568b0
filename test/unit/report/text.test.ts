/**
 * The text report from a hand-made document (validated against reportDocumentSchema first, as the
 * command does): the campaigns side by side, then each one's cycles, flags for the cuts that tested
 * nothing or failed, and warnings. Strings that came from disk (device names, the cut command, warnings)
 * reach the terminal on one line without control characters, and long cells are cut. The expected
 * lines are written out by hand from the layout: labels padded to the widest, two spaces between
 * columns, numbers right-aligned.
 */
import t from 'tap'
import {
  reportDocumentSchema,
  type CampaignReport,
  type CycleReport,
  type ReportDocument,
  type RunReport,
} from '../../../src/report/schema.js'
import { boot, durationMs, relative, renderText, runLabel, summaryRows, thousands, time } from '../../../src/report/text.js'

const steadyMs = Date.UTC(2026, 0, 1, 0, 0, 0)
const noLoss = { verdict: 'pass' as const, acked: 12_345, intact: 12_345, lost: 0, torn: 0, corrupt: 0, lossWindowMs: null }

function run(over: Partial<RunReport> & Pick<RunReport, 'method' | 'role'>): RunReport {
  const made = {
    runId: '0123456789abcdef',
    job: null,
    announcedMs: steadyMs - 3000,
    ackedThroughSeq: 12_345,
    end: 'interrupted' as const,
    verdict: { ...noLoss, reordered: false, lostRanges: [], rebootedSinceWrite: true, summary: 'PASS', atMs: steadyMs + 60_000 },
    ...over,
  }
  return { ...made, counted: over.counted ?? made.verdict?.verdict ?? null }
}

const cycle1: CycleReport = {
  cycle: 1,
  timeMs: steadyMs,
  steadyMs,
  plannedCutMs: steadyMs + 12_300,
  cutMs: steadyMs + 12_400,
  cutExitCode: 0,
  cameBackMs: steadyMs + 50_000,
  outcome: 'verdict',
  bootChanged: true,
  control: 'noticed',
  testedNothing: null,
  runs: [
    run({ method: 'fdatasync', role: 'tested' }),
    run({
      method: 'none',
      role: 'control',
      ackedThroughSeq: 1000,
      verdict: {
        verdict: 'fail',
        acked: 1000,
        intact: 990,
        lost: 10,
        torn: 0,
        corrupt: 0,
        lossWindowMs: 1500,
        reordered: true,
        lostRanges: [[991, 1000]],
        rebootedSinceWrite: true,
        summary: 'FAIL',
        atMs: steadyMs + 60_000,
      },
    }),
  ],
}

const cycle2: CycleReport = {
  cycle: 2,
  timeMs: null,
  steadyMs: null,
  plannedCutMs: null,
  cutMs: null,
  cutExitCode: 1,
  cameBackMs: null,
  outcome: 'cut-failed',
  bootChanged: null,
  control: null,
  testedNothing: null,
  runs: [],
}

const ssd: CampaignReport = {
  name: 'ssd-a',
  caveats: [],
  settings: {
    cycles: 3,
    cycle: 2,
    phase: 'waiting-for-writer',
    detail: null,
    cutCommand: 'ipmitool power off\n; rm -rf ~',
    cutAfterS: [5, 20],
    rebootTimeoutS: 600,
    seed: 42,
    createdMs: steadyMs - 100_000,
  },
  device: {
    hosts: ['lab-1'],
    paths: [`/mnt/${'x'.repeat(60)}`],
    model: ['Samsung SSD 870\x1b[2J\x1b]0;owned\x07', 'WD Red'],
    firmware: [],
    writeCache: ['write back'],
    fileSystem: ['ext4'],
    kernel: ['6.1.0'],
    virtualMachine: [false],
  },
  cycles: [cycle1, cycle2],
  methods: [
    {
      method: 'none',
      role: 'control',
      cycles: 1,
      runs: 1,
      cyclesWithLoss: 1,
      verdicts: { pass: 0, fail: 1, 'tested-nothing': 0, inconclusive: 0, 'not-judged': 0 },
      acked: 1000,
      lost: 10,
      torn: 0,
      corrupt: 0,
      largestLossWindowMs: 1500,
      reorderingCycles: [1],
    },
    {
      method: 'fdatasync',
      role: 'tested',
      cycles: 1,
      runs: 1,
      cyclesWithLoss: 0,
      verdicts: { pass: 1, fail: 0, 'tested-nothing': 0, inconclusive: 0, 'not-judged': 0 },
      acked: 12_345,
      lost: 0,
      torn: 0,
      corrupt: 0,
      largestLossWindowMs: null,
      reorderingCycles: [],
    },
  ],
  control: { ran: 1, noticed: 1, detectionRate: 1, notNoticedCycles: [], failedCycles: [] },
  warnings: ['run 0123456789abcdef is listed\nin two cycles'],
}

const doc: ReportDocument = reportDocumentSchema.parse({
  tool: 'plugcheck report',
  formatVersion: 2,
  dir: '/srv/plugcheck',
  campaigns: [ssd],
  warnings: ['a torn\x07log tail in runs/fedcba9876543210\r\n'],
})

const text = renderText(doc)
const lines = text.split('\n')
/** The widest summary label, '  lost / torn / corrupt', is 23 characters. */
const summary = (label: string, cell: string) => `${label.padEnd(23)}  ${cell}`

t.test('one line ending: the text ends with exactly one newline', async (t) => {
  t.ok(text.endsWith('\n') && !text.endsWith('\n\n'))
  t.equal(lines[0], 'plugcheck report: /srv/plugcheck')
  t.equal(lines[1], '')
})

t.test('no control character reaches the terminal from the document', async (t) => {
  t.notMatch(text.replaceAll('\n', ''), /[\u0000-\u001f\u007f-\u009f]/)
})

t.test('the side-by-side summary, row by row', async (t) => {
  const expected = [
    summary('campaign', 'ssd-a'),
    summary('host', 'lab-1'),
    summary('path', `/mnt/${'x'.repeat(38)}…`),
    summary('device', 'Samsung SSD 870 [2J ]0;owned ; WD Red'),
    summary('firmware', 'not recorded'),
    summary('write cache', 'write back'),
    summary('file system', 'ext4'),
    summary('kernel', '6.1.0'),
    summary('virtual machine', 'no'),
    summary('cycles', '1 of 3 judged, waiting-for-writer'),
    '',
    summary('fdatasync', 'pass 1'),
    summary('  cycles with loss', '0 of 1'),
    summary('  acked', '12,345'),
    summary('  lost / torn / corrupt', '0 / 0 / 0'),
    summary('  largest loss window', '-'),
    summary('  reordering', 'none seen'),
    '',
    summary('none (control)', 'fail 1'),
    summary('  cycles with loss', '1 of 1'),
    summary('  acked', '1,000'),
    summary('  lost / torn / corrupt', '10 / 0 / 0'),
    summary('  detection rate', '1/1 cuts noticed (100%)'),
    summary('  cuts not noticed', 'none'),
    summary('  control file lost', 'none'),
  ]
  t.same(lines.slice(2, 2 + expected.length), expected)
  t.equal(lines[2 + expected.length], '', 'a blank line before the cycles')
})

t.test('the cycle table: settings on one line, times, cuts after steady, numbers right-aligned', async (t) => {
  const start = lines.indexOf('campaign ssd-a')
  t.ok(start > 0, 'the campaign’s heading')
  t.equal(lines[start + 1], '  3 cycles, now waiting-for-writer; cut by: ipmitool power off ; rm -rf ~; 5-20 s after steady, seed 42')
  const head = lines[start + 2]!
  const rows = lines.slice(start + 3, start + 6)
  // Columns: cycle, time, cut planned, cut at, boot, outcome, method, acked, lost, torn, corrupt, verdict.
  const cells = (line: string) => line.trim().split(/ {2,}/)
  t.same(cells(head), [
    'cycle',
    'time (UTC)',
    'cut planned',
    'cut at',
    'boot',
    'outcome',
    'method',
    'acked',
    'lost',
    'torn',
    'corrupt',
    'verdict',
  ])
  t.same(cells(rows[0]!), [
    '1',
    '2026-01-01 00:00:00',
    '+12.3 s',
    '+12.4 s',
    'new boot',
    'verdict',
    'fdatasync',
    '12,345',
    '0',
    '0',
    '0',
    'pass',
  ])
  t.same(
    cells(rows[1]!),
    ['none (control)', '1,000', '10', '0', '0', 'fail, reordered'],
    'the second run of a cycle leaves the cycle cells blank',
  )
  t.same(cells(rows[2]!), ['2', '-', '-', '-', '?', 'cut-failed', '-'])
  // The acked column is right-aligned: "1,000" ends where "12,345" ends.
  t.equal(rows[1]!.indexOf('1,000') + '1,000'.length, rows[0]!.indexOf('12,345') + '12,345'.length)
  t.equal(head.indexOf('acked') + 'acked'.length, rows[0]!.indexOf('12,345') + '12,345'.length)
  t.equal(lines[start + 6], '  ! cycle 2: the cut command failed (exit 1): no cut was made, the cycle tested nothing')
  t.equal(lines[start + 7], '  warning: run 0123456789abcdef is listed in two cycles')
})

t.test('the document’s own warnings come last, on one line', async (t) => {
  t.equal(lines.at(-2), 'warning: a torn log tail in runs/fedcba9876543210')
})

t.test('flags for a control that noticed nothing, a lost control file, an agent that did not come back', async (t) => {
  const flagged = (over: Partial<CycleReport>): CycleReport => ({ ...cycle1, runs: [], ...over })
  const campaign: CampaignReport = {
    ...ssd,
    cycles: [
      flagged({ cycle: 1, control: 'not-noticed' }),
      flagged({ cycle: 2, control: 'failed' }),
      flagged({ cycle: 3, outcome: 'did-not-come-back', control: null }),
      flagged({ cycle: 4, outcome: 'cut-failed', cutExitCode: null, control: null }),
      flagged({ cycle: 5, outcome: 'cut-failed', cutExitCode: 1, control: 'not-noticed' }),
    ],
    control: { ran: 2, noticed: 0, detectionRate: 0, notNoticedCycles: [1], failedCycles: [2] },
    warnings: [],
  }
  const out = renderText(reportDocumentSchema.parse({ ...doc, campaigns: [campaign], warnings: [] })).split('\n')
  t.ok(out.includes('  ! cycle 1: the control (none) lost nothing: this cut was not noticed, the cycle tested nothing'))
  t.ok(out.includes("  ! cycle 2: the control's file was lost: its losses prove nothing about the cut"))
  t.ok(out.includes('  ! cycle 3: the agent did not come back after the cut'))
  t.ok(out.includes('  ! cycle 4: the cut command failed: no cut was made, the cycle tested nothing'), 'no exit code when there is none')
  t.ok(out.includes('  ! cycle 5: the cut command failed (exit 1): no cut was made, the cycle tested nothing'))
  t.notOk(
    out.some((line) => line.startsWith('  ! cycle 5: the control')),
    'a cycle whose cut command failed is never called a cut the control did not notice',
  )
  t.ok(out.includes(summary('  detection rate', '0/2 cuts noticed (0%)')))
  t.ok(out.includes(summary('  cuts not noticed', 'cycles 1')))
  t.ok(out.some((line) => line.startsWith(summary('  control file lost', 'cycles 2 ('))))
})

t.test('the summary says a lost control file’s reason whole, within the column width', async (t) => {
  const campaign: CampaignReport = {
    ...ssd,
    control: { ran: 2, noticed: 1, detectionRate: 0.5, notNoticedCycles: [], failedCycles: [2] },
  }
  const out = renderText(reportDocumentSchema.parse({ ...doc, campaigns: [campaign] })).split('\n')
  const row = out.find((line) => line.startsWith('  control file lost'))
  t.equal(row, summary('  control file lost', 'cycles 2 (its fsynced creation lost)'))
})

t.test('summaryRows: two campaigns side by side, a method one of them lacks is "-", jobs said when runs differ', async (t) => {
  const other: CampaignReport = {
    ...ssd,
    name: 'hdd-b',
    settings: null,
    cycles: [cycle2],
    methods: [{ ...ssd.methods[1]!, method: 'fsync', cycles: 2, runs: 8 }],
    control: null,
  }
  const rows = summaryRows([ssd, other])
  t.same(rows[0], ['campaign', 'ssd-a', 'hdd-b'])
  t.same(
    rows.find((r) => r[0] === 'cycles'),
    ['cycles', '1 of 3 judged, waiting-for-writer', '1 (no campaign file)'],
  )
  // Each method's rows start after an empty row.
  t.same(
    rows.filter((_, i) => i > 0 && rows[i - 1]!.length === 0).map((r) => r[0]),
    ['fdatasync', 'fsync', 'none (control)'],
    'tested methods by name, the control last',
  )
  const fsyncAt = rows.findIndex((r) => r[0] === 'fsync')
  t.same(rows[fsyncAt], ['fsync', '-', 'pass 1'])
  t.same(rows[fsyncAt + 2], ['  runs (jobs)', '-', '8'], 'runs said, since 8 runs in 2 cycles')
  t.same(
    rows.find((r) => r[0] === '  detection rate'),
    ['  detection rate', '1/1 cuts noticed (100%)', '-'],
  )
})

t.test('the small formatters', async (t) => {
  t.equal(thousands(0), '0')
  t.equal(thousands(1_234_567), '1,234,567')
  t.equal(durationMs(0.4), '0 ms')
  t.equal(durationMs(999), '999 ms')
  t.equal(durationMs(1000), '1.00 s')
  t.equal(durationMs(1234), '1.23 s')
  t.equal(durationMs(12_340), '12.3 s')
  t.equal(time(null), '-')
  t.equal(time(0), '1970-01-01 00:00:00')
  t.equal(time(Date.UTC(2026, 11, 31, 23, 59, 59, 999)), '2026-12-31 23:59:59')
  t.equal(relative(null, steadyMs), '-')
  t.equal(relative(steadyMs + 1500, steadyMs), '+1.5 s')
  t.equal(relative(steadyMs - 2500, steadyMs), '-2.5 s')
  t.equal(relative(steadyMs, steadyMs), '+0.0 s')
  t.equal(relative(Date.UTC(2026, 0, 1, 13, 5, 7, 250), null), '13:05:07.250', 'the time of day without steady')
  t.equal(boot({ ...cycle1, bootChanged: true }), 'new boot')
  t.equal(boot({ ...cycle1, bootChanged: false }), 'same boot')
  t.equal(boot({ ...cycle1, bootChanged: null }), '?')
  t.equal(runLabel({ role: 'control', method: 'none', job: null }), 'none (control)')
  t.equal(runLabel({ role: 'tested', method: 'fdatasync', job: null }), 'fdatasync')
  t.equal(runLabel({ role: 'tested', method: 'fsync', job: 3 }), 'fsync job 3')
})
