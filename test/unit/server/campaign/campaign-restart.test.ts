/**
 * A campaign survives its listener: `plugcheck listen --campaign` children SIGKILLed while waiting to
 * cut, while the cut command runs and while waiting for the agent resume where they were; the cut
 * command runs exactly once per cycle (its script counts its runs) and no cycle is counted twice. A
 * resumed campaign must be the same campaign (other options: exit 2), and a damaged file refuses to
 * start (exit 3).
 */
import t from 'tap'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, startListener, tempDir, waitFor } from '../../../fixtures/cli.js'
import { campaignFilePath } from '../../../../src/server/campaign/campaign-file-io.js'
import { cutScript, readCampaign, reportVerdict, startCycleWriter, waitForPhase } from '../../../fixtures/campaign-agent.js'

const flags = (name: string, command: string, cycles: number, cutAfter = '1-1.5'): string[] => [
  '--campaign',
  name,
  '--cycles',
  String(cycles),
  '--cut-command',
  command,
  '--cut-after',
  cutAfter,
  '--reboot-timeout',
  '60',
  '--seed',
  '99',
]

t.test('killed in waiting-to-cut and in waiting-for-agent, the listener resumes: one cut per cycle, every cycle once', async (t) => {
  const dir = tempDir(t)
  const cut = cutScript(dir)
  const args = flags('resume', cut.command, 2)

  // Cycle 1: killed between steady and the cut.
  const first = await startListener(dir, args)
  t.teardown(() => first.kill())
  const one = await startCycleWriter(first.port, 'resume', 1)
  await waitForPhase(dir, 'resume', ['waiting-to-cut'])
  await first.kill('SIGKILL')
  one.writer.close()
  t.match(readCampaign(dir, 'resume'), { phase: 'waiting-to-cut', cycle: 1 }, 'killed before the cut')
  t.equal(cut.count(), 0)
  const planned = readCampaign(dir, 'resume')!.history[0]!.plannedCutMs!

  const second = await startListener(dir, args)
  t.teardown(() => second.kill())
  await waitFor('the resumed cut of cycle 1', () => cut.count() === 1)
  const cycle1 = await waitForPhase(dir, 'resume', ['waiting-for-agent'])
  t.equal(cycle1.history[0]!.plannedCutMs, planned, 'the planned cut moment survived the restart')
  t.ok(cycle1.history[0]!.cutMs! >= planned)
  await waitFor('the resume logged', () =>
    /campaign resume: resumed in cycle 1 of 2, waiting-to-cut: the cut is planned for/.test(second.stderr()),
  )
  await reportVerdict(second.port, one.runId)
  await waitForPhase(dir, 'resume', ['waiting-for-writer'], 'in cycle 2 ')

  // Cycle 2: killed after the cut, before the agent came back.
  const two = await startCycleWriter(second.port, 'resume', 2)
  await waitFor('the cut of cycle 2', () => cut.count() === 2)
  await waitForPhase(dir, 'resume', ['waiting-for-agent'])
  await second.kill('SIGKILL')
  two.writer.close()

  const third = await startListener(dir, args)
  t.teardown(() => third.kill())
  await waitFor('the resumed campaign to say so', () => /resumed in cycle 2 of 2, waiting-for-agent/.test(third.stderr()))
  await reportVerdict(third.port, two.runId)
  const done = await waitForPhase(dir, 'resume', ['done'])
  await waitFor('the end logged', () => /campaign resume: campaign done: 2 cycles/.test(third.stderr()))
  await third.kill('SIGTERM')

  t.equal(cut.count(), 2, 'the cut command ran exactly once per cycle')
  t.equal(done.cycle, 3)
  t.same(
    done.history.map((r) => [r.cycle, r.outcome, r.runIds.length]),
    [
      [1, 'verdict', 1],
      [2, 'verdict', 1],
    ],
    'each cycle counted once',
  )

  // Started again, a done campaign does nothing more.
  const fourth = await startListener(dir, args)
  await waitFor('the done campaign to say so', () => /campaign resume: already done/.test(fourth.stderr()))
  await fourth.kill('SIGTERM')
  t.equal(cut.count(), 2)
})

t.test('killed while the cut command runs, the listener never runs it again and waits for the agent', async (t) => {
  const dir = tempDir(t)
  const cut = cutScript(dir, 0, 3) // appends its line, then takes 3 s, like a slow PDU
  const args = flags('mid-cut', cut.command, 1, '0.2-0.5')
  const first = await startListener(dir, args)
  t.teardown(() => first.kill())
  const one = await startCycleWriter(first.port, 'mid-cut', 1)
  await waitFor('the cut command to start', () => cut.count() === 1)
  t.match(readCampaign(dir, 'mid-cut'), { phase: 'cutting' }, 'the cut moment is on disk before the command runs')
  await first.kill('SIGKILL')
  one.writer.close()

  const second = await startListener(dir, args)
  t.teardown(() => second.kill())
  const resumed = await waitForPhase(dir, 'mid-cut', ['waiting-for-agent'])
  t.match(resumed, { cycle: 1, detail: /the listener restarted while the cut command ran; it is not run again/ })
  await waitFor('the resume logged', () => /the listener stopped while the cut command ran; it is not run again/.test(second.stderr()))
  await reportVerdict(second.port, one.runId)
  const done = await waitForPhase(dir, 'mid-cut', ['done'])
  await second.kill('SIGTERM')
  t.equal(cut.count(), 1, 'the cut command ran once')
  t.match(done.history[0], { outcome: 'verdict', cutExitCode: null })
})

t.test('a resumed campaign must be the same campaign: other options are refused (exit 2)', async (t) => {
  const dir = tempDir(t)
  const cut = cutScript(dir)
  const listener = await startListener(dir, flags('same', cut.command, 3))
  await waitFor('the campaign file', () => readCampaign(dir, 'same') !== undefined)
  await listener.kill('SIGTERM')

  const other = await runCli(['listen', '--host', '127.0.0.1', '--port', '0', '--dir', dir, ...flags('same', cut.command, 5, '2-4')])
  t.equal(other.code, 2, other.stderr)
  t.equal(other.stdout, '', 'refused before the listener starts: no "listening on" line')
  t.match(
    other.stderr,
    /^plugcheck: campaign same in .*same\.json was started with other options: --cycles 5, stored 3; --cut-after 2-4, stored 1-1\.5$/m,
  )
  t.match(
    other.stderr,
    /^hint: resume it with --campaign same --cycles 3 --cut-command .* --cut-after 1-1\.5 --reboot-timeout 60 --seed 99/m,
  )
  t.match(readCampaign(dir, 'same'), { cycles: 3, phase: 'waiting-for-writer' }, 'the stored campaign is unchanged')
})

t.test('a damaged campaign file refuses to start (exit 3) and names the file', async (t) => {
  const dir = tempDir(t)
  const cut = cutScript(dir)
  mkdirSync(join(dir, 'campaigns'))
  const path = campaignFilePath(dir, 'broken')
  for (const [content, why] of [
    ['{"version":1,"name":"broken","cycles":3', /Unexpected end|JSON/],
    [JSON.stringify({ version: 1, name: 'broken', cycles: 3 }), /cutCommand|expected/],
  ] as const) {
    writeFileSync(path, content)
    const result = await runCli(['listen', '--host', '127.0.0.1', '--port', '0', '--dir', dir, ...flags('broken', cut.command, 3)])
    t.equal(result.code, 3, result.stderr)
    t.equal(result.stdout, '', 'refused before the listener starts')
    t.match(result.stderr, new RegExp(`^plugcheck: the campaign file ${path.replace(/[.]/g, '\\.')} is damaged: `, 'm'))
    t.match(result.stderr, why)
  }
  t.equal(cut.count(), 0)
})

t.test("a bit flipped in a campaign file is refused by its checksum; an older listener's file without one resumes", async (t) => {
  const dir = tempDir(t)
  const cut = cutScript(dir)
  const args = flags('sealed', cut.command, 3)
  const listener = await startListener(dir, args)
  await waitFor('the campaign file', () => readCampaign(dir, 'sealed') !== undefined)
  await listener.kill('SIGTERM')
  const path = campaignFilePath(dir, 'sealed')
  const good = readFileSync(path, 'utf8')
  t.match(good, /"xxh64": "[0-9a-f]{16}"\n\}\n$/, 'the file ends with its checksum')

  // The last digit of its creation time, one bit off: still a valid campaign, only the checksum knows.
  writeFileSync(
    path,
    good.replace(/("createdMs": \d+)(\d),/, (_m, head: string, digit: string) => `${head}${String.fromCharCode(digit.charCodeAt(0) ^ 1)},`),
  )
  t.not(readFileSync(path, 'utf8'), good)
  const flipped = await runCli(['listen', '--host', '127.0.0.1', '--port', '0', '--dir', dir, ...args])
  t.equal(flipped.code, 3, flipped.stderr)
  t.match(
    flipped.stderr,
    new RegExp(
      `^plugcheck: the campaign file ${path.replace(/[.]/g, '\\.')} is damaged: it does not match its checksum \\(field xxh64\\)$`,
      'm',
    ),
  )

  const { xxh64: _checksum, ...legacy } = JSON.parse(good) as Record<string, unknown>
  writeFileSync(path, JSON.stringify(legacy, null, 2))
  const resumed = await startListener(dir, args)
  t.teardown(() => resumed.kill())
  await waitFor('the older file to resume', () => /campaign sealed: resumed in cycle 1 of 3/.test(resumed.stderr()))
  await resumed.kill('SIGTERM')
  t.equal(cut.count(), 0)
})
