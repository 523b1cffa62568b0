/**
 * A campaign whose cut command fails, against real child processes (`plugcheck listen --campaign`
 * with `--cut-command false`, a real `plugcheck agent` writing the cycle): the campaign stops as
 * cut-failed, and the agent's writer is told to stop (it would otherwise write until killed): its
 * runs end as interrupted, every ack recorded, exit 3. The listener started again with the same
 * options but another --cut-command resumes the campaign (from a file in the older format 1, which
 * still loads): the change is logged and kept in the file with the failed attempt, and the cycle is
 * written again by the next agent. Any other option changed is still refused (exit 2), and so is
 * another cut command for a campaign that did not stop on a failed cut.
 */
import t from 'tap'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { ChildProcess } from 'node:child_process'
import { listRuns } from '../../src/client/verify/listener-client.js'
import { parseEndpoint, type Endpoint } from '../../src/protocol/endpoint.js'
import { campaignFilePath } from '../../src/server/campaign/campaign-file-io.js'
import { exitedWithOutput, runCli, spawnCli, startListener, tempDir, waitFor } from '../fixtures/cli.js'
import { readCampaign, waitForPhase } from '../fixtures/campaign-agent.js'

const endpoint = (server: string): Endpoint => parseEndpoint(server) as Endpoint
const options = (cutCommand: string, cycles = '2') => [
  '--campaign',
  'cf',
  '--cycles',
  cycles,
  '--cut-command',
  cutCommand,
  '--cut-after',
  '0',
  '--reboot-timeout',
  '60',
  '--seed',
  '7',
]

interface Child {
  readonly process: ChildProcess
  stdout(): string
  stderr(): string
  /** Resolves with the exit code (null when a signal ended it) and when it came. */
  readonly exited: Promise<{ code: number | null; atMs: number }>
}

function spawnAgent(args: readonly string[]): Child {
  const child = spawnCli(args)
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()))
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
  // Resolves once its last lines are read (the tests match them), with when the exit itself came.
  let atMs = 0
  child.once('exit', () => (atMs = Date.now()))
  const exited = exitedWithOutput(child).then(({ code }) => ({ code, atMs }))
  return { process: child, stdout: () => stdout, stderr: () => stderr, exited }
}

t.test('a failed cut stops the agent’s writer; another --cut-command resumes the campaign and writes the cycle again', async (t) => {
  const dir = tempDir(t)
  const listenerDir = join(dir, 'listener')
  const file = join(dir, 'data.plugcheck')
  const agentArgs = (server: string) => ['agent', '--server', server, '--file', file, '--method', 'fdatasync,none', '--size', '16MiB']

  // 1. The cut command exits 1: the campaign stops, and the agent's writer with it.
  const first = await startListener(listenerDir, options('false'))
  t.teardown(() => first.kill())
  const agent = spawnAgent(agentArgs(first.server))
  t.teardown(() => agent.process.kill('SIGKILL'))
  const stopped = await waitForPhase(listenerDir, 'cf', ['stopped'], 'after the cut command failed ', 60_000)
  const stoppedAtMs = Date.now()
  t.match(stopped, { version: 2, phase: 'stopped', cycle: 1, detail: 'cycle 1: the cut command exited 1' })
  t.match(stopped.history[0], { outcome: 'cut-failed', cutExitCode: 1 })
  // The agent polls the campaign every 2 s; 30 s leaves room for a loaded machine, while an agent whose
  // writer is never told to stop writes on until the kill at 60 s (and exits by the signal, not 3).
  const bound = setTimeout(() => agent.process.kill('SIGKILL'), 60_000)
  const ended = await agent.exited
  clearTimeout(bound)
  const stopMs = ended.atMs - stoppedAtMs
  t.ok(stopMs < 30_000, `the agent stopped ${stopMs} ms after the campaign did (within 30 s)`)
  t.equal(ended.code, 3, `the agent exits 3 (stderr: ${agent.stderr()})`)
  t.match(agent.stdout(), /campaign cf: cycle 1 of 2: writing until the power goes/)
  t.match(
    agent.stderr(),
    /^plugcheck: campaign cf stopped \(cycle 1: the cut command exited 1\); the writer stopped, every ack is recorded at the listener$/m,
  )
  t.match(first.stderr(), /STOPPED in cycle 1: the cut command exited 1; the agent's writer is told to stop/)
  const { runs } = await listRuns(endpoint(first.server), undefined, 10_000, 'cf')
  t.equal(runs.length, 2, 'the two runs of the cycle')
  t.same(runs.map((r) => r.runId).sort(), [...stopped.history[0]!.runIds].sort(), "they are the cycle's")
  for (const run of runs) {
    t.equal(run.live, false, `run ${run.method} is not live`)
    t.match(
      run.end,
      { reason: 'interrupted', detail: 'campaign cf stopped (cycle 1: the cut command exited 1)' },
      `run ${run.method} ended as interrupted`,
    )
    t.ok(run.ackedThroughSeq > 0, `run ${run.method} acknowledged records (${run.ackedThroughSeq})`)
  }
  await first.kill('SIGTERM')

  // The file as an older listener wrote it (format 1, no checksum): it still loads.
  const path = campaignFilePath(listenerDir, 'cf')
  const { xxh64: _checksum, ...fields } = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>
  writeFileSync(path, `${JSON.stringify({ ...fields, version: 1 }, null, 2)}\n`)

  // 2. Another option than the cut command changed: refused, and the hint says only the cut command may change.
  const refused = await runCli(['listen', '--host', '127.0.0.1', '--port', '0', '--dir', listenerDir, ...options('true', '3')])
  t.equal(refused.code, 2, 'other --cycles: refused (exit 2)')
  t.match(
    refused.stderr,
    /campaign cf in .*cf\.json was started with other options: --cycles 3, stored 2; --cut-command "true", stored "false"/,
  )
  t.match(
    refused.stderr,
    /it stopped because its cut command failed: resume it with --campaign cf --cycles 2 --cut-command 'NEW-COMMAND' --cut-after 0-0/,
  )
  t.match(readCampaign(listenerDir, 'cf'), { version: 1, phase: 'stopped', cutCommand: 'false' }, 'the refused start changed nothing')

  // 3. The same options with a working cut command: resumed, the change logged and kept, the cycle to be written again.
  const second = await startListener(listenerDir, options('true'))
  t.teardown(() => second.kill())
  await waitFor('the change logged', () => /the cut command changed/.test(second.stderr()))
  t.match(
    second.stderr(),
    /campaign cf: the cut command changed from "false" to "true" \(stopped: cycle 1: the cut command exited 1\); cycle 1 of 2 is written again: waiting for the agent's writer/,
  )
  const resumed = readCampaign(listenerDir, 'cf')!
  t.match(resumed, { version: 2, phase: 'waiting-for-writer', cycle: 1, cutCommand: 'true' }, 'written again in format 2')
  t.notOk('detail' in resumed, 'the stop detail is gone')
  t.match(resumed.history, [{ cycle: 1, groupId: null, runIds: [], cutMs: null, outcome: 'pending' }], 'cycle 1 starts again')
  t.equal(resumed.cutCommandChanges?.length, 1)
  t.match(resumed.cutCommandChanges?.[0], {
    cycle: 1,
    from: 'false',
    to: 'true',
    failedAttempt: { cycle: 1, outcome: 'cut-failed', cutExitCode: 1, runIds: stopped.history[0]!.runIds },
  })

  // The report counts no run of the failed attempt and warns of none.
  const report = await runCli(['report', '--dir', listenerDir, '--json'])
  t.equal(report.code, 0, report.stderr)
  const doc = JSON.parse(report.stdout) as { campaigns: { warnings: string[]; settings: { cutCommand: string } }[] }
  t.same(doc.campaigns[0]!.warnings, [], 'no warning about the runs of the failed attempt')
  t.equal(doc.campaigns[0]!.settings.cutCommand, 'true')

  // 4. The next agent verifies the stopped runs and writes cycle 1 again.
  const retry = spawnAgent(agentArgs(second.server))
  t.teardown(() => retry.process.kill('SIGKILL'))
  let retried = resumed
  await waitFor(
    'a new writer for cycle 1',
    () => {
      retried = readCampaign(listenerDir, 'cf') ?? retried
      return retried.history[0]!.groupId !== null
    },
    60_000,
    50,
  )
  t.not(retried.history[0]!.groupId, stopped.history[0]!.groupId, 'a new group writes cycle 1')
  t.equal(retried.cycle, 1, 'still cycle 1')
  await waitFor('the announcement logged', () => /cycle 1: writer on .* announced/.test(second.stderr()))
  t.match(retry.stdout(), /reported 2 verdicts to the listener/)
  t.match(retry.stdout(), /campaign cf: cycle 1 of 2: writing until the power goes/)
  retry.process.kill('SIGKILL')
  await retry.exited
  await second.kill('SIGTERM')

  // 5. A campaign that did not stop on a failed cut takes no other cut command.
  const notStopped = await runCli(['listen', '--host', '127.0.0.1', '--port', '0', '--dir', listenerDir, ...options('false')])
  t.equal(notStopped.code, 2, 'another --cut-command for a running campaign: refused (exit 2)')
  t.match(notStopped.stderr, /was started with other options: --cut-command "false", stored "true"/)
  t.notMatch(notStopped.stderr, /it stopped because its cut command failed/)
})

t.test('with --jobs 2 every job’s writer is told to stop', async (t) => {
  const dir = tempDir(t)
  const listenerDir = join(dir, 'listener')
  const listener = await startListener(listenerDir, ['--campaign', 'cj', '--cycles', '1', '--cut-command', 'exit 5', '--cut-after', '0'])
  t.teardown(() => listener.kill())
  const agent = spawnAgent([
    'agent',
    '--server',
    listener.server,
    '--file',
    join(dir, 'data.plugcheck'),
    '--method',
    'fdatasync',
    '--jobs',
    '2',
    '--size',
    '16MiB',
  ])
  t.teardown(() => agent.process.kill('SIGKILL'))
  const stopped = await waitForPhase(listenerDir, 'cj', ['stopped'], 'after the cut command failed ', 60_000)
  const stoppedAtMs = Date.now()
  t.match(stopped.history[0], { outcome: 'cut-failed', cutExitCode: 5 })
  // As above: within 30 s (it polls every 2 s), where a writer never told to stop runs until the kill at 60 s.
  const bound = setTimeout(() => agent.process.kill('SIGKILL'), 60_000)
  const ended = await agent.exited
  clearTimeout(bound)
  t.ok(ended.atMs - stoppedAtMs < 30_000, `the agent stopped ${ended.atMs - stoppedAtMs} ms after the campaign did`)
  t.equal(ended.code, 3, `exit 3 (stderr: ${agent.stderr()})`)
  t.match(agent.stderr(), /^plugcheck: campaign cj stopped \(cycle 1: the cut command exited 5\); the writer stopped/m)
  t.notMatch(agent.stderr(), /stopped by SIGTERM/, 'no signal is named: none was sent')
  const { runs } = await listRuns(endpoint(listener.server), undefined, 10_000, 'cj')
  t.equal(runs.length, 2, 'one run per job')
  for (const run of runs) t.match(run.end, { reason: 'interrupted', detail: 'campaign cj stopped (cycle 1: the cut command exited 5)' })
})
