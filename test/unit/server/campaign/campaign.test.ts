/**
 * The campaign engine on a real listener (in this process), with a fake agent over the raw protocol
 * and a cut command that is a shell script counting its runs: a whole campaign, its seeded cut
 * moments, a failing cut command, an agent that never comes back.
 */
import t, { type Test } from 'tap'
import { Listener } from '../../../../src/server/listen/listener.js'
import { Campaign } from '../../../../src/server/campaign/campaign.js'
import { cutDelayMs } from '../../../../src/server/campaign/campaign-cycle.js'
import type { CampaignOptions } from '../../../../src/server/campaign/campaign-types.js'
import type { ListenerEvent } from '../../../../src/server/listen/events.js'
import { tempDir, waitFor } from '../../../fixtures/cli.js'
import { Peer } from '../../../fixtures/peer.js'
import { cutScript, readCampaign, reportVerdict, startCycleWriter, waitForPhase } from '../../../fixtures/campaign-agent.js'

async function startCampaign(
  t: Test,
  dir: string,
  options: CampaignOptions,
): Promise<{ listener: Listener; campaign: Campaign; port: number; messages: string[] }> {
  const messages: string[] = []
  let campaign: Campaign | undefined
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir, campaignState: () => campaign?.state() ?? null })
  listener.events.on('event', (e: ListenerEvent) => void (e.kind === 'campaign' && messages.push(e.message)))
  campaign = await Campaign.open(dir, options, listener)
  t.teardown(async () => {
    await campaign!.close()
    await listener.close()
  })
  return { listener, campaign, port: listener.address().port, messages }
}

/** One cycle as the agent lives it: write until steady, wait for the cut, "reboot", report the verdict. */
async function agentCycle(port: number, dir: string, name: string, cycle: number, cuts: () => number): Promise<void> {
  const before = cuts()
  const { writer, runId } = await startCycleWriter(port, name, cycle)
  await waitFor(`the cut of cycle ${cycle}`, () => cuts() > before)
  writer.close() // the power is gone
  await waitForPhase(dir, name, ['waiting-for-agent'], `after the cut of cycle ${cycle} `)
  await reportVerdict(port, runId)
}

async function queryState(port: number): Promise<unknown> {
  const peer = await Peer.open(port)
  try {
    peer.send({ type: 'hello', protocol: 3, role: 'verifier' })
    await peer.next('welcome')
    peer.send({ type: 'campaign-query' })
    const reply = await peer.next('campaign-state')
    return reply.type === 'campaign-state' ? reply.campaign : undefined
  } finally {
    peer.close()
  }
}

/**
 * The listener's answer once it reached phase (and cycle, when given): it answers a state once the state
 * is on disk, a moment after the file a test waited for says it.
 */
async function settledState(port: number, phase: string, cycle?: number): Promise<unknown> {
  let state = (await queryState(port)) as { phase?: string; cycle?: number }
  for (
    const deadline = Date.now() + 20_000;
    (state.phase !== phase || (cycle !== undefined && state.cycle !== cycle)) && Date.now() < deadline;
  )
    state = (await queryState(port)) as { phase?: string; cycle?: number }
  return state
}

t.test('a 2-cycle campaign driven by an agent ends done, each cycle cut once and judged', async (t) => {
  const dir = tempDir(t)
  const cut = cutScript(dir)
  const { port, messages } = await startCampaign(t, dir, {
    name: 'lab-1',
    cycles: 2,
    cutCommand: cut.command,
    cutAfterS: [0.2, 0.5],
    rebootTimeoutS: 20,
    seed: 42,
  })
  t.match(await queryState(port), { name: 'lab-1', cycles: 2, cycle: 1, phase: 'waiting-for-writer' })

  await agentCycle(port, dir, 'lab-1', 1, cut.count)
  // The verdict is acknowledged before the campaign's next state is on disk, and the listener answers a
  // state once it is on disk (its file is written first): the agent polls the answer, so does this.
  t.match(await settledState(port, 'waiting-for-writer', 2), { cycle: 2, phase: 'waiting-for-writer' })
  await agentCycle(port, dir, 'lab-1', 2, cut.count)
  const file = await waitForPhase(dir, 'lab-1', ['done'])
  await waitFor('the end logged', () => messages.some((m) => /campaign done/.test(m)))

  t.equal(cut.count(), 2, 'the cut command ran once per cycle')
  t.match(await settledState(port, 'done'), { name: 'lab-1', cycles: 2, cycle: 3, phase: 'done' })
  t.equal(file.cycle, 3)
  t.equal(file.seed, 42)
  t.equal(file.history.length, 2)
  for (const [i, record] of file.history.entries()) {
    const cycle = i + 1
    t.match(record, {
      cycle,
      outcome: 'verdict',
      host: 'box',
      path: '/data/plugcheck.dat',
      cutExitCode: 0,
      cutOutput: /power cycle requested/,
    })
    t.same(record.runIds, [(0x1000 + cycle).toString(16).padStart(16, '0')])
    t.equal(record.groupId, record.runIds[0])
    t.equal(
      record.plannedCutMs! - record.steadyMs!,
      cutDelayMs(42, cycle, [0.2, 0.5]),
      `cycle ${cycle}: the cut planned the seeded delay after steady`,
    )
    t.ok(record.cutMs! >= record.plannedCutMs!, `cycle ${cycle}: cut no earlier than planned`)
    t.ok(record.cameBackMs! >= record.cutMs!, `cycle ${cycle}: came back after the cut`)
  }
  for (const pattern of [
    /started: 2 cycles, cut 0\.2-0\.5 s .*seed 42/,
    /cycle 1: the writer is steady; cut planned in [\d.]+ s/,
    /cycle 1: cutting now: /,
    /cycle 1: cut command exited 0/,
    /cycle 1: waiting for the agent up to 20 s/,
    /cycle 1: verdicts in for 1 run/,
    /campaign done: 2 cycles/,
  ]) {
    t.ok(
      messages.some((m) => pattern.test(m)),
      `logged ${pattern}`,
    )
  }
})

t.test('the cut delays are drawn from the seed: the same seed gives the same moments, within MIN-MAX', async (t) => {
  const range = [0.2, 0.5] as const
  const delays = (seed: number): number[] => Array.from({ length: 50 }, (_, i) => cutDelayMs(seed, i + 1, range))
  t.same(delays(7), delays(7))
  t.not(delays(7).join(), delays(8).join(), 'another seed, other moments')
  t.ok(new Set(delays(7)).size > 10, 'the cycles of one campaign are cut at different moments')
  for (const ms of [...delays(7), ...delays(2 ** 32 - 1), ...delays(0)]) t.ok(ms >= 200 && ms <= 500, `${ms} ms within 200-500`)
  t.equal(cutDelayMs(9, 3, [5, 5]), 5000, 'MIN = MAX cuts exactly then')

  // Two campaigns of the same seed on two listeners plan the same delay after steady.
  const planned: number[] = []
  for (const name of ['seed-a', 'seed-b']) {
    const dir = tempDir(t)
    const cut = cutScript(dir)
    const { port, campaign } = await startCampaign(t, dir, {
      name,
      cycles: 1,
      cutCommand: cut.command,
      cutAfterS: [0.2, 0.5],
      rebootTimeoutS: 20,
      seed: 1234,
    })
    const { writer } = await startCycleWriter(port, name, 1)
    t.teardown(() => writer.close())
    const file = await waitForPhase(dir, name, ['waiting-to-cut', 'cutting', 'waiting-for-agent'])
    planned.push(file.history[0]!.plannedCutMs! - file.history[0]!.steadyMs!)
    await campaign.close()
  }
  t.equal(planned[0], planned[1])
  t.equal(planned[0], cutDelayMs(1234, 1, [0.2, 0.5]))
})

t.test('a failing cut command stops the campaign: cut-failed, its exit code and output kept', async (t) => {
  const dir = tempDir(t)
  const cut = cutScript(dir, 7)
  const { port, messages } = await startCampaign(t, dir, {
    name: 'bad-cut',
    cycles: 3,
    cutCommand: cut.command,
    cutAfterS: [0.2, 0.5],
    rebootTimeoutS: 20,
  })
  const { writer } = await startCycleWriter(port, 'bad-cut', 1)
  t.teardown(() => writer.close())
  const file = await waitForPhase(dir, 'bad-cut', ['stopped'])
  t.equal(cut.count(), 1)
  t.match(file, { phase: 'stopped', cycle: 1, detail: /cycle 1: the cut command exited 7/ })
  t.match(file.history[0], { outcome: 'cut-failed', cutExitCode: 7, cutOutput: /power cycle requested/ })
  t.match(await settledState(port, 'stopped'), { phase: 'stopped', cycle: 1 })
  await waitFor('the stop logged', () => messages.some((m) => /^STOPPED in cycle 1: the cut command exited 7/.test(m)))
  // A seed was drawn and logged when none was given.
  t.ok(messages.some((m) => new RegExp(`seed ${file.seed}\\)`).test(m)))

  // A command that cannot run at all is a failed cut too.
  const dir2 = tempDir(t)
  const missing = await startCampaign(t, dir2, {
    name: 'no-cmd',
    cycles: 1,
    cutCommand: `'${dir2}/no-such-command'`,
    cutAfterS: [0.2, 0.5],
    rebootTimeoutS: 20,
  })
  const second = await startCycleWriter(missing.port, 'no-cmd', 1)
  t.teardown(() => second.writer.close())
  const file2 = await waitForPhase(dir2, 'no-cmd', ['stopped'])
  t.match(file2.history[0], { outcome: 'cut-failed', cutExitCode: 127 })
})

t.test('no agent within --reboot-timeout: the cycle did not come back and the campaign stops', async (t) => {
  const dir = tempDir(t)
  const cut = cutScript(dir)
  const { port, messages } = await startCampaign(t, dir, {
    name: 'gone',
    cycles: 2,
    cutCommand: cut.command,
    cutAfterS: [0.2, 0.5],
    rebootTimeoutS: 2,
  })
  const { writer, runId } = await startCycleWriter(port, 'gone', 1)
  await waitFor('the cut', () => cut.count() === 1)
  writer.close()
  const file = await waitForPhase(dir, 'gone', ['stopped'])
  t.match(file, { cycle: 1, detail: /no agent came back with the verdicts within 2 s after the cut/ })
  t.match(file.history[0], { outcome: 'did-not-come-back', cameBackMs: null, cutExitCode: 0 })
  // Logged once the state is on disk, so a moment after the file says so.
  await waitFor('the stop logged', () => messages.some((m) => /^STOPPED: cycle 1: no agent came back/.test(m)))
  // A verdict arriving later changes nothing: the campaign stays stopped, the cycle is not counted.
  await reportVerdict(port, runId)
  t.match(readCampaign(dir, 'gone'), { phase: 'stopped', cycle: 1, history: [{ outcome: 'did-not-come-back' }] })
  t.equal(cut.count(), 1)
})

t.test('verdicts stored while the campaign was not watching count when it resumes', async (t) => {
  const dir = tempDir(t)
  const cut = cutScript(dir)
  const options: CampaignOptions = { name: 'recall', cycles: 1, cutCommand: cut.command, cutAfterS: [0.2, 0.5], rebootTimeoutS: 60 }
  const { port, campaign, listener } = await startCampaign(t, dir, options)
  const { writer, runId } = await startCycleWriter(port, 'recall', 1)
  await waitFor('the cut', () => cut.count() === 1)
  writer.close()
  await waitForPhase(dir, 'recall', ['waiting-for-agent'])
  // The listener stores the verdict; the engine is gone (as if killed before it wrote the next state).
  await campaign.close()
  await reportVerdict(port, runId)
  t.match(readCampaign(dir, 'recall'), { phase: 'waiting-for-agent', cycle: 1 })

  const resumed = await Campaign.open(dir, options, listener)
  t.teardown(() => resumed.close())
  const file = await waitForPhase(dir, 'recall', ['done'])
  t.match(file.history[0], { outcome: 'verdict' })
  t.equal(cut.count(), 1)
})
