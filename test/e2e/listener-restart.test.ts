/** The listener SIGKILLed and restarted on the same --dir loses nothing it had reported as recorded. */
import t from 'tap'
import { readdirSync, statSync, truncateSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, runInProcess, startListener, tempDir, waitFor } from '../fixtures/cli.js'

t.test('acks survive a listener restart', async (t) => {
  const dir = tempDir(t)
  const acksDir = join(dir, 'listener')
  const first = await startListener(acksDir)
  const file = join(dir, 'data')
  const write = await runCli([
    'write',
    '--server',
    first.server,
    '--file',
    file,
    '--method',
    'fdatasync,open_datasync',
    '--duration',
    '1',
    '--size',
    '256MiB',
  ])
  t.equal(write.code, 0, write.stderr)
  const recorded = [...write.stdout.matchAll(/([\d,]+) records synced and acknowledged, ([\d,]+) recorded by the listener/g)].map((m) => [
    Number(m[1]!.replaceAll(',', '')),
    Number(m[2]!.replaceAll(',', '')),
  ])
  t.equal(recorded.length, 2, 'one summary line per method')
  for (const [synced, confirmed] of recorded) t.equal(confirmed, synced, 'the writer waited for every ack to be recorded')
  await first.kill('SIGKILL')

  const second = await startListener(acksDir)
  t.teardown(() => second.kill())
  const result = await runInProcess(['verify', '--server', second.server, '--file', file, '--json'])
  t.equal(result.code, 0, result.stderr)
  const report = JSON.parse(result.stdout)
  t.same(report.runs.map((r: { method: string }) => r.method).sort(), ['fdatasync', 'open_datasync'])
  t.same(
    report.runs.map((r: { acked: number }) => r.acked).sort(),
    recorded.map(([synced]) => synced).sort(),
    'every recorded ack is still there',
  )
  for (const run of report.runs) t.equal(run.intact, run.acked)

  const offline = await runInProcess(['verify', '--acks', acksDir, '--file', file])
  t.equal(offline.code, 0)
  t.match(offline.stdout, /^PASS: every acknowledged record of all 2 methods survived\./)
})

t.test('a run restarted from the catalog whose log lost its last commit: the listener names it, verify exits 3', async (t) => {
  const dir = tempDir(t)
  const acksDir = join(dir, 'listener')
  const first = await startListener(acksDir)
  const file = join(dir, 'data')
  const write = await runCli([
    'write',
    '--server',
    first.server,
    '--file',
    file,
    '--method',
    'fdatasync',
    '--duration',
    '1',
    '--size',
    '64MiB',
  ])
  t.equal(write.code, 0, write.stderr)
  await first.kill('SIGTERM') // a clean stop: the run is in catalog.msgpack
  const [runId] = readdirSync(join(acksDir, 'runs')).filter((name) => /^[0-9a-f]{16}$/.test(name))
  const log = join(acksDir, 'runs', runId!, 'acks.log')
  truncateSync(log, statSync(log).size - 1)

  const second = await startListener(acksDir)
  t.teardown(() => second.kill())
  const result = await runInProcess(['verify', '--server', second.server, '--file', file])
  t.equal(result.code, 3, 'not judged: a runtime failure')
  t.match(
    result.stderr,
    new RegExp(`could not read ${log}: its whole commits end at byte \\d+ [^]*in its catalog: recorded acks are missing`),
    'the damaged log is named',
  )
  await waitFor('the background check', () => /its queries are refused/.test(second.stderr()))
  t.match(second.stderr(), new RegExp(`run ${runId}: could not read ${log}`), 'the listener names the run and its log')
})
