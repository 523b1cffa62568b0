/**
 * The runs outside campaigns as the report renders them from a crafted document: one line each in the
 * text, oldest first as given, the stored verdict or "not verified" ("still writing" for a live run),
 * a same-boot pass flagged; the HTML's table with a pass green only after a reboot, a loss red; no
 * campaign summary when there are no campaigns; strings from disk made harmless in both.
 */
import t from 'tap'
import { renderText } from '../../../src/report/text.js'
import { renderHtml } from '../../../src/report/html.js'
import { reportDocumentSchema, type PlainRunReport } from '../../../src/report/schema.js'

const verdict = {
  verdict: 'pass' as const,
  acked: 1200,
  intact: 1200,
  lost: 0,
  torn: 0,
  corrupt: 0,
  lossWindowMs: null,
  reordered: false,
  lostRanges: [],
  rebootedSinceWrite: true,
  summary: 'PASS: all 1,200 acknowledged records survived intact.',
  atMs: 1_736_150_000_000,
}

function run(runId: string, extra: Partial<PlainRunReport>): PlainRunReport {
  return {
    runId,
    method: 'fdatasync',
    role: 'tested',
    job: null,
    announcedMs: 1_736_150_000_000,
    ackedThroughSeq: 1200,
    end: 'vanished',
    verdict: null,
    counted: extra.verdict?.verdict ?? null,
    testedNothing: null,
    host: 'db1',
    path: '/mnt/t/p.dat',
    live: false,
    ...extra,
  }
}

const doc = reportDocumentSchema.parse({
  tool: 'plugcheck report',
  formatVersion: 2,
  dir: '/srv/plugcheck',
  campaigns: [],
  plainRuns: [
    run('a000000000000001', { verdict }),
    run('a000000000000002', { verdict: { ...verdict, rebootedSinceWrite: false }, counted: 'tested-nothing', testedNothing: 'same-boot' }),
    run('a000000000000003', { verdict: { ...verdict, verdict: 'fail', intact: 1000, lost: 200, summary: 'FAIL: 200 lost' } }),
    run('a000000000000004', {}),
    run('a000000000000005', { live: true, end: null, path: '/mnt/t/\x1b[2J<q>.dat' }),
    run('a000000000000006', { method: 'none', role: 'control', job: 2, verdict: { ...verdict, intact: 1100, lost: 100 } }),
    // One write of fdatasync and its control, which lost nothing: the pass is counted as a cycle's would be.
    run('a000000000000007', { verdict, counted: 'tested-nothing', testedNothing: 'control-not-noticed' }),
    run('a000000000000008', {
      method: 'none',
      role: 'control',
      verdict: { ...verdict, verdict: 'inconclusive' },
      testedNothing: 'control-not-noticed',
    }),
    run('a000000000000009', { verdict: { ...verdict, rebootedSinceWrite: null } }),
  ],
  warnings: [],
})

t.test('text: the section, one line per run with its verdict, no campaign summary', async (t) => {
  const out = renderText(doc)
  const lines = out.split('\n')
  t.equal(lines[0], 'plugcheck report: /srv/plugcheck')
  t.notMatch(out, /^campaign /m, 'no campaign summary without campaigns')
  const at = lines.indexOf('runs outside campaigns')
  t.ok(at > 0)
  const row = (id: string) => lines.find((l) => l.startsWith(`  ${id} `)) ?? ''
  t.match(row('a000000000000001'), /2025-01-06 07:53:20 +db1 +\/mnt\/t\/p\.dat +fdatasync +vanished +1,200 +0 +0 +0 +pass$/)
  t.match(row('a000000000000002'), / pass, same boot$/)
  t.match(row('a000000000000009'), / pass, reboot unknown$/, 'a pass whose reboot could not be told is marked')
  t.match(row('a000000000000003'), / 1,200 +200 +0 +0 +fail$/)
  t.match(row('a000000000000004'), / vanished +1,200 +not verified$/)
  t.match(row('a000000000000005'), / live +1,200 +not verified \(still writing\)$/)
  t.notMatch(out, /\x1b/, 'no terminal escape from a path on disk')
  t.match(row('a000000000000006'), / none \(control\) job 2 +vanished +1,200 +100 +0 +0 +pass$/)
  t.match(row('a000000000000007'), / fdatasync +vanished +1,200 +0 +0 +0 +tested nothing \(the control lost nothing\)$/)
  t.match(row('a000000000000008'), / none \(control\) +vanished +1,200 +0 +0 +0 +inconclusive$/)
  t.same(
    lines.filter((l) => /^ {2}a0{14}\d /.test(l)).map((l) => l.slice(2, 18)),
    doc.plainRuns.map((r) => r.runId),
    'in the order given (oldest first)',
  )
  t.equal(lines.filter((l) => l.startsWith('  ! same boot: ')).length, 1, 'the same-boot pass flagged once')
})

t.test('text: no section and no flag without runs outside campaigns', async (t) => {
  const out = renderText({ ...doc, plainRuns: [] })
  t.notMatch(out, /runs outside campaigns|same boot/)
})

t.test('html: the table, a pass green only after a reboot, a loss red, not verified marked', async (t) => {
  const html = renderHtml(doc, [])
  t.notMatch(html, /<section class="summary">/, 'no campaign summary without campaigns')
  t.match(html, /<title>plugcheck report: runs outside campaigns<\/title>/)
  const row = (id: string) => new RegExp(`<tr data-run="${id}">(.*?)</tr>`).exec(html)?.[1] ?? ''
  t.match(row('a000000000000001'), /<td class="good" title="PASS: all 1,200 acknowledged records survived intact\.">pass<\/td>$/)
  t.match(row('a000000000000002'), /<td class="nothing" title="[^"]*">pass, same boot<\/td>$/, 'a same-boot pass tested nothing: not green')
  t.match(row('a000000000000009'), /<td class="" title="[^"]*">pass, reboot unknown<\/td>$/, 'a pass whose reboot is unknown is not green')
  t.match(row('a000000000000003'), /<td class="bad" title="FAIL: 200 lost">fail<\/td>$/)
  t.match(row('a000000000000004'), /<td class="nothing">not verified<\/td>$/)
  t.match(row('a000000000000006'), /<td class="" title="[^"]*">pass<\/td>$/, "the control's loss is no fail")
  t.match(row('a000000000000007'), /<td class="nothing" title="[^"]*">tested nothing \(the control lost nothing\)<\/td>$/)
  t.match(row('a000000000000008'), /<td class="nothing" title="[^"]*">inconclusive<\/td>$/)
  t.notMatch(html, /<q>/, 'a path from disk is escaped')
  t.match(row('a000000000000005'), /&lt;q&gt;\.dat<\/td><td>fdatasync<\/td><td>live<\/td>/)
  t.match(html, /&#9888; same boot: /)
})
