/**
 * verify's words (src/client/verify/verify-render.ts): a wrapped overwrite file's verdict line says
 * what was judged (the records still in the file) beside all that were acknowledged; a file that never
 * wrapped reads as before. An inconclusive verdict of runs that ended by --duration or were stopped
 * says no cut happened instead of "the cut tested nothing". Crafted reports for the exact wording,
 * then real writes over 127.0.0.1 and their verify.
 */
import t from 'tap'
import { join } from 'node:path'
import { renderReport, renderRun } from '../../../../src/client/verify/verify-render.js'
import type { RunReport } from '../../../../src/client/verify/run-report.js'
import { fileSize, runCli, runInProcess, spawnCli, startListener, tempDir, traceEntryBytes, waitFor } from '../../../fixtures/cli.js'

function report(over: Partial<RunReport>): RunReport {
  return {
    runId: 'a000000000000001',
    groupId: 'a000000000000001',
    method: 'fdatasync',
    role: 'tested',
    direct: false,
    recordSize: 4096,
    pattern: 'overwrite',
    path: '/mnt/t/p.dat',
    createdMs: 0,
    ended: 'vanished',
    rebootedSinceWrite: true,
    acked: 192_166,
    superseded: 159_399,
    intact: 32_767,
    lost: 0,
    unreadable: 0,
    torn: 0,
    corrupt: 0,
    interrupted: 0,
    verdict: 'pass',
    superblock: { kind: 'valid', detail: '' },
    lostRangeCount: 0,
    lostRanges: [],
    tornRecords: [],
    corruptRecords: [],
    interruptedRecords: [],
    unreadableRecords: [],
    reordering: null,
    ...over,
  }
}

const what = 'run a000000000000001 (fdatasync, overwrite, 4 KiB records, /mnt/t/p.dat)'

t.test('a pass of a wrapped file: the records still in the file, of all acknowledged, on one line', async (t) => {
  const lines = renderRun(report({}), true)
  t.same(lines, [
    `PASS: all 32,767 acknowledged records still in the file (the latest in each slot) of ${what} survived intact, of 192,166 acknowledged (159,399 overwritten by later ones).`,
  ])
  t.notMatch(lines.join('\n'), /superseded, not judged/, 'the count overwritten is said once')
})

t.test('a pass of a wrapped file with interrupted overwrites says both', async (t) => {
  const lines = renderRun(report({ intact: 32_760, interrupted: 7 }), true)
  t.equal(
    lines[0],
    `PASS: every acknowledged record still in the file (the latest in each slot) of ${what} survived: 32,760 intact, 7 interrupted newer overwrites, of 192,166 acknowledged (159,399 overwritten by later ones).`,
  )
})

t.test('a file that never wrapped: all acknowledged records, as before', async (t) => {
  const lines = renderRun(report({ pattern: 'append', acked: 1200, superseded: 0, intact: 1200 }), true)
  t.same(lines, [
    'PASS: all 1,200 acknowledged records of run a000000000000001 (fdatasync, append, 4 KiB records, /mnt/t/p.dat) survived intact.',
  ])
})

t.test('a fail of a wrapped file: the losses among the records still in the file, the overwritten below', async (t) => {
  const lost = { fromSeq: 192_000, toSeq: 192_001, count: 2, reason: 'zeros', ackedFromMs: Number.NaN, ackedToMs: Number.NaN }
  const lines = renderRun(report({ verdict: 'fail', intact: 32_765, lost: 2, lostRangeCount: 1, lostRanges: [lost] }), true)
  t.equal(
    lines[0],
    `FAIL: 2 of 32,767 acknowledged records still in the file (the latest in each slot) of ${what} did not survive: 2 lost, 0 torn, 0 corrupt.`,
  )
  t.ok(lines.includes('159,399 acknowledged records were later overwritten by newer acknowledged ones (superseded, not judged).'))
})

t.test('a real write that wraps its file: verify says what it judged of all acknowledged', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  // 256 KiB of 8 KiB records (the default): 31 slots (one record's room holds the superblock), which
  // a second of fdatasync overwrites many times over on an idle machine. A machine too loaded to make
  // more than 31 syncs in it writes again, longer, to a file of its own (the run verified is that one).
  const slots = 256 / 8 - 1
  let file = ''
  let run: RunReport | undefined
  for (const durationS of [1, 4, 16]) {
    file = join(dir, `wrapped-${durationS}s.dat`)
    const write = await runCli([
      'write',
      '--server',
      listener.server,
      '--file',
      file,
      '--pattern',
      'overwrite',
      '--size',
      '256KiB',
      '--duration',
      String(durationS),
    ])
    t.equal(write.code, 0, write.stderr)
    const json = await runInProcess(['verify', '--server', listener.server, '--file', file, '--json'])
    t.equal(json.code, 0, json.stderr)
    run = JSON.parse(json.stdout).runs[0] as RunReport
    if (run.acked > slots) break
    t.comment(`${run.acked} acks in ${durationS} s, not more than the ${slots} slots: again, longer`)
  }
  if (run === undefined) throw new Error('no run verified')
  t.ok(run.acked > slots, `${run.acked} acks, more than the ${slots} slots: the file wrapped`)
  // A wrapped file whose overwritten records are not told apart would count none superseded.
  t.ok(run.superseded > 0, `the file wrapped: ${run.superseded} of ${run.acked} overwritten`)
  const text = await runInProcess(['verify', '--server', listener.server, '--file', file])
  t.equal(text.code, 0, text.stderr)
  const first = text.stdout.split('\n')[0]!
  const n = (x: number): string => x.toLocaleString('en-US')
  t.match(
    first,
    new RegExp(
      `^PASS: all ${n(run.acked - run.superseded)} acknowledged records still in the file \\(the latest in each slot\\) of run ${run.runId} .* survived intact, of ${n(run.acked)} acknowledged \\(${n(run.superseded)} overwritten by later ones\\)\\.$`,
    ),
  )
})

const control = (over: Partial<RunReport>): RunReport =>
  report({ method: 'none', role: 'control', pattern: 'append', acked: 20, superseded: 0, intact: 20, verdict: 'inconclusive', ...over })
const controlWhat = 'run a000000000000001 (none, append, 4 KiB records, /mnt/t/p.dat)'

t.test('a control that lost nothing: how its run ended decides whether a cut is spoken of', async (t) => {
  t.equal(
    renderRun(control({ ended: 'duration' }), true)[0],
    `INCONCLUSIVE: control (none): all 20 unsynced records survived, it lost nothing: the run ended by itself (--duration), no cut happened while it wrote (${controlWhat}).`,
  )
  t.equal(
    renderRun(control({ ended: 'interrupted' }), true)[0],
    `INCONCLUSIVE: control (none): all 20 unsynced records survived, it lost nothing: the run was stopped (Ctrl-C, a signal or its campaign), no cut happened while it wrote (${controlWhat}).`,
  )
  for (const ended of ['vanished', 'error', null])
    t.equal(
      renderRun(control({ ended }), true)[0],
      `INCONCLUSIVE: control (none): all 20 unsynced records survived, it lost nothing: the cut tested nothing (${controlWhat}).`,
      `ended ${ended}: a cut may have ended it`,
    )
  t.equal(
    renderRun(report({ pattern: 'append', acked: 0, superseded: 0, intact: 0, verdict: 'inconclusive', ended: 'duration' }), true)[0],
    'INCONCLUSIVE: run a000000000000001 (fdatasync, append, 4 KiB records, /mnt/t/p.dat): nothing was acknowledged: the run ended by itself (--duration), no cut happened while it wrote.',
  )
})

t.test("a group's headline: no cut when every run ended by itself or was stopped, else the cut tested nothing", async (t) => {
  const group = (ends: Array<string | null>) => {
    const runs = [
      report({ pattern: 'append', acked: 20, superseded: 0, intact: 20, ended: ends[0]! }),
      control({ runId: 'a000000000000002', ended: ends[1]! }),
    ]
    return renderReport({
      verdict: 'inconclusive',
      host: 'h',
      file: '/mnt/t/p.dat',
      source: 'listener',
      claims: [],
      notes: [],
      runs,
    }).split('\n')[0]
  }
  t.equal(
    group(['duration', 'duration']),
    'INCONCLUSIVE: the control (none) lost nothing: the runs ended by themselves (--duration), no cut happened while they wrote.',
  )
  t.equal(
    group(['interrupted', 'duration']),
    'INCONCLUSIVE: the control (none) lost nothing: the runs were stopped (Ctrl-C, a signal or their campaign), no cut happened while they wrote.',
  )
  t.equal(group(['vanished', 'vanished']), 'INCONCLUSIVE: the control (none) lost nothing, so the cut tested nothing.')
  t.equal(
    group(['duration', 'vanished']),
    'INCONCLUSIVE: the control (none) lost nothing, so the cut tested nothing.',
    'one run may have been cut',
  )
})

t.test('a real write of fdatasync,none ended by --duration: verify says no cut happened, write says to check it now', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'd.dat')
  const write = await runCli(['write', '--server', listener.server, '--file', file, '--method', 'fdatasync,none', '--duration', '1'])
  t.equal(write.code, 0, write.stderr)
  t.ok(write.stdout.endsWith(`\nto check it now: plugcheck verify --server ${listener.server} --file ${file}\n`), write.stdout)
  const verify = await runInProcess(['verify', '--server', listener.server, '--file', file])
  t.equal(verify.code, 4, verify.stderr)
  t.equal(
    verify.stdout.split('\n')[0],
    'INCONCLUSIVE: the control (none) lost nothing: the runs ended by themselves (--duration), no cut happened while they wrote.',
  )
  t.notMatch(verify.stdout, /the cut tested nothing/)
})

t.test('a real write stopped by SIGINT: verify says it was stopped, write says to check it now', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'i.dat')
  const trace = join(dir, 'trace')
  const writer = spawnCli(['write', '--server', listener.server, '--file', file, '--method', 'none', '--trace-file', trace])
  let stdout = ''
  writer.stdout!.on('data', (c: Buffer) => (stdout += c.toString()))
  const exited = new Promise<number | null>((resolve) => writer.on('close', (code) => resolve(code)))
  t.teardown(() => writer.kill('SIGKILL'))
  await waitFor('10 records written', () => fileSize(trace) >= 10 * traceEntryBytes)
  writer.kill('SIGINT')
  t.equal(await exited, 130)
  t.ok(stdout.endsWith(`\nto check it now: plugcheck verify --server ${listener.server} --file ${file}\n`), stdout)
  const verify = await runInProcess(['verify', '--server', listener.server, '--file', file])
  t.equal(verify.code, 4, verify.stderr)
  t.match(
    verify.stdout,
    /^INCONCLUSIVE: control \(none\): all [\d,]+ unsynced records survived, it lost nothing: the run was stopped \(Ctrl-C, a signal or its campaign\), no cut happened while it wrote \(run /,
  )
})
