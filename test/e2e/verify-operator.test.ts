/**
 * Verify as a careless operator meets it, with the real listener and real writers: `--run` of a run
 * that a later run on the same path replaced (over TCP and offline with --acks), and the demo's JSON,
 * which must say that no reboot happened since the write.
 */
import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, runInProcess, startListener, tempDir, writeThenKill } from '../fixtures/cli.js'
import { runsEnded } from '../fixtures/runs-ended.js'

t.test('--run of a superseded run: not judged, exit 2, over TCP and with --acks', async (t) => {
  const dir = tempDir(t)
  const listenerDir = join(dir, 'listener')
  const listener = await startListener(listenerDir)
  t.teardown(() => listener.kill())
  const file = join(dir, 'data.plugcheck')
  await writeThenKill(listener.server, file, ['--method', 'fdatasync', '--size', '8MiB'], 50, join(dir, 'trace1'))
  await runsEnded(listener.server, file) // its last acks and its end taken in (verify would judge a live run)
  const first = JSON.parse((await runInProcess(['verify', '--server', listener.server, '--file', file, '--json'])).stdout)
  const firstRunId: string = first.runs[0].runId
  t.equal(first.verdict, 'pass')
  await writeThenKill(listener.server, file, ['--method', 'fdatasync', '--size', '8MiB', '--force'], 50, join(dir, 'trace2'))
  await runsEnded(listener.server, file)

  const latest = await runInProcess(['verify', '--server', listener.server, '--file', file, '--json'])
  t.equal(latest.code, 0, 'the latest run is judged and passes')
  const secondRunId: string = JSON.parse(latest.stdout).runs[0].runId
  t.not(secondRunId, firstRunId)
  t.match(JSON.parse(latest.stdout).claims, [{ runId: secondRunId }, { runId: firstRunId }], 'claims newest first')

  for (const source of [
    ['--server', listener.server],
    ['--acks', listenerDir],
  ]) {
    const text = await runInProcess(['verify', ...source, '--file', file, '--run', firstRunId])
    t.equal(text.code, 2, `${source[0]}: exit 2`)
    t.match(text.stdout, new RegExp(`^NOT JUDGED: run ${firstRunId} was superseded by run ${secondRunId} \\(fdatasync, announced `))
    t.notMatch(text.stdout, /lost|FAIL/)
    const json = await runInProcess(['verify', ...source, '--file', file, '--run', firstRunId, '--json'])
    t.match(JSON.parse(json.stdout), { verdict: 'not-judged', reason: 'superseded', runs: [] })
  }
})

t.test('demo --json: rebootedSinceWrite is false', async (t) => {
  let bootIdKnown = true
  try {
    readFileSync('/proc/sys/kernel/random/boot_id')
  } catch {
    bootIdKnown = false
  }
  const result = await runCli(['demo', '--json'], 120_000)
  t.equal(result.code, 0, result.stderr)
  const report = JSON.parse(result.stdout)
  t.equal(report.verdict, 'pass')
  t.equal(report.runs[0].role, 'tested')
  t.equal(report.runs[0].rebootedSinceWrite, bootIdKnown ? false : null)
})

t.test('demo --kill-after 0.05: the kill counts from the first recorded ack, so a run is always there to judge', async (t) => {
  // 50 ms after its spawn a writer has not even loaded (node alone takes longer): a kill timed from the
  // spawn would leave the listener no run, and verify "no run found".
  const result = await runCli(['demo', '--kill-after', '0.05', '--json'], 120_000)
  t.equal(result.code, 0, result.stderr)
  const report = JSON.parse(result.stdout)
  t.equal(report.verdict, 'pass')
  t.ok(report.runs[0].acked >= 1, `the killed writer had acks recorded (${report.runs[0].acked})`)
})
