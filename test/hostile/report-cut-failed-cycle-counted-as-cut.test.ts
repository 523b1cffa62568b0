/**
 * A campaign whose cut command failed (exit 1): nothing was cut, the campaign stopped and the agent's
 * writer was told to stop; the agent, started again on the same boot, verified the stopped runs and
 * reported them (the control lost nothing, every verdict on the write's boot). That cycle cut nothing:
 * the report must not count it as a cut the control did not notice (a detection rate of 0/1 "cuts
 * noticed" says the control missed a real cut), and must not tell the operator that the cut command
 * restarts the agent instead of cutting the power when it never cut anything.
 */
import t from 'tap'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { runInProcess } from '../fixtures/cli.js'
import { craftListenerDir, type CraftedCampaign } from '../fixtures/report.js'
import { campaignFileText, type CampaignFile } from '../../src/store/campaign-file.js'

const sameBoot = { rebootedSinceWrite: false }
const campaign: CraftedCampaign = {
  name: 'cutfail',
  host: 'box-c',
  model: 'Samsung SSD 870 EVO 1TB',
  writeCache: 'write back',
  fileSystem: 'ext4',
  cycles: [
    {
      outcome: 'cut-failed',
      runs: [
        { method: 'fdatasync', acked: 1000, verdict: sameBoot },
        { method: 'none', acked: 1000, verdict: sameBoot },
      ],
    },
  ],
}

t.test('a cycle whose cut command failed is not counted as a cut the control missed', async (t) => {
  const dir = t.testdir()
  await craftListenerDir(dir, [campaign])
  const path = join(dir, 'campaigns', 'cutfail.json')
  const crafted = JSON.parse(readFileSync(path, 'utf8')) as CampaignFile & { xxh64?: string }
  delete crafted.xxh64
  // As the listener leaves it: stopped in cycle 1 of 3, the cut command exited 1.
  const file: CampaignFile = {
    ...crafted,
    version: 2,
    cycles: 3,
    cycle: 1,
    phase: 'stopped',
    detail: 'cycle 1: the cut command exited 1',
    history: [{ ...crafted.history[0]!, cutExitCode: 1, cameBackMs: null, outcome: 'cut-failed' }],
  }
  writeFileSync(path, campaignFileText(file))

  const result = await runInProcess(['report', '--dir', dir, '--campaign', 'cutfail', '--json'])
  t.equal(result.code, 0, result.stderr)
  const report = JSON.parse(result.stdout).campaigns[0]
  t.equal(report.cycles[0].outcome, 'cut-failed')
  t.same(report.control?.notNoticedCycles ?? [], [], 'no cut was made in cycle 1: it is no cut the control did not notice')
  t.equal(report.control?.ran ?? 0, 0, 'the detection rate counts no cut for a cycle whose cut command failed')

  const text = await runInProcess(['report', '--dir', dir, '--campaign', 'cutfail'])
  t.equal(text.code, 0)
  t.notMatch(text.stdout, /0\/1 cuts noticed/, `no "0/1 cuts noticed" for a campaign that never cut:\n${text.stdout}`)
  t.notMatch(text.stdout, /not restart the agent/, 'the caveat does not blame the cut command for restarting the agent: it failed')
})
