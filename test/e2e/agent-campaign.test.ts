/**
 * plugcheck agent in a campaign, against a real `listen --campaign` and real child processes: the
 * agent writes the cycle with its campaign tag, the listener's cut command SIGKILLs it once steady,
 * and the next agent verifies that cycle, reports it and finds the campaign done. A foreign file at
 * --file is refused as `write` refuses it, and left as it was.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { listRuns, queryCampaign } from '../../src/client/verify/listener-client.js'
import { parseEndpoint, type Endpoint } from '../../src/protocol/endpoint.js'
import { exitedWithOutput, runCli, sleep, spawnCli, startListener, tempDir } from '../fixtures/cli.js'
import type { CampaignState } from '../../src/protocol/messages.js'

const endpoint = (server: string): Endpoint => parseEndpoint(server) as Endpoint

/** The campaign as the listener answers it, once its engine runs (it may answer null for a moment after "listening on"). */
async function campaignOf(server: string): Promise<CampaignState> {
  let state: CampaignState | null = null
  for (let i = 0; i < 100 && state === null; i++) {
    state = await queryCampaign(endpoint(server), undefined, 10_000)
    if (state === null) await sleep(100)
  }
  if (state === null) throw new Error('the listener answered no campaign for 10 s')
  return state
}

t.test('a one-cycle campaign: the agent writes, is cut after steady, the next agent verifies and finds the campaign done', async (t) => {
  const dir = tempDir(t)
  const pidFile = join(dir, 'agent.pid')
  // The "power cut": the listener SIGKILLs the agent (and so its writer) as soon as it is steady.
  const listener = await startListener(join(dir, 'listener'), [
    '--campaign',
    'c1',
    '--cycles',
    '1',
    '--cut-command',
    `kill -9 "$(cat '${pidFile}')"`,
    '--cut-after',
    '0',
  ])
  t.teardown(() => listener.kill())
  const file = join(dir, 'data.plugcheck')
  const args = ['agent', '--server', listener.server, '--file', file, '--method', 'fdatasync,none', '--size', '16MiB']
  t.same(await campaignOf(listener.server), { name: 'c1', cycles: 1, cycle: 1, phase: 'waiting-for-writer' })

  const agent = spawnCli(args)
  writeFileSync(pidFile, String(agent.pid))
  let stdout = ''
  agent.stdout!.on('data', (c: Buffer) => (stdout += c.toString()))
  const timer = setTimeout(() => agent.kill('SIGKILL'), 60_000) // bound: the cut comes ~3 s after the start
  const ended = await exitedWithOutput(agent) // its last lines read: they are matched below
  clearTimeout(timer)
  t.equal(ended.signal, 'SIGKILL', `the cut ended the agent (stdout: ${stdout})`)
  t.match(stdout, /campaign c1: cycle 1 of 1: writing until the power goes/)
  const { runs } = await listRuns(endpoint(listener.server), undefined, 10_000, 'c1')
  t.equal(runs.length, 2, 'both runs of the cycle are in the campaign')
  for (const run of runs) {
    t.same(run.campaign, { name: 'c1', cycle: 1 }, `run ${run.runId} carries the campaign tag`)
    t.type(run.steadyMs, 'number', 'steady')
    t.equal(run.verdict, null, 'no verdict before the agent comes back')
  }

  const second = await runCli(args)
  // The same boot and a SIGKILL, not a power cut: the control lost nothing, so inconclusive (exit 4).
  t.equal(second.code, 4, second.stderr)
  t.match(second.stdout, /reported 2 verdicts to the listener/)
  t.match(second.stdout, /campaign c1 is done \(1 cycles\): nothing to write/)
  const after = await listRuns(endpoint(listener.server), undefined, 10_000, 'c1')
  t.equal(after.runs.length, 2, 'no new run was started')
  for (const run of after.runs) t.equal(run.verdict?.verdict, run.method === 'none' ? 'inconclusive' : 'pass')
  t.match(await campaignOf(listener.server), { phase: 'done' })
})

t.test('a foreign file at --file: refused (exit 2) as write refuses it, and untouched', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'), [
    '--campaign',
    'c2',
    '--cycles',
    '1',
    '--cut-command',
    'true',
    '--cut-after',
    '3600',
  ])
  t.teardown(() => listener.kill())
  await campaignOf(listener.server)
  const file = join(dir, 'precious.db')
  const bytes = randomBytes(64 * 1024)
  writeFileSync(file, bytes)
  const result = await runCli(['agent', '--server', listener.server, '--file', file])
  t.equal(result.code, 2, result.stdout)
  t.match(result.stderr, /refusing to overwrite .*precious\.db: it is not a plugcheck data file/)
  t.ok(readFileSync(file).equals(bytes), 'the file is untouched')
  t.same((await listRuns(endpoint(listener.server), undefined, 10_000)).runs, [], 'no run announced')
  t.match(await campaignOf(listener.server), { phase: 'waiting-for-writer', cycle: 1 })
})

t.test('a cut that destroyed a data file superblock: the agent judges it, then replaces its own file for the next cycle', async (t) => {
  const dir = tempDir(t)
  const pidFile = join(dir, 'agent.pid')
  const listener = await startListener(join(dir, 'listener'), [
    '--campaign',
    'c3',
    '--cycles',
    '2',
    '--cut-command',
    `kill -9 "$(cat '${pidFile}')"`,
    '--cut-after',
    '0',
  ])
  t.teardown(() => listener.kill())
  const file = join(dir, 'data.plugcheck')
  const args = ['agent', '--server', listener.server, '--file', file, '--method', 'fdatasync', '--size', '16MiB']
  await campaignOf(listener.server)

  const runAgentUntilCut = async (): Promise<string> => {
    const agent = spawnCli(args)
    writeFileSync(pidFile, String(agent.pid))
    let stdout = ''
    agent.stdout!.on('data', (c: Buffer) => (stdout += c.toString()))
    const timer = setTimeout(() => agent.kill('SIGKILL'), 60_000)
    await exitedWithOutput(agent) // what it printed last is returned too
    clearTimeout(timer)
    return stdout
  }
  t.match(await runAgentUntilCut(), /cycle 1 of 2: writing until the power goes/)
  // The cut took block 0 with it: the file no longer says it is plugcheck's.
  const bytes = readFileSync(file)
  bytes.fill(0, 0, 8192)
  writeFileSync(file, bytes)

  const second = await runAgentUntilCut()
  t.match(second, /FAIL/, 'the lost superblock is judged a failure')
  t.match(second, /reported 1 verdict to the listener/)
  t.match(second, /cycle 2 of 2: writing until the power goes/, 'and the next cycle replaces the file')
  const { runs } = await listRuns(endpoint(listener.server), undefined, 10_000, 'c3')
  t.same(runs.map((r) => r.campaign?.cycle).sort(), [1, 2], 'one run per cycle')
  t.equal(runs.find((r) => r.campaign?.cycle === 1)?.verdict?.verdict, 'fail')
})
