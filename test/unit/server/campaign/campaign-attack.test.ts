/**
 * Hostile peers and careless operators against the campaign engine on a real listener (in this
 * process): a stranger's tagged run taking over a cycle whose writer is live, a cut command whose
 * background child keeps its output open, a verdict for a run still being written.
 */
import t, { type Test } from 'tap'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Listener } from '../../../../src/server/listen/listener.js'
import { Campaign } from '../../../../src/server/campaign/campaign.js'
import type { CampaignOptions } from '../../../../src/server/campaign/campaign-types.js'
import { tempDir, waitFor } from '../../../fixtures/cli.js'
import { Peer, runMeta } from '../../../fixtures/peer.js'
import { ackedRecords, passVerdict, readCampaign, startCycleWriter, waitForPhase } from '../../../fixtures/campaign-agent.js'

async function startCampaign(
  t: Test,
  dir: string,
  options: CampaignOptions,
): Promise<{ listener: Listener; campaign: Campaign; port: number }> {
  let campaign: Campaign | undefined
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir, campaignState: () => campaign?.state() ?? null })
  campaign = await Campaign.open(dir, options, listener)
  t.teardown(async () => {
    await campaign!.close()
    await listener.close()
  })
  return { listener, campaign, port: listener.address().port }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

t.test('a stranger (another address, no token) cannot take over a cycle whose agent writer is live', async (t) => {
  const dir = tempDir(t)
  const marker = join(dir, 'cut.marker')
  const { port } = await startCampaign(t, dir, {
    name: 'hij',
    cycles: 2,
    cutCommand: `echo cut >> '${marker}'`,
    cutAfterS: [0, 0],
    rebootTimeoutS: 600,
    seed: 1,
  })
  // The real agent's writer on box, from 127.0.0.1: announced and writing, not steady yet.
  const runId = '0000000000001001'
  const writer = await Peer.open(port)
  t.teardown(() => writer.close())
  writer.send({ type: 'hello', protocol: 3, role: 'writer' })
  writer.send({
    type: 'run',
    meta: runMeta(runId, { host: 'box', path: '/data/plugcheck.dat', requestedPath: '/data/plugcheck.dat' }),
    campaign: { name: 'hij', cycle: 1 },
  })
  await writer.next('run-ok')
  writer.send({ type: 'ack', runId, fromSeq: 1, toSeq: ackedRecords })
  await writer.next('recorded')
  await waitFor("the agent's group in cycle 1", () => readCampaign(dir, 'hij')?.history[0]?.groupId === runId)

  // A stranger from 127.0.0.2 announces a run tagged with the campaign's current cycle, for another
  // host, says it is steady at once and reports a PASS for it (from its own address: accepted).
  const strangerRun = 'ee00000000000001'
  const stranger = await Peer.open(port, '127.0.0.2')
  t.teardown(() => stranger.close())
  stranger.send({ type: 'hello', protocol: 3, role: 'writer' })
  stranger.send({
    type: 'run',
    meta: runMeta(strangerRun, { host: 'stranger', path: '/x', requestedPath: '/x' }),
    campaign: { name: 'hij', cycle: 1 },
  })
  await stranger.next('run-ok')
  stranger.send({ type: 'ack', runId: strangerRun, fromSeq: 1, toSeq: ackedRecords })
  await stranger.next('recorded')
  stranger.send({ type: 'steady', runId: strangerRun })
  await sleep(1000)
  const verifier = await Peer.open(port, '127.0.0.2')
  t.teardown(() => verifier.close())
  verifier.send({ type: 'hello', protocol: 3, role: 'verifier' })
  await verifier.next('welcome')
  verifier.send({ type: 'verdict', runId: strangerRun, result: passVerdict() })
  await sleep(1000)

  const file = readCampaign(dir, 'hij')!
  // Expected: the cycle still follows the live agent's group on box; the stranger neither chose the
  // moment of the cut (the real writer never said steady) nor ended the cycle with its own PASS.
  t.equal(file.history[0]!.groupId, runId, 'the cycle still belongs to the live writer of the agent')
  t.equal(file.history[0]!.host, 'box', 'the cycle is still on box')
  t.notOk(existsSync(marker), "no cut was made at the stranger's steady, before the real writer was steady")
  t.equal(file.cycle, 1, "the stranger's verdict did not end cycle 1")
})

t.test('a cut command that exits 0 but leaves a background child holding its output is not held in "cutting"', async (t) => {
  const dir = tempDir(t)
  const pidFile = join(dir, 'bg.pid')
  // e.g. a smart plug: switch off now, and switch on again in the background a bit later.
  const command = `sleep 30 & echo $! > '${pidFile}'; echo off; exit 0`
  t.teardown(() => {
    try {
      process.kill(Number(readFileSync(pidFile, 'utf8').trim()), 'SIGKILL')
    } catch {
      // gone
    }
  })
  const { port } = await startCampaign(t, dir, {
    name: 'bg',
    cycles: 1,
    cutCommand: command,
    cutAfterS: [0, 0],
    rebootTimeoutS: 600,
    seed: 1,
  })
  const { writer } = await startCycleWriter(port, 'bg', 1)
  t.teardown(() => writer.close())
  await waitFor('the cut command to start', () => existsSync(pidFile))
  // The shell exited 0 at once: the cut is done, the campaign waits for the agent (and arms its reboot timeout).
  // Today it stays in 'cutting' until the background child closes the pipe, or is killed after 120 s and
  // the campaign stops as cut-failed ("was killed after 120 s") although the command exited 0.
  const file = await waitForPhase(dir, 'bg', ['waiting-for-agent', 'stopped'], 'after the cut command exited 0 ', 8_000).catch(
    () => readCampaign(dir, 'bg')!,
  )
  t.equal(file.phase, 'waiting-for-agent', 'the campaign waits for the agent once the cut command exited 0')
  t.equal(file.history[0]!.cutExitCode, 0, 'the exit code 0 is recorded')
})

t.test('the listener refuses a verdict for a run whose writer is still live', async (t) => {
  const dir = tempDir(t)
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir })
  t.teardown(() => listener.close())
  const port = listener.address().port
  const runId = 'dd00000000000001'
  const writer = await Peer.open(port)
  t.teardown(() => writer.close())
  writer.send({ type: 'hello', protocol: 3, role: 'writer' })
  writer.send({ type: 'run', meta: runMeta(runId) })
  await writer.next('run-ok')
  writer.send({ type: 'ack', runId, fromSeq: 1, toSeq: ackedRecords })
  await writer.next('recorded')

  // Same address (no token needed): a verdict while the writer is connected and has not ended.
  const verifier = await Peer.open(port)
  t.teardown(() => verifier.close())
  verifier.send({ type: 'hello', protocol: 3, role: 'verifier' })
  await verifier.next('welcome')
  verifier.send({ type: 'verdict', runId, result: passVerdict() })
  const answer = await verifier.nextOf(['verdict-ok', 'error'])
  const reply = answer.type === 'error' ? answer.code : answer.type
  // A verdict judges what survived a cut; a live run has not been cut. Stored, it is recalled by a
  // resumed campaign (recallVerdicts) as if the agent had come back after the cut.
  t.not(reply, 'verdict-ok', 'a verdict for a live run is refused')
})
