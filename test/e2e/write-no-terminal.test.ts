/**
 * write without a terminal (a script, nohup, ssh without a tty, a service's log): its events as plain
 * lines, announced, steady (the moment to cut the power), progress every 5 s, the summary; with
 * --json, the same events as JSON lines on stdout, every line an object, the summary's counts the
 * listener's. Never an escape sequence of the status line.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { closeSync, openSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { listRuns } from '../../src/client/verify/listener-client.js'
import { parseEndpoint, type Endpoint } from '../../src/protocol/endpoint.js'
import { binPath, runCli, startListener, tempDir } from '../fixtures/cli.js'

// Steady from 3 s on, once the listener has recorded acks of every run (a loaded machine's listener can
// take seconds more to record its first); a progress line at 5 s.
const write = ['--size', '16MiB', '--duration', '10']
const terminalControls = /[\x1b\r]/
const number = '[\\d,]+'

/** The command with stdout and stderr both to one log file, as `nohup CMD` or `CMD >log 2>&1` has them. */
async function toOneLog(dir: string, args: readonly string[]): Promise<{ code: number | null; log: string }> {
  const path = join(dir, 'write.log')
  const fd = openSync(path, 'w')
  const child = spawn(process.execPath, [binPath, ...args], { stdio: ['ignore', fd, fd] })
  closeSync(fd)
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000)
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
  clearTimeout(timer)
  return { code, log: readFileSync(path, 'utf8') }
}

interface Event {
  readonly event: string
  readonly [field: string]: unknown
}

t.test('without a terminal: announced, steady, progress and the summary as plain lines, in order', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'data')
  const r = await toOneLog(dir, ['write', '--server', listener.server, '--file', file, '--method', 'fdatasync,none', ...write])
  t.equal(r.code, 0, r.log)
  t.notMatch(r.log, terminalControls, 'no escape sequence, no carriage return')
  const lines = r.log.split('\n')
  const runIds = [...r.log.matchAll(/^run ([0-9a-f]{16}): (fdatasync|none), append, /gm)].map((m) => m[1]!)
  const [fdatasync, none] = runIds
  t.equal(new Set(runIds).size, 2, 'two runs in the trail')
  const announced = [
    `announced: run ${fdatasync} (fdatasync, append) of ${file}.fdatasync at the listener ${listener.server}`,
    `announced: run ${none} (none, append) of ${file}.none at the listener ${listener.server}`,
  ]
  const steady =
    'steady: records are being acknowledged and recorded by the listener; cut the power now (pull the plug, not a clean shutdown)'
  const progress = new RegExp(
    `^progress: (\\d+) s: (${number}) records written and acked, (${number}) recorded by the listener, ${number}/s, sync p50 .* p99 .*$`,
  )
  const at = (line: string): number => lines.indexOf(line)
  t.ok(at(announced[0]!) >= 0 && at(announced[1]!) > at(announced[0]!), 'each run announced, with its file and listener')
  t.equal(lines.filter((l) => l === steady).length, 1, 'steady once')
  t.ok(at(steady) > at(announced[1]!), 'steady after the announcements')
  const progressAt = lines.flatMap((l, i) => (progress.test(l) ? [i] : []))
  t.ok(progressAt.length >= 1 && progressAt.length <= 2, `a progress line every 5 s (${progressAt.length})`)
  const first = progress.exec(lines[progressAt[0]!]!)!
  t.ok(Number(first[1]) >= 5, `the first progress line 5 s in (${first[1]} s)`)
  const summaryAt = lines.findIndex((l) => /^ {2}[\d,]+ records synced and acknowledged, [\d,]+ recorded by the listener$/.test(l))
  t.ok(summaryAt > progressAt.at(-1)!, 'the summary last')
  // Progress comes every 5 s whether or not the write is steady yet (a loaded machine's listener can
  // record its first acks after 5 s), so either may come first; steady still comes during the run.
  t.ok(at(steady) < summaryAt, 'steady before the summary')
  const acked = Number(/^ {2}([\d,]+) records synced/.exec(lines[summaryAt]!)![1]!.replaceAll(',', ''))
  t.ok(Number(first[2]!.replaceAll(',', '')) <= 2 * acked, 'progress counts both runs, no more than the summary')
  t.match(
    r.log,
    `after a power cut and reboot: plugcheck verify --server ${listener.server} --file ${file}\n`,
    'before the loop: for after the cut',
  )
  t.ok(
    r.log.endsWith(`to check it now: plugcheck verify --server ${listener.server} --file ${file}\n`),
    'ended by --duration: check it now',
  )
})

t.test('write --json: every stdout line an event object, in order; the summary counts what the listener holds', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'data')
  const r = await runCli(['write', '--server', listener.server, '--file', file, '--method', 'fdatasync,none', '--json', ...write])
  t.equal(r.code, 0, r.stderr)
  t.notMatch(r.stdout + r.stderr, terminalControls, 'no escape sequence, no carriage return')
  t.notMatch(r.stderr, /^(announced|steady|progress):/m, 'no plain event lines: the events are on stdout')
  t.ok(r.stdout.endsWith('}\n'), 'stdout ends with a whole line')
  const events = r.stdout
    .split('\n')
    .slice(0, -1)
    .map((line) => JSON.parse(line) as Event)
  t.ok(
    events.every((e) => typeof e === 'object' && e !== null && typeof e.event === 'string'),
    'every line a JSON object with its event',
  )
  const kinds = events.map((e) => e.event)
  // Progress comes every 5 s whether or not the write is steady yet (a loaded machine's listener can
  // record its first acks after 5 s): steady once after the announcements, anywhere among the progress.
  t.same(kinds.slice(0, 2), ['announced', 'announced'], 'two runs announced first')
  t.equal(kinds.filter((k) => k === 'steady').length, 1, 'steady once')
  const steadyAt = kinds.indexOf('steady')
  t.ok(
    kinds.slice(2, -1).filter((k) => k === 'progress').length >= 1 && kinds.slice(2, -1).every((k) => k === 'progress' || k === 'steady'),
    `then steady and progress: ${kinds.join(' ')}`,
  )
  t.equal(kinds.at(-1), 'summary', 'the summary last')
  t.same(
    events.flatMap((e) => (e.event === 'progress' ? [e.steady] : [])),
    kinds.flatMap((k, i) => (k === 'progress' ? [i > steadyAt] : [])),
    'each progress says steady exactly when it comes after the steady event',
  )

  const [a1, a2] = events as [Event, Event]
  t.same(
    [a1, a2].map((a) => [a.method, a.path, a.file, a.listener, a.job]),
    [
      ['fdatasync', `${file}.fdatasync`, file, listener.server, null],
      ['none', `${file}.none`, file, listener.server, null],
    ],
  )
  t.equal(a1.verifyCommand, `plugcheck verify --server ${listener.server} --file ${file}`)
  const steady = events[steadyAt]!
  t.ok((steady.elapsedS as number) >= 3 && (steady.recorded as number) > 0, 'steady 3 s in, with acks recorded')
  const progress = events.filter((e) => e.event === 'progress')
  t.ok((progress[0]!.elapsedS as number) >= 5, 'the first progress 5 s in')

  const summary = events.at(-1)! as Event & { runs: Array<Record<string, unknown>> }
  t.same(
    summary.runs.map((run) => run.runId),
    [a1.runId, a2.runId],
    'the summary reports the runs announced',
  )
  const { runs } = await listRuns(parseEndpoint(listener.server) as Endpoint, undefined, 10_000)
  for (const run of summary.runs) {
    const held = runs.find((listed) => listed.runId === run.runId)!
    t.equal(run.acknowledged, held.ackedThroughSeq, `${run.method}: acknowledged as the listener holds`)
    t.equal(run.recorded, held.ackedThroughSeq, `${run.method}: every ack recorded`)
    t.equal(run.end, 'duration')
    t.equal(held.end?.reason, 'duration')
  }
  t.equal(
    summary.acknowledged,
    summary.runs.reduce((n, run) => n + (run.acknowledged as number), 0),
    'the totals add the runs',
  )
  t.ok((summary.acknowledged as number) >= (progress.at(-1)!.acknowledged as number), 'no progress counts more than the summary')
  t.equal(summary.verifyCommand, a1.verifyCommand)
})

t.test('write --jobs 2 --json: each job announced, one summary of both jobs', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'data')
  const r = await runCli(['write', '--server', listener.server, '--file', file, '--jobs', '2', '--json', ...write])
  t.equal(r.code, 0, r.stderr)
  t.notMatch(r.stdout + r.stderr, terminalControls)
  const events = r.stdout
    .split('\n')
    .slice(0, -1)
    .map((line) => JSON.parse(line) as Event)
  const announced = events.filter((e) => e.event === 'announced')
  t.same(announced.map((a) => a.job).sort(), [1, 2], 'both jobs announced')
  t.same(
    events.filter((e) => e.event === 'steady').map((e) => e.jobs),
    [2],
    'steady once, for the group',
  )
  t.ok(
    events.some((e) => e.event === 'progress' && e.jobs === 2),
    'the group progress',
  )
  t.equal(events.filter((e) => e.event === 'summary').length, 1, 'one summary')
  const summary = events.at(-1)! as Event & { runs: Array<Record<string, unknown>> }
  t.equal(summary.event, 'summary')
  t.same(
    summary.runs.map((run) => [run.job, run.path]),
    [
      [1, `${file}.job1`],
      [2, `${file}.job2`],
    ],
    'in job order',
  )
  const { runs } = await listRuns(parseEndpoint(listener.server) as Endpoint, undefined, 10_000)
  for (const run of summary.runs) t.equal(run.acknowledged, runs.find((listed) => listed.runId === run.runId)?.ackedThroughSeq)
  t.equal(summary.verifyCommand, `plugcheck verify --server ${listener.server} --file ${file}`)
})

t.test('write --jobs 2 without a terminal: each job announced, steady once for the group, its progress summed', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'data')
  const r = await toOneLog(dir, ['write', '--server', listener.server, '--file', file, '--jobs', '2', ...write])
  t.equal(r.code, 0, r.log)
  t.notMatch(r.log, terminalControls, 'no escape sequence, no carriage return')
  const lines = r.log.split('\n')
  for (const job of [1, 2]) {
    const line = new RegExp(
      `^announced: run [0-9a-f]{16} \\(fdatasync, append, job ${job}\\) of ${file}\\.job${job} at the listener ${listener.server}$`,
    )
    t.equal(lines.filter((l) => line.test(l)).length, 1, `job ${job} announced once`)
  }
  const steady =
    'steady: the records of all 2 jobs are being acknowledged and recorded by the listener; cut the power now (pull the plug, not a clean shutdown)'
  t.equal(lines.filter((l) => l === steady).length, 1, 'steady once, for the group')
  // Progress comes every 5 s whether or not the group is steady yet (a loaded machine can take longer to get there).
  const progress = lines.flatMap((l, i) => (/^progress: \d+ s: 2 jobs, [\d,]+ records written and acked, /.test(l) ? [i] : []))
  t.ok(progress.length > 0, 'the group progress, summed over both jobs')
  t.ok(
    Math.max(...lines.flatMap((l, i) => (l.startsWith('announced: ') ? [i] : []))) < lines.indexOf(steady),
    'both announced before steady',
  )
  t.ok(lines.findIndex((l) => /^ {2}[\d,]+ records synced and acknowledged/.test(l)) > Math.max(...progress), 'the summary last')
})
