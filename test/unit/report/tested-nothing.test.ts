/**
 * Campaigns whose cycles tested nothing, through the real command line on hand-made listener
 * directories: a pass of a cycle whose verdicts all saw the same boot, or whose control (none) lost
 * nothing, is counted and shown as "tested nothing", in the text, the JSON and the HTML; a campaign
 * without a control, or whose verdicts all saw the same boot, is flagged at the top of each rendering
 * and its headline never reads as a plain pass. A loss is still a fail whatever else.
 */
import t, { type Test } from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { runInProcess } from '../../fixtures/cli.js'
import { reportDocumentSchema, type CampaignReport } from '../../../src/report/schema.js'
import { craftListenerDir, type CraftedCampaign, type CraftedCycle } from '../../fixtures/report.js'

const device = { host: 'box-a', model: 'Samsung SSD 870 EVO 1TB', writeCache: 'write back', fileSystem: 'ext4' }
const sameBoot = { rebootedSinceWrite: false }

interface Rendered {
  readonly campaign: CampaignReport
  readonly text: string
  readonly html: string
}

/** The campaign's report as JSON (validated against the schema), text and HTML, each from its own run of the command. */
async function render(t: Test, campaign: CraftedCampaign): Promise<Rendered> {
  const dir = t.testdir()
  await craftListenerDir(dir, [campaign])
  const htmlPath = join(dir, 'report.html')
  const json = await runInProcess(['report', '--dir', dir, '--json', '--html', htmlPath])
  t.equal(json.code, 0, 'report --json exits 0')
  t.equal(json.stderr, '', 'nothing on stderr')
  const doc = reportDocumentSchema.parse(JSON.parse(json.stdout))
  t.equal(doc.formatVersion, 2)
  const text = await runInProcess(['report', '--dir', dir])
  t.equal(text.code, 0, 'report exits 0')
  return { campaign: doc.campaigns[0]!, text: text.stdout, html: readFileSync(htmlPath, 'utf8') }
}

/** The cells of the HTML cycle table's verdict column, in order (the last cell of each run's row). */
function htmlVerdictCells(html: string): string[] {
  const table = /<table class="cycles">.*?<\/table>/s.exec(html)?.[0] ?? ''
  return [...table.matchAll(/<td class="([^"]*)" title="[^"]*">([^<]*)<\/td><\/tr>/g)].map((m) => `${m[2]} [${m[1]}]`)
}

/** The HTML summary table's cell of a row. */
function htmlSummaryCell(html: string, label: string): string {
  return new RegExp(`<tr><th>${label}</th><td>([^<]*)</td></tr>`).exec(html)?.[1] ?? '(no such row)'
}

/** The lines before the side-by-side summary: the campaign's flags. */
function textTop(text: string): string[] {
  const lines = text.split('\n')
  return lines.slice(
    1,
    lines.findIndex((l) => l.startsWith('campaign ')),
  )
}

const cycles = (n: number, cycle: CraftedCycle): CraftedCycle[] => Array.from({ length: n }, () => cycle)

t.test('no control, the agent back on the same boot: flagged at the top, tested nothing, never a plain pass', async (t) => {
  const { campaign, text, html } = await render(t, {
    ...device,
    name: 'alone',
    cycles: [{ runs: [{ method: 'fdatasync', acked: 800, verdict: sameBoot }] }],
  })
  t.same(
    campaign.caveats.map((c) => c.code),
    ['no-control', 'same-boot'],
    'JSON: both caveats',
  )
  t.same(
    campaign.cycles.map((c) => [c.bootChanged, c.testedNothing, c.runs.map((r) => [r.verdict?.verdict, r.counted])]),
    [[false, 'same-boot', [['pass', 'tested-nothing']]]],
    'JSON: the stored verdict is kept, counted as tested nothing',
  )
  t.match(campaign.methods[0], { method: 'fdatasync', cycles: 1, verdicts: { pass: 0, 'tested-nothing': 1, fail: 0 } })

  t.same(
    textTop(text),
    [
      '',
      '! campaign alone ran no control (none): nothing shows that its cuts were real, so its passes are unconfirmed; give the agent --method with none added (e.g. --method fdatasync,none)',
      '! every verdict of campaign alone saw the same boot as its write: the machine never rebooted, the page cache held every record, and the campaign tested nothing; make the cut command cut the power (not restart the agent)',
      '',
    ],
    'text: the flags come first',
  )
  t.match(text, /^fdatasync\s+tested nothing 1$/m, 'text: the headline')
  t.notMatch(text, /^fdatasync\s+pass/m, 'text: no pass in the headline')
  t.match(text, /^ {2}1\s.*same boot\s+verdict\s+fdatasync\s+800\s+0\s+0\s+0\s+tested nothing$/m, 'text: the cycle line')
  t.match(text, /^ {2}! cycle 1: every verdict saw the same boot as the write \(no reboot\): the cycle tested nothing$/m)

  const banners = [...html.matchAll(/<p class="banner" data-caveat="([^"]+)">/g)].map((m) => m[1])
  t.same(banners, ['no-control', 'same-boot'], 'HTML: a banner per caveat')
  t.ok(html.indexOf('class="banner"') < html.indexOf('<section class="summary">'), 'HTML: the banners come before the summary')
  t.equal(htmlSummaryCell(html, 'fdatasync'), 'tested nothing 1', 'HTML: the headline')
  t.same(htmlVerdictCells(html), ['tested nothing [nothing]'], 'HTML: the verdict cell is not green')
  t.notMatch(html, /class="good"/, 'HTML: nothing green')
  t.match(html, /&#9888; cycle 1: every verdict saw the same boot/)
})

t.test('no control, new boots: passes count, but the headline says they are unconfirmed', async (t) => {
  const { campaign, text, html } = await render(t, {
    ...device,
    name: 'nocontrol',
    cycles: cycles(2, { runs: [{ method: 'fdatasync', acked: 500 }] }),
  })
  t.same(
    campaign.caveats.map((c) => c.code),
    ['no-control'],
  )
  t.same(
    campaign.cycles.map((c) => [c.testedNothing, c.runs[0]!.counted]),
    [
      [null, 'pass'],
      [null, 'pass'],
    ],
  )
  t.match(campaign.methods[0], { verdicts: { pass: 2, 'tested-nothing': 0 } })
  t.match(textTop(text)[1], /^! campaign nocontrol ran no control \(none\)/)
  t.match(text, /^fdatasync\s+pass 2 \(unconfirmed: no control\)$/m, 'text: the headline is not a plain pass')
  t.equal(htmlSummaryCell(html, 'fdatasync'), 'pass 2 (unconfirmed: no control)', 'HTML: the headline')
  t.same(htmlVerdictCells(html), ['pass [good]', 'pass [good]'], 'HTML: each cycle passed')
  t.match(html, /<p class="banner" data-caveat="no-control">/)
})

t.test('a control that noticed no cut in any cycle: every cycle tested nothing, flagged', async (t) => {
  const { campaign, text, html } = await render(t, {
    ...device,
    name: 'unnoticed',
    cycles: cycles(3, {
      runs: [
        { method: 'fdatasync', acked: 900 },
        { method: 'none', acked: 1000 },
      ],
    }),
  })
  t.same(
    campaign.caveats.map((c) => c.code),
    ['nothing-tested'],
  )
  t.same(
    campaign.cycles.map((c) => [c.bootChanged, c.control, c.testedNothing, c.runs.map((r) => r.counted)]),
    cycles(3, { runs: [] }).map(() => [true, 'not-noticed', 'control-not-noticed', ['tested-nothing', 'inconclusive']]),
  )
  t.match(
    campaign.methods.find((m) => m.method === 'fdatasync'),
    { verdicts: { pass: 0, 'tested-nothing': 3 } },
  )
  t.match(
    campaign.methods.find((m) => m.method === 'none'),
    { verdicts: { pass: 0, inconclusive: 3 } },
  )
  t.match(
    textTop(text)[1],
    /^! no cycle of campaign unnoticed tested anything: in every one the control \(none\) lost nothing or no reboot was seen/,
  )
  t.match(text, /^fdatasync\s+tested nothing 3$/m)
  t.match(text, /^none \(control\)\s+inconclusive 3$/m)
  t.equal(text.match(/^ {2}! cycle \d: the control \(none\) lost nothing/gm)?.length, 3, 'each cycle flagged')
  t.equal(htmlSummaryCell(html, 'fdatasync'), 'tested nothing 3')
  t.same(
    htmlVerdictCells(html),
    cycles(3, { runs: [] }).flatMap(() => ['tested nothing [nothing]', 'inconclusive []']),
  )
  t.notMatch(html, /class="good"/, 'HTML: nothing green')
  t.match(html, /<p class="banner" data-caveat="nothing-tested">/)
})

t.test('every verdict on the same boot, with a control: flagged, every cycle tested nothing', async (t) => {
  const { campaign, text, html } = await render(t, {
    ...device,
    name: 'sameboot',
    cycles: cycles(2, {
      runs: [
        { method: 'fsync', acked: 700, verdict: sameBoot },
        { method: 'none', acked: 700, verdict: sameBoot },
      ],
    }),
  })
  t.same(
    campaign.caveats.map((c) => c.code),
    ['same-boot'],
    'a control ran: only the same boot is flagged',
  )
  t.same(
    campaign.cycles.map((c) => [c.bootChanged, c.testedNothing]),
    [
      [false, 'same-boot'],
      [false, 'same-boot'],
    ],
  )
  t.match(
    campaign.methods.find((m) => m.method === 'fsync'),
    { verdicts: { pass: 0, 'tested-nothing': 2 } },
  )
  t.match(textTop(text)[1], /^! every verdict of campaign sameboot saw the same boot as its write/)
  t.match(text, /^fsync\s+tested nothing 2$/m)
  t.equal(text.match(/^ {2}! cycle \d: every verdict saw the same boot/gm)?.length, 2, 'each cycle flagged once (for the boot)')
  t.equal(htmlSummaryCell(html, 'fsync'), 'tested nothing 2')
  t.match(html, /<p class="banner" data-caveat="same-boot">/)
})

t.test('a mix: the cycles that tested something still count as passes, the others as tested nothing', async (t) => {
  const noticed: CraftedCycle = {
    runs: [
      { method: 'fdatasync', acked: 900 },
      { method: 'none', acked: 1000, lost: [[801, 1000]] },
    ],
  }
  const { campaign, text, html } = await render(t, {
    ...device,
    name: 'mixed',
    cycles: [
      noticed,
      {
        runs: [
          { method: 'fdatasync', acked: 900 },
          { method: 'none', acked: 1000 },
        ],
      },
      {
        runs: [
          { method: 'fdatasync', acked: 900, verdict: sameBoot },
          { method: 'none', acked: 1000, verdict: sameBoot },
        ],
      },
      noticed,
    ],
  })
  t.same(campaign.caveats, [], 'some cycles tested something: no campaign flag')
  t.same(
    campaign.cycles.map((c) => [c.testedNothing, c.runs[0]!.counted]),
    [
      [null, 'pass'],
      ['control-not-noticed', 'tested-nothing'],
      ['same-boot', 'tested-nothing'],
      [null, 'pass'],
    ],
  )
  t.match(
    campaign.methods.find((m) => m.method === 'fdatasync'),
    { cycles: 4, verdicts: { pass: 2, 'tested-nothing': 2, fail: 0 } },
  )
  t.same(textTop(text), [''], 'text: no flag at the top')
  t.match(text, /^fdatasync\s+pass 2, tested nothing 2$/m)
  t.match(text, /^ {2}! cycle 2: the control \(none\) lost nothing/m)
  t.match(text, /^ {2}! cycle 3: every verdict saw the same boot/m)
  t.notMatch(text, /^ {2}! cycle [14]:/m)
  t.equal(htmlSummaryCell(html, 'fdatasync'), 'pass 2, tested nothing 2')
  t.same(htmlVerdictCells(html), [
    'pass [good]',
    'pass []',
    'tested nothing [nothing]',
    'inconclusive []',
    'tested nothing [nothing]',
    'inconclusive []',
    'pass [good]',
    'pass []',
  ])
  t.notMatch(html, /class="banner"/, 'HTML: no banner')
})

t.test('a real loss is a fail whatever else: same boot, no control', async (t) => {
  const { campaign, text, html } = await render(t, {
    ...device,
    name: 'lossy',
    cycles: [
      { runs: [{ method: 'fsync', acked: 1000, lost: [[901, 1000]], verdict: sameBoot }] },
      { runs: [{ method: 'fsync', acked: 1000, verdict: sameBoot }] },
    ],
  })
  t.same(
    campaign.caveats.map((c) => c.code),
    ['no-control', 'same-boot'],
  )
  t.same(
    campaign.cycles.map((c) => c.runs.map((r) => [r.verdict?.verdict, r.counted, r.verdict?.lost])),
    [[['fail', 'fail', 100]], [['pass', 'tested-nothing', 0]]],
    'the loss stays a fail; the pass of the same boot tested nothing',
  )
  t.match(campaign.methods[0], { cyclesWithLoss: 1, lost: 100, verdicts: { fail: 1, pass: 0, 'tested-nothing': 1 } })
  t.match(text, /^fsync\s+fail 1, tested nothing 1$/m)
  t.match(text, /^ {2}1\s.*fsync\s+1,000\s+100\s+0\s+0\s+fail$/m)
  t.equal(htmlSummaryCell(html, 'fsync'), 'fail 1, tested nothing 1')
  t.same(htmlVerdictCells(html), ['fail [bad]', 'tested nothing [nothing]'])
})
