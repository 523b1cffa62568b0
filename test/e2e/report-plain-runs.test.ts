/**
 * A run written and verified by hand (no campaign): verify --server stores its verdict at the listener,
 * `runs` shows it, and `report --dir` shows the run under "runs outside campaigns" with that verdict
 * (text, JSON, HTML), a run never verified as not verified; a listener with neither campaigns nor runs
 * says so (exit 2).
 */
import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, startListener, tempDir, writeThenKill } from '../fixtures/cli.js'

interface ListedRun {
  runId: string
  path: string
  ackedThroughSeq: number
  verdict: { verdict: string; acked: number } | null
}

t.test('a hand-run write killed, verified by hand: runs and report show its verdict', async (t) => {
  const dir = tempDir(t)
  const store = join(dir, 'ld')
  const listener = await startListener(store)
  t.teardown(() => listener.kill())

  const empty = await runCli(['report', '--dir', store])
  t.equal(empty.code, 2, 'a listener with neither campaigns nor runs: exit 2')
  t.match(empty.stderr, /^plugcheck: .* holds no campaign and no run\nhint: a run is recorded once plugcheck write --server reaches/)

  const verified = join(dir, 'verified.dat')
  const unverified = join(dir, 'unverified.dat')
  await writeThenKill(listener.server, verified, ['--method', 'fdatasync', '--duration', '60'], 50)
  await writeThenKill(listener.server, unverified, ['--method', 'fdatasync', '--duration', '60'], 20)
  const verify = await runCli(['verify', '--server', listener.server, '--file', verified])
  t.equal(verify.code, 0, `verify passes (${verify.stdout}${verify.stderr})`)
  t.match(verify.stdout, /^PASS: all [\d,]+ acknowledged records of run [0-9a-f]{16} /)

  const listed = await runCli(['runs', '--server', listener.server, '--json'])
  t.equal(listed.code, 0, listed.stderr)
  const runs = (JSON.parse(listed.stdout) as { runs: ListedRun[] }).runs
  const a = runs.find((r) => r.path === verified)!
  const b = runs.find((r) => r.path === unverified)!
  t.equal(a.verdict?.verdict, 'pass', 'runs --json: the stored verdict')
  t.equal(b.verdict, null, 'runs --json: the other run has none')
  const table = await runCli(['runs', '--server', listener.server])
  t.match(table.stdout, new RegExp(`^${a.runId} .* pass, same boot$`, 'm'), 'runs: the verdict column says pass, on the same boot')
  t.match(table.stdout, new RegExp(`^${b.runId} .* -$`, 'm'), 'runs: no verdict for the other')

  const text = await runCli(['report', '--dir', store])
  t.equal(text.code, 0, text.stderr)
  t.notMatch(text.stdout, /holds no campaign/)
  const lines = text.stdout.split('\n')
  const heading = lines.indexOf('runs outside campaigns')
  t.ok(heading > 0, 'a section of runs outside campaigns')
  t.match(lines[heading + 1], /^ {2}run +started \(UTC\) +host +path +method +end +acked +lost +torn +corrupt +verdict$/)
  const rowOf = (runId: string): string => lines.find((l) => l.startsWith(`  ${runId} `)) ?? ''
  t.match(
    rowOf(a.runId),
    new RegExp(`${verified} +fdatasync +vanished +${a.ackedThroughSeq.toLocaleString('en-US')} +0 +0 +0 +pass, same boot$`),
    'the verified run: its counts and verdict (same boot: no reboot since the write)',
  )
  t.match(rowOf(b.runId), new RegExp(`${unverified} +fdatasync +vanished +${b.ackedThroughSeq.toLocaleString('en-US')} +not verified$`))
  t.ok(rowOf(a.runId) !== '' && lines.indexOf(rowOf(a.runId)) < lines.indexOf(rowOf(b.runId)), 'oldest first')
  t.match(text.stdout, /! same boot: verified on the boot of its write \(no reboot since\)/, 'the same-boot pass is flagged')

  const json = await runCli(['report', '--dir', store, '--json'])
  t.equal(json.code, 0, json.stderr)
  const doc = JSON.parse(json.stdout) as {
    formatVersion: number
    campaigns: unknown[]
    plainRuns: Array<{
      runId: string
      path: string
      ackedThroughSeq: number
      live: boolean
      end: string | null
      verdict: ListedRun['verdict']
    }>
  }
  t.equal(doc.formatVersion, 2)
  t.same(doc.campaigns, [])
  t.same(
    doc.plainRuns.map((r) => [r.runId, r.path, r.ackedThroughSeq, r.live, r.end, r.verdict?.verdict ?? null]),
    [
      [a.runId, verified, a.ackedThroughSeq, false, 'vanished', 'pass'],
      [b.runId, unverified, b.ackedThroughSeq, false, 'vanished', null],
    ],
    'JSON plainRuns: both runs, the stored verdict and none',
  )
  t.equal(doc.plainRuns[0]!.verdict!.acked, a.ackedThroughSeq, "the verdict counts the listener's acks")

  const htmlFile = join(dir, 'report.html')
  const html = await runCli(['report', '--dir', store, '--html', htmlFile])
  t.equal(html.code, 0, html.stderr)
  const page = readFileSync(htmlFile, 'utf8')
  t.match(page, /<section class="plain-runs" id="plain-runs"><h2>Runs outside campaigns<\/h2>/)
  t.match(page, new RegExp(`<tr data-run="${a.runId}">.*<td class="" title="PASS: [^"]*">pass, same boot</td></tr>`))
  t.match(page, new RegExp(`<tr data-run="${b.runId}">.*<td class="nothing">not verified</td></tr>`))

  const named = await runCli(['report', '--dir', store, '--campaign', 'ssd'])
  t.equal(named.code, 2, 'a campaign asked by name that is not there is still refused')
})
