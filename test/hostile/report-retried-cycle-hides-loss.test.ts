/**
 * A cut command that cut the power and still exited non-zero (the PDU's "on" request failed after its
 * "off" went through), or was killed at its time-out after the power was gone: the campaign stops as
 * cut-failed, the machine reboots, the agent verifies the cycle's runs and reports them, and they lost
 * acknowledged records. The operator fixes the command and the campaign resumes, writing the cycle
 * again (cutCommandChanges keeps the failed attempt). The report must not hide that loss: "a loss is a
 * fail whatever else". Today the failed attempt's runs are dropped without a word.
 */
import t from 'tap'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { runInProcess } from '../fixtures/cli.js'
import { craftListenerDir, type CraftedCampaign } from '../fixtures/report.js'
import { campaignFileText, type CampaignFile } from '../../src/store/campaign-file.js'

// Crafted cycle 1 is the failed attempt (the cut happened: fsync lost 100 records, the control noticed);
// crafted cycle 2 is the same cycle written again after the new cut command (everything intact).
const campaign: CraftedCampaign = {
  name: 'retry',
  host: 'box-r',
  model: 'Samsung SSD 870 EVO 1TB',
  writeCache: 'write back',
  fileSystem: 'ext4',
  cycles: [
    {
      runs: [
        { method: 'fsync', acked: 1000, lost: [[901, 1000]] },
        { method: 'none', acked: 1000, lost: [[801, 1000]] },
      ],
    },
    {
      runs: [
        { method: 'fsync', acked: 900 },
        { method: 'none', acked: 900, lost: [[801, 900]] },
      ],
    },
  ],
}

t.test("the runs of a cycle's failed cut attempt that lost records are not hidden by the report", async (t) => {
  const dir = t.testdir()
  await craftListenerDir(dir, [campaign])
  const path = join(dir, 'campaigns', 'retry.json')
  const crafted = JSON.parse(readFileSync(path, 'utf8')) as CampaignFile & { xxh64?: string }
  delete crafted.xxh64
  const [attempt, again] = crafted.history
  const lostRunIds = attempt!.runIds
  // As retryCycle leaves it: one cycle, its record the second attempt, the failed one kept in the change.
  const file: CampaignFile = {
    ...crafted,
    version: 2,
    cycles: 1,
    cycle: 2,
    phase: 'done',
    history: [{ ...again!, cycle: 1 }],
    cutCommandChanges: [
      {
        cycle: 1,
        atMs: again!.steadyMs! - 30_000,
        from: 'curl -fsS http://plug/off && sleep 10 && curl -fsS http://plug/on',
        to: 'curl -fsS http://plug2/off && sleep 10 && curl -fsS http://plug2/on',
        failedAttempt: { ...attempt!, cutExitCode: 22, outcome: 'cut-failed', cameBackMs: null },
      },
    ],
  }
  writeFileSync(path, campaignFileText(file))

  const result = await runInProcess(['report', '--dir', dir, '--campaign', 'retry', '--json'])
  t.equal(result.code, 0, result.stderr)
  const doc = JSON.parse(result.stdout)
  const report = doc.campaigns[0]
  const fsync = report.methods.find((m: { method: string }) => m.method === 'fsync')
  const failCounted = (fsync?.verdicts?.fail ?? 0) > 0
  const named = (report.warnings as string[]).some((w) => lostRunIds.some((id) => w.includes(id)))
  t.ok(
    failCounted || named,
    `the 100 acknowledged fsync records lost in the failed attempt show in the report (fail counted or a warning naming run ${lostRunIds[0]}); methods: ${JSON.stringify(report.methods)}; warnings: ${JSON.stringify(report.warnings)}`,
  )

  const text = await runInProcess(['report', '--dir', dir, '--campaign', 'retry'])
  t.equal(text.code, 0)
  t.ok(
    lostRunIds.some((id) => (text.stdout + text.stderr).includes(id)) || /fail 1/.test(text.stdout),
    'the text report names the lost run or counts its fail',
  )
})
