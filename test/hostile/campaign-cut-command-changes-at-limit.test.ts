/**
 * A campaign file whose cutCommandChanges already holds the most the schema takes (10,000), stopped by
 * a failed cut, resumed with another --cut-command: the listener accepts the new command, then fails
 * to record the 10,001st change (its own schema refuses the file it built), halts the campaign with a
 * raw validation dump, and says "restart the listener to resume it" -- which fails the same way at
 * every restart. What must happen: the start is refused at once with a clear message (exit 2 or 3),
 * or the change is recorded; never a campaign halted for good behind advice that cannot work.
 */
import t from 'tap'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { tempDir, waitFor, watchCli } from '../fixtures/cli.js'
import { campaignFileText, type CampaignFile, type CycleRecord } from '../../src/store/campaign-file.js'

const record = (cycle: number): CycleRecord => ({
  cycle,
  groupId: null,
  runIds: [],
  host: null,
  path: null,
  steadyMs: 1_700_000_000_000,
  plannedCutMs: 1_700_000_000_000,
  cutMs: 1_700_000_000_001,
  cutExitCode: 1,
  cutOutput: '',
  cameBackMs: null,
  outcome: 'cut-failed',
})

t.test('a resumed campaign at the limit of cut command changes is refused clearly, not halted for good', async (t) => {
  const dir = tempDir(t)
  const listenerDir = join(dir, 'listener')
  mkdirSync(join(listenerDir, 'campaigns'), { recursive: true })
  const n = 10_000
  const file: CampaignFile = {
    version: 2,
    name: 'hc',
    cycles: 2,
    cutCommand: `cmd${n}`,
    cutAfterS: [0, 0],
    rebootTimeoutS: 20,
    seed: 7,
    createdMs: 1_700_000_000_000,
    phase: 'stopped',
    cycle: 1,
    detail: 'cycle 1: the cut command exited 1',
    history: [record(1)],
    cutCommandChanges: Array.from({ length: n }, (_, i) => ({
      cycle: 1,
      atMs: 1_700_000_000_000 + i,
      from: `cmd${i}`,
      to: `cmd${i + 1}`,
      failedAttempt: record(1),
    })),
  }
  const path = join(listenerDir, 'campaigns', 'hc.json')
  writeFileSync(path, campaignFileText(file))
  const args = ['--campaign', 'hc', '--cycles', '2', '--cut-after', '0', '--reboot-timeout', '20', '--seed', '7']

  // A listener that refuses to start exits by itself. One that starts (however long a loaded machine
  // takes: up to 60 s) is stopped (SIGTERM, exit 0) once its campaign has acted on the change: the file
  // no longer stopped, or the halt logged; or after 60 s more, when the assertions below say what it did.
  const listener = watchCli(['listen', '--host', '127.0.0.1', '--port', '0', '--dir', listenerDir, ...args, '--cut-command', 'fixed'])
  t.teardown(() => listener.child.kill('SIGKILL'))
  const exited = (): boolean => listener.child.exitCode !== null || listener.child.signalCode !== null
  const phaseOnDisk = (): string | undefined => {
    try {
      return (JSON.parse(readFileSync(path, 'utf8')) as CampaignFile).phase
    } catch {
      return undefined // being written
    }
  }
  await waitFor('the listener to listen or exit', () => /listening on/.test(listener.out.stdout) || exited(), 60_000).catch(() => undefined)
  await waitFor(
    'the campaign to act on the change',
    () =>
      exited() ||
      /could not record its state/.test(listener.out.stdout + listener.out.stderr) ||
      (phaseOnDisk() ?? 'stopped') !== 'stopped',
    60_000,
    200,
  ).catch(() => undefined)
  if (!exited()) listener.child.kill('SIGTERM')
  const result = { code: (await listener.exited) ?? -1, ...listener.out }
  const log = result.stdout + result.stderr
  t.notMatch(log, /could not record its state/, `the campaign is not halted on a change it accepted:\n${log}`)
  t.notMatch(log, /"code": "too_big"/, 'no raw validation dump')
  const after = JSON.parse(readFileSync(path, 'utf8')) as CampaignFile
  const recorded = after.phase === 'waiting-for-writer' && after.cutCommand === 'fixed'
  const refused = (result.code === 2 || result.code === 3) && after.phase === 'stopped'
  t.ok(
    recorded || refused,
    `either the change is recorded or the start is refused with exit 2/3 (code ${result.code}, phase ${after.phase})`,
  )
})
