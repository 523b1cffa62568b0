/**
 * A hand-run write killed, verified from a machine that cannot tell whether the writer rebooted
 * (another host name: a UTS namespace here; the same holds for no boot id on either side). verify
 * passes with its note "could not tell whether vm (the machine that wrote) rebooted since the write
 * ...: a pass proves nothing unless the power was really cut", and stores the verdict with
 * rebootedSinceWrite null. report --dir then shows that run's verdict as a bare `pass`, exactly as
 * a pass verified after a reboot, and the HTML colours it green (class "good"). README (report):
 * "the runs outside campaigns as a table (a pass green only when verified after a reboot)". Must: a
 * pass whose reboot is unknown is not green in the HTML and its text verdict is marked (not a bare
 * `pass`), as a same-boot pass is.
 */
import t from 'tap'
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { binPath, runCli, startListener, tempDir, writeThenKill } from '../fixtures/cli.js'

function verifyElsewhere(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const script = 'hostname plugcheck-verifier && exec "$@"'
  return new Promise((resolve) => {
    execFile(
      'unshare',
      ['--uts', 'sh', '-c', script, 'sh', process.execPath, binPath, ...args],
      { timeout: 60_000 },
      (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? -1) : 0, stdout, stderr }),
    )
  })
}

t.test('report: a pass whose reboot could not be told is neither green nor a bare pass', async (t) => {
  const dir = tempDir(t)
  const store = join(dir, 'ld')
  const listener = await startListener(store)
  t.teardown(() => listener.kill())
  const file = join(dir, 'p.dat')
  await writeThenKill(listener.server, file, ['--method', 'fdatasync', '--duration', '60'], 50)
  const verify = await verifyElsewhere(['verify', '--server', listener.server, '--file', file, '--host', hostname(), '--json'])
  t.equal(verify.code, 0, `verify passes (${verify.stderr})`)
  const verdict = (JSON.parse(verify.stdout) as { runs: Array<{ runId: string; verdict: string; rebootedSinceWrite: boolean | null }> })
    .runs[0]!
  t.equal(verdict.verdict, 'pass')
  t.equal(verdict.rebootedSinceWrite, null, 'verify could not tell whether the writer rebooted')

  const text = await runCli(['report', '--dir', store])
  t.equal(text.code, 0, text.stderr)
  const row = text.stdout.split('\n').find((l) => l.startsWith(`  ${verdict.runId} `)) ?? ''
  t.match(row, / pass/, `the run's row (${row})`)
  t.notMatch(row, / pass$/, 'text: the verdict is not a bare pass, as one verified after a reboot reads')

  const html = join(dir, 'r.html')
  const h = await runCli(['report', '--dir', store, '--html', html])
  t.equal(h.code, 0, h.stderr)
  const tr = new RegExp(`<tr data-run="${verdict.runId}">(.*?)</tr>`).exec(readFileSync(html, 'utf8'))?.[1] ?? ''
  const cell = /<td class="([a-z]*)"[^>]*>[^<]*<\/td>$/.exec(tr)
  t.ok(cell !== null, `the HTML row's verdict cell (${tr.slice(-200)})`)
  t.not(cell?.[1], 'good', 'HTML: a pass whose reboot is unknown is not green')
})
