/**
 * README: "A cycle tested nothing when every verdict of it saw the boot the write ran on". A cycle whose
 * one verdict (fdatasync: pass, rebootedSinceWrite false) saw the write's boot, and whose control run
 * has no verdict stored (never reported, or refused as damaged): every verdict of that cycle saw the
 * same boot, so its pass proves nothing. Today the run without a verdict counts as an unknown boot,
 * the cycle is not flagged, and the pass counts as a pass.
 */
import t from 'tap'
import { runInProcess } from '../fixtures/cli.js'
import { craftListenerDir, type CraftedCampaign } from '../fixtures/report.js'

const campaign: CraftedCampaign = {
  name: 'nover',
  host: 'box-n',
  model: 'Samsung SSD 870 EVO 1TB',
  writeCache: 'write back',
  fileSystem: 'ext4',
  cycles: [
    {
      runs: [
        { method: 'fdatasync', acked: 1000, verdict: { rebootedSinceWrite: false } },
        { method: 'none', acked: 1000, verdict: null },
      ],
    },
  ],
}

t.test('a pass on the write’s boot is not counted as a pass because another run of its cycle has no verdict', async (t) => {
  const dir = t.testdir()
  await craftListenerDir(dir, [campaign])
  const result = await runInProcess(['report', '--dir', dir, '--campaign', 'nover', '--json'])
  t.equal(result.code, 0, result.stderr)
  const report = JSON.parse(result.stdout).campaigns[0]
  const cycle = report.cycles[0]
  const fdatasync = cycle.runs.find((r: { method: string }) => r.method === 'fdatasync')
  t.equal(fdatasync.verdict.rebootedSinceWrite, false, 'the only verdict saw the boot of the write')
  t.equal(cycle.testedNothing, 'same-boot', 'every verdict of the cycle saw the same boot: it tested nothing')
  t.equal(fdatasync.counted, 'tested-nothing', 'its pass is counted as tested nothing')
  const method = report.methods.find((m: { method: string }) => m.method === 'fdatasync')
  t.equal(method.verdicts.pass, 0, 'no pass counted for fdatasync')
  t.ok(
    report.caveats.some((c: { code: string }) => c.code === 'same-boot'),
    `the campaign is flagged: every verdict saw the same boot (caveats: ${JSON.stringify(report.caveats)})`,
  )
})
