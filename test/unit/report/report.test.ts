/**
 * plugcheck report on hand-made listener directories (runs written through the ack store's own API,
 * campaign files as campaignFileSchema describes them), through the real command line: text and JSON
 * of a 3-cycle campaign, two campaigns side by side, a damaged campaign file, unknown campaigns.
 */
import t, { type Test } from 'tap'
import { mkdirSync, writeFileSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { runInProcess } from '../../fixtures/cli.js'
import { reportDocumentSchema, type ReportDocument } from '../../../src/report/schema.js'
import { baseMs, craftListenerDir, cycleSpacingMs, otherDevice, threeCycles, type CraftedCampaign } from '../../fixtures/report.js'
import { loadListenerDir } from '../../../src/report/load.js'
import { craftMeta } from '../../fixtures/crafted-run.js'
import { AckStore } from '../../../src/store/ack-store.js'
import { campaignFileSchema, campaignFileText } from '../../../src/store/campaign-file.js'
import { maxPointsPerLane, sampleAcks, timeOfSeq } from '../../../src/report/html.js'
import type { AckSpan } from '../../../src/protocol/messages.js'

async function jsonReport(t: Test, args: string[]): Promise<ReportDocument> {
  const result = await runInProcess(['report', ...args, '--json'])
  t.equal(result.code, 0, `report ${args.join(' ')} exits 0`)
  t.equal(result.stderr, '', 'nothing on stderr')
  return reportDocumentSchema.parse(JSON.parse(result.stdout))
}

t.test('a 3-cycle campaign: per cycle, per method, the control and the device', async (t) => {
  const dir = t.testdir()
  await craftListenerDir(dir, [threeCycles])
  const doc = await jsonReport(t, ['--dir', dir])
  t.equal(doc.campaigns.length, 1)
  const c = doc.campaigns[0]!
  t.equal(c.name, 'ssd-a')
  t.same(c.warnings, [])
  t.same(
    c.cycles.map((y) => [y.cycle, y.outcome, y.bootChanged, y.control, y.runs.map((r) => r.method)]),
    [
      [1, 'verdict', true, 'noticed', ['fdatasync', 'fsync', 'none']],
      [2, 'verdict', true, 'noticed', ['fdatasync', 'fsync', 'none']],
      [3, 'verdict', true, 'not-noticed', ['fdatasync', 'fsync', 'none']],
    ],
    'every cycle, its outcome, the boot and the methods (the control last)',
  )
  for (const y of c.cycles) {
    t.ok(
      y.cutMs !== null && y.plannedCutMs !== null && y.steadyMs !== null && y.cutMs > y.steadyMs,
      `cycle ${y.cycle}: steady, planned and actual cut`,
    )
  }
  t.same(
    c.cycles[1]!.runs.map((r) => [r.method, r.verdict?.acked, r.verdict?.lost, r.verdict?.torn, r.verdict?.corrupt, r.verdict?.verdict]),
    [
      ['fdatasync', 1200, 0, 0, 0, 'pass'],
      ['fsync', 1100, 151, 0, 0, 'fail'],
      ['none', 1300, 300, 0, 0, 'pass'],
    ],
    'cycle 2 per method: acked, lost, torn, corrupt, verdict',
  )
  const method = (name: string) => c.methods.find((m) => m.method === name)!
  t.match(
    method('fdatasync'),
    {
      role: 'tested',
      cycles: 3,
      cyclesWithLoss: 0,
      acked: 3600,
      lost: 0,
      largestLossWindowMs: null,
      reorderingCycles: [],
      verdicts: { pass: 2, fail: 0, 'tested-nothing': 1 },
    },
    'the honest method passed every cycle that tested something (cycle 3: the control noticed no cut)',
  )
  t.match(
    method('fsync'),
    { role: 'tested', cycles: 3, cyclesWithLoss: 3, acked: 3500, lost: 451, largestLossWindowMs: 398, verdicts: { pass: 0, fail: 3 } },
    'the lying method lost in every cycle',
  )
  t.match(method('none'), { role: 'control', cycles: 3, cyclesWithLoss: 2, lost: 700 })
  t.equal(c.methods.at(-1)!.method, 'none', 'the control comes last')
  t.same(
    c.control,
    { ran: 3, noticed: 2, detectionRate: 2 / 3, notNoticedCycles: [3], failedCycles: [] },
    'detection rate 2/3, cycle 3 flagged',
  )
  t.same(c.device, {
    hosts: ['box-a'],
    paths: ['/mnt/test/ssd-a.dat'],
    model: ['ATA Samsung SSD 870 EVO 1TB'],
    firmware: ['SVT02B6Q'],
    writeCache: ['write back (sdb)'],
    fileSystem: ['ext4 on /mnt/test'],
    kernel: ['linux 6.1.0-28-amd64'],
    virtualMachine: [false],
  })
  t.match(c.settings, { cycles: 3, phase: 'done', cutCommand: 'ipmitool -H bmc-box-a chassis power cycle', cutAfterS: [2, 5], seed: 42 })

  const text = await runInProcess(['report', '--dir', dir])
  t.equal(text.code, 0)
  t.equal(text.stderr, '')
  const out = text.stdout
  t.match(out, /^device\s+ATA Samsung SSD 870 EVO 1TB$/m)
  t.match(out, /^write cache\s+write back \(sdb\)$/m)
  t.match(out, /^fdatasync\s+pass 2, tested nothing 1$/m)
  t.match(out, /^fsync\s+fail 3$/m)
  t.match(out, /^ {2}cycles with loss\s+3 of 3$/m)
  t.match(out, /^ {2}largest loss window\s+398 ms$/m)
  t.match(out, /^ {2}detection rate\s+2\/3 cuts noticed \(67%\)$/m)
  t.match(out, /^ {2}cuts not noticed\s+cycles 3$/m)
  t.match(out, /^ {2}! cycle 3: the control \(none\) lost nothing: this cut was not noticed/m)
  t.notMatch(out, /! cycle [12]:/, 'only cycle 3 is flagged')
  t.match(
    out,
    /^ {2}2\s+2025-01-06 09:10:\d\d\s+\+\d+\.\d s\s+\+\d+\.\d s\s+new boot\s+verdict\s+fdatasync\s+1,200\s+0\s+0\s+0\s+pass$/m,
    'a cycle line',
  )
  t.match(out, /^ {2}\s+fsync\s+1,100\s+151\s+0\s+0\s+fail$/m, 'the next method of the cycle on its own line')
})

t.test('two campaigns on two devices print side by side', async (t) => {
  const dir = t.testdir()
  await craftListenerDir(dir, [threeCycles, otherDevice])
  const result = await runInProcess(['report', '--dir', dir, '--campaign', 'ssd-a', 'hdd-b'])
  t.equal(result.code, 0)
  const lines = result.stdout.split('\n')
  const row = (label: string) => lines.find((l) => l.startsWith(`${label} `)) ?? ''
  t.match(row('campaign'), /^campaign\s+ssd-a\s+hdd-b$/, 'one column per campaign, in the order asked')
  t.match(row('device'), /^device\s+ATA Samsung SSD 870 EVO 1TB\s+ATA WDC WD40EFRX-68N32N0$/)
  t.match(row('write cache'), /^write cache\s+write back \(sdb\)\s+write through \(sdb\)$/)
  t.match(row('file system'), /^file system\s+ext4 on \/mnt\/test\s+xfs on \/mnt\/test$/)
  t.match(row('fsync'), /^fsync\s+fail 3\s+-$/, 'a method one campaign did not run is a dash')
  const column = row('campaign').indexOf('hdd-b')
  for (const label of ['device', 'write cache', 'cycles', 'fsync', '  detection rate']) {
    const line = lines.find((l) => l.startsWith(`${label} `)) ?? ''
    t.ok(line.slice(column - 2, column) === '  ' && line[column] !== ' ', `${label}: the second column starts where its header does`)
  }
  t.match(lines.find((l) => l.startsWith('  detection rate')) ?? '', /2\/3 cuts noticed \(67%\)\s+2\/2 cuts noticed \(100%\)$/)
  t.ok(
    lines.indexOf('campaign ssd-a') >= 0 && lines.indexOf('campaign hdd-b') > lines.indexOf('campaign ssd-a'),
    'then each campaign cycle by cycle',
  )

  const doc = await jsonReport(t, ['--dir', dir])
  t.same(
    doc.campaigns.map((c) => c.name),
    ['hdd-b', 'ssd-a'],
    'without --campaign: every campaign, by name',
  )
  t.same(doc.campaigns[0]!.control, { ran: 2, noticed: 2, detectionRate: 1, notNoticedCycles: [], failedCycles: [] })
  t.same(
    doc.campaigns[0]!.cycles.map((y) => y.runs.length),
    [2, 2],
    'each campaign holds only its own runs',
  )
})

t.test('a damaged campaign file is one line naming it, exit 3', async (t) => {
  const dir = t.testdir()
  await craftListenerDir(dir, [threeCycles, otherDevice])
  const path = join(dir, 'campaigns', 'ssd-a.json')
  const good = readFileSync(path, 'utf8')
  // An older listener's file has no checksum: the schema and the history's order are what check it.
  const { xxh64: _checksum, ...legacy } = JSON.parse(good) as Record<string, unknown> & { history: unknown[] }
  const cases: Array<[string, string | (() => void), RegExp]> = [
    ['not json', '{"version": 1, "name": "ssd-a", "cyc', /is damaged: its \d+ bytes are not JSON$/],
    ['a field missing', JSON.stringify({ ...legacy, history: undefined }), /is damaged: field history is missing$/],
    [
      'a field out of range',
      JSON.stringify({ ...legacy, cutAfterS: [9, 2] }),
      /is damaged: field cutAfterS is not valid \(cut-after MIN-MAX runs backwards\)$/,
    ],
    ['another campaign', JSON.stringify({ ...legacy, name: 'hdd-b' }), /is damaged: it describes campaign hdd-b$/],
    [
      'a history out of order',
      JSON.stringify({ ...legacy, history: [legacy.history[1], legacy.history[0], legacy.history[2]] }),
      /is damaged: its history is out of order \(entry 1 is cycle 2\)$/,
    ],
    ['not JSON at all', Buffer.from([0xff, 0, 0x13, 0x37]).toString('latin1'), /is damaged: its \d+ bytes are not JSON$/],
    // One bit of a cut time's last digit (still a number): only the checksum can tell.
    [
      'a bit flipped in a value',
      good.replace(/("cutMs": \d+)(\d),/, (_m, head: string, digit: string) => `${head}${String.fromCharCode(digit.charCodeAt(0) ^ 1)},`),
      /is damaged: it does not match its checksum \(field xxh64\)$/,
    ],
    [
      'a bit flipped in the checksum',
      good.replace(/"xxh64": "(.)/, (_m, c: string) => `"xxh64": "${c === '0' ? '1' : '0'}`),
      /is damaged: it does not match its checksum \(field xxh64\)$/,
    ],
    [
      "the checksum field's name damaged",
      good.replace('"xxh64"', '"xxh65"'),
      /is damaged: field "xxh65" is not a campaign file's \(a damaged name\?\)$/,
    ],
  ]
  t.not(cases.at(-3)![1], good, 'a cut time was flipped')
  for (const [what, content, message] of cases) {
    writeFileSync(path, content as string)
    for (const args of [[], ['--campaign', 'ssd-a'], ['--json'], ['--html', join(dir, 'r.html')]]) {
      const result = await runInProcess(['report', '--dir', dir, ...args])
      t.equal(result.code, 3, `${what} ${args.join(' ')}: exit 3`)
      t.equal(result.stdout, '', 'no report')
      const [first, hint, ...rest] = result.stderr.trimEnd().split('\n')
      t.match(
        first,
        new RegExp(`^plugcheck: campaign file ${path.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} ${message.source.slice(0)}`),
        `${what}: names the file`,
      )
      t.match(hint, /^hint: /)
      t.same(rest, [])
    }
    const other = await runInProcess(['report', '--dir', dir, '--campaign', 'hdd-b'])
    t.equal(other.code, 0, `${what}: another campaign still reports`)
  }
  writeFileSync(path, JSON.stringify(legacy, null, 2))
  const older = await runInProcess(['report', '--dir', dir, '--campaign', 'ssd-a'])
  t.equal(older.code, 0, "an older listener's file without a checksum still reports")
  t.match(older.stdout, /^fsync\s+fail 3$/m)
  writeFileSync(path, good)
  mkdirSync(join(dir, 'campaigns', 'x.json'))
  const planted = await runInProcess(['report', '--dir', dir])
  t.equal(planted.code, 3, 'a directory named like a campaign file is damage')
  t.match(planted.stderr, /^plugcheck: campaign file .*x\.json is damaged: not a regular file\n/)
})

t.test("an unknown campaign, or a directory that is not a listener's: exit 2", async (t) => {
  const dir = t.testdir()
  await craftListenerDir(dir, [threeCycles])
  const unknown = await runInProcess(['report', '--dir', dir, '--campaign', 'ssd-a', 'nvme-z'])
  t.equal(unknown.code, 2)
  t.equal(unknown.stdout, '')
  t.match(unknown.stderr, /^plugcheck: .* holds no campaign named nvme-z\nhint: campaigns there: ssd-a\n$/)
  const bad = await runInProcess(['report', '--dir', dir, '--campaign', '../etc'])
  t.equal(bad.code, 2, 'a campaign name that is no name')
  const empty = t.testdir({ runs: {} })
  const none = await runInProcess(['report', '--dir', empty])
  t.equal(none.code, 2)
  t.match(
    none.stderr,
    /^plugcheck: .* holds no campaign and no run\nhint: a run is recorded once plugcheck write --server reaches this listener; a campaign starts with plugcheck listen --campaign/,
  )
  const notListener = await runInProcess(['report', '--dir', join(dir, 'campaigns')])
  t.equal(notListener.code, 2)
  t.match(notListener.stderr, /^plugcheck: .*campaigns is not a listener's directory \(it has no runs\/\)\nhint: /)
  const missing = await runInProcess(['report', '--dir', join(dir, 'nowhere')])
  t.equal(missing.code, 2)
})

t.test("a long run's timeline is sampled: the HTML stays small", async (t) => {
  const dir = t.testdir()
  await craftListenerDir(dir, [
    {
      ...otherDevice,
      name: 'long',
      cycles: [
        {
          runs: [
            { method: 'fdatasync', acked: 500_000, lost: [[250_001, 250_100]] },
            { method: 'none', acked: 500_000, lost: [[499_001, 500_000]] },
          ],
        },
      ],
    },
  ])
  const htmlPath = join(dir, 'long.html')
  const result = await runInProcess(['report', '--dir', dir, '--html', htmlPath])
  t.equal(result.code, 0, result.stderr)
  const html = readFileSync(htmlPath, 'utf8')
  const lines = [...html.matchAll(/<polyline class="acks"[^>]* points="([^"]*)"/g)].map((m) => m[1]!.split(' ').length)
  t.same(lines, [maxPointsPerLane + 1, maxPointsPerLane + 1], 'each of 10,000 spans per run drawn with a bounded number of points')
  t.ok(html.length < 60_000, `the file is ${html.length} bytes`)
  t.equal([...html.matchAll(/<rect class="lost"/g)].length, 2, 'both lost ranges marked')
})

t.test('sampling and seq times', async (t) => {
  const spans: AckSpan[] = []
  for (let i = 0; i < 100_000; i++) spans.push([i * 10 + 1, i * 10 + 10, 1_000_000 + i * 100, 1_000_000 + i * 100 + 50])
  const points = sampleAcks(spans, 1_000_000, 1_000_000 + 10_000_000, 200)
  t.equal(points.length, 201)
  t.ok(
    points.every((p, i) => i === 0 || p[1] >= points[i - 1]![1]),
    'never decreasing',
  )
  t.same(points[0], [1_000_000, 0])
  t.same(points.at(-1), [11_000_000, 1_000_000])
  t.same(
    sampleAcks([[1, 10, 5, 9]], 0, 20, 10),
    [
      [5, 0],
      [9, 10],
    ],
    'few spans are drawn as they are',
  )
  t.same(sampleAcks([], 0, 1, 10), [])
  t.equal(timeOfSeq(spans, 1), 1_000_000)
  t.equal(timeOfSeq(spans, 10), 1_000_050)
  t.equal(timeOfSeq(spans, 15), 1_000_100 + (50 * 4) / 9)
  t.equal(timeOfSeq(spans, 2_000_000), 1_000_000 + 99_999 * 100 + 50, 'past the last ack: the last ack time')
  t.equal(timeOfSeq([], 1), null)
})

t.test('inconsistent directories: replaced groups, missing runs, campaigns without a file, damaged verdicts', async (t) => {
  const dir = t.testdir()
  await craftListenerDir(dir, [threeCycles])
  const store = await AckStore.open(dir)
  const announcedMs = baseMs + cycleSpacingMs + 500
  // A writer started again within cycle 2: the engine replaced its group, so this run does not count.
  const replaced = craftMeta('00000000000a0001', '/mnt/test/ssd-a.dat.fsync', {
    method: 'fsync',
    host: 'box-a',
    requestedPath: '/mnt/test/ssd-a.dat',
    createdMs: announcedMs,
  })
  await store.createRun(replaced, announcedMs, { campaign: { name: 'ssd-a', cycle: 2 } })
  // Runs of a campaign whose file is gone: reported by their tags, without settings.
  const orphan = craftMeta('00000000000a0002', '/mnt/test/o.dat.fdatasync', {
    host: 'box-o',
    requestedPath: '/mnt/test/o.dat',
    createdMs: announcedMs,
  })
  await store.createRun(orphan, announcedMs, { campaign: { name: 'orphan', cycle: 4 } })
  await store.close()
  const path = join(dir, 'campaigns', 'ssd-a.json')
  const file = campaignFileSchema.parse(JSON.parse(readFileSync(path, 'utf8')))
  file.history[2]!.runIds.push('00000000000fffff')
  // As a listener would write it (checksum and all): inconsistent, not damaged.
  writeFileSync(path, campaignFileText(file))
  // A damaged verdict: the store reports it, and the run shows no verdict.
  const cycle1 = file.history[0]!.runIds[0] as string
  writeFileSync(join(dir, 'runs', cycle1, 'verdict.msgpack'), 'not msgpack')

  const doc = await jsonReport(t, ['--dir', dir])
  t.same(
    doc.campaigns.map((c) => c.name),
    ['orphan', 'ssd-a'],
  )
  const [o, c] = doc.campaigns as [ReportDocument['campaigns'][0], ReportDocument['campaigns'][0]]
  t.equal(o.settings, null)
  t.same(
    o.cycles.map((y) => [y.cycle, y.outcome, y.runs.length, y.runs[0]!.verdict]),
    [[4, 'pending', 1, null]],
    'a tagged cycle without a file entry is pending',
  )
  t.same(
    c.cycles.map((y) => y.runs.length),
    [3, 3, 3],
    'no run counted twice or in the wrong cycle',
  )
  t.match(c.warnings, [
    /^run 00000000000fffff of cycle 3 is not in the listener's directory$/,
    /^run 00000000000a0001 \(fsync\) is tagged with cycle 2 but is not in that cycle's group: not counted$/,
  ])
  t.equal(c.cycles[0]!.runs[0]!.verdict, null, "cycle 1's fdatasync has no verdict now")
  t.match(
    c.methods.find((m) => m.method === 'fdatasync'),
    { cycles: 2, acked: 2100 },
    'and is not counted',
  )
  t.match(doc.warnings, [new RegExp(`^run ${cycle1}: .*verdict\\.msgpack`)], "the store's warning is in the report")
  const text = await runInProcess(['report', '--dir', dir, '--campaign', 'ssd-a'])
  t.equal(text.code, 0)
  t.match(text.stdout, /^ {2}1 .* fdatasync\s+1,500\s+no verdict yet$/m)
  t.match(text.stdout, /^ {2}warning: run 00000000000a0001 \(fsync\) is tagged with cycle 2/m)
  t.match(text.stdout, new RegExp(`^warning: run ${cycle1}: `, 'm'))
})

/** write --jobs 2 --method fsync,none, two cycles: one job of each method loses, the other does not (or is idle). */
const jobsCampaign: CraftedCampaign = {
  name: 'jobs-a',
  host: 'box-j',
  model: 'Samsung SSD 990 PRO 2TB',
  writeCache: 'write back',
  fileSystem: 'ext4',
  cycles: [
    {
      runs: [
        { method: 'fsync', job: 1, acked: 500, lost: [[451, 500]] },
        { method: 'fsync', job: 2, acked: 400 },
        { method: 'none', job: 1, acked: 600, lost: [[501, 600]] },
        { method: 'none', job: 2, acked: 600 },
      ],
    },
    {
      runs: [
        { method: 'fsync', job: 1, acked: 300 },
        // Its write failed before its first record: it tested nothing, the other job tested fsync.
        { method: 'fsync', job: 2, acked: 0, verdict: { verdict: 'inconclusive', summary: 'INCONCLUSIVE: nothing acknowledged' } },
        { method: 'none', job: 1, acked: 700 },
        { method: 'none', job: 2, acked: 700 },
      ],
    },
  ],
}

t.test("a --jobs campaign: each cycle counted once per method, every job's run counted, the control judged over its jobs", async (t) => {
  const dir = t.testdir()
  await craftListenerDir(dir, [jobsCampaign])
  const doc = await jsonReport(t, ['--dir', dir])
  const c = doc.campaigns[0]!
  t.same(c.warnings, [])
  t.same(
    c.cycles.map((y) => y.runs.map((r) => `${r.method} job ${r.job}: ${r.verdict?.verdict}`)),
    [
      ['fsync job 1: fail', 'fsync job 2: pass', 'none job 1: pass', 'none job 2: inconclusive'],
      ['fsync job 1: pass', 'fsync job 2: inconclusive', 'none job 1: inconclusive', 'none job 2: inconclusive'],
    ],
    "each job's run, in job order",
  )
  const method = (name: string) => c.methods.find((m) => m.method === name)!
  t.same(
    method('fsync'),
    {
      method: 'fsync',
      role: 'tested',
      cycles: 2,
      runs: 4,
      cyclesWithLoss: 1,
      verdicts: { pass: 0, fail: 1, 'tested-nothing': 1, inconclusive: 0, 'not-judged': 0 },
      acked: 1200,
      lost: 50,
      torn: 0,
      corrupt: 0,
      largestLossWindowMs: 98,
      reorderingCycles: [],
    },
    'fsync: 2 cycles (not 4), failed in cycle 1, in cycle 2 the pass of job 1 (the idle job excused) tested nothing (no control job noticed the cut), 4 runs',
  )
  t.match(method('none'), {
    role: 'control',
    cycles: 2,
    runs: 4,
    cyclesWithLoss: 1,
    verdicts: { pass: 1, fail: 0, inconclusive: 1 },
    acked: 2600,
    lost: 100,
  })
  t.same(
    c.control,
    { ran: 2, noticed: 1, detectionRate: 0.5, notNoticedCycles: [2], failedCycles: [] },
    'cycle 1 was noticed by one control job of two; cycle 2 by none',
  )
  t.same(
    c.cycles.map((y) => y.control),
    ['noticed', 'not-noticed'],
  )

  const text = await runInProcess(['report', '--dir', dir])
  t.equal(text.code, 0)
  t.match(text.stdout, /^fsync\s+fail 1, tested nothing 1$/m)
  t.match(text.stdout, /^ {2}cycles with loss\s+1 of 2$/m)
  t.match(text.stdout, /^ {2}runs \(jobs\)\s+4$/m)
  t.match(text.stdout, /^ {2}detection rate\s+1\/2 cuts noticed \(50%\)$/m)
  t.match(text.stdout, /^ {2}\s+fsync job 2\s+400\s+0\s+0\s+0\s+pass$/m, 'a job on its own line')
  t.match(text.stdout, /^ {2}\s+none \(control\) job 1\s+600\s+100\s+0\s+0\s+pass$/m)
  t.notMatch(text.stdout, /! cycle 1:/, 'cycle 1 is not flagged')
  t.match(text.stdout, /! cycle 2: the control \(none\) lost nothing/)
  const single = await runInProcess([
    'report',
    '--dir',
    await (async () => {
      const other = join(dir, 'single')
      await craftListenerDir(other, [threeCycles])
      return other
    })(),
  ])
  t.notMatch(single.stdout, /runs \(jobs\)/, 'without jobs there is no runs row')
})

t.test('a stored verdict that disagrees with its counts is not shown, and said', async (t) => {
  const dir = t.testdir()
  const lying: CraftedCampaign = {
    ...otherDevice,
    name: 'lying-verdicts',
    cycles: [
      {
        runs: [
          { method: 'fsync', acked: 1000, lost: [[901, 1000]], verdict: { verdict: 'pass', summary: 'PASS: all good' } },
          { method: 'none', acked: 800, verdict: { verdict: 'pass' } },
        ],
      },
      {
        runs: [
          { method: 'fsync', acked: 900, lost: [[1, 900]] },
          { method: 'none', acked: 800, lost: [[701, 800]] },
        ],
      },
    ],
  }
  await craftListenerDir(dir, [lying])
  const doc = await jsonReport(t, ['--dir', dir])
  const c = doc.campaigns[0]!
  t.same(
    c.cycles[0]!.runs.map((r) => r.verdict),
    [null, null],
    'neither disagreeing verdict is shown',
  )
  t.same(
    c.cycles[1]!.runs.map((r) => r.verdict?.verdict),
    ['fail', 'pass'],
    'the honest cycle is',
  )
  t.match(doc.warnings, [
    /^run [0-9a-f]{16}: .*verdict\.msgpack is damaged \(the verdict says pass with 100 of 1000 acknowledged records lost, 0 torn, 0 corrupt: a pass needs/,
    /^run [0-9a-f]{16}: .*verdict\.msgpack is damaged \(the verdict says pass for the control \(none\) with 0 of 800 .*the control passes only by losing records of its own file/,
  ])
  t.match(
    c.methods.find((m) => m.method === 'fsync'),
    { cycles: 1, verdicts: { pass: 0, fail: 1 }, lost: 900 },
  )

  // Records from any other source are held to the same rules.
  const store = await AckStore.load(dir)
  const honest = store.runRecords()
  const forged = honest.map((r) =>
    r.summary.verdict?.verdict === 'fail'
      ? { ...r, summary: { ...r.summary, verdict: { ...r.summary.verdict, verdict: 'pass' as const } } }
      : r,
  )
  const loaded = await loadListenerDir(dir, undefined, async () => ({ records: forged, warnings: [] }))
  const forgedRun = honest.find((r) => r.summary.verdict?.verdict === 'fail')!.summary.runId
  t.equal(loaded.records.find((r) => r.summary.runId === forgedRun)!.summary.verdict, null)
  t.match(loaded.warnings, [
    new RegExp(`^run ${forgedRun}: the verdict says pass with 900 of 900 acknowledged records lost.*; it is not shown$`),
  ])
})
