/**
 * A 3-cycle campaign per lab disk, end to end with real processes: `plugcheck listen --campaign` (a
 * child process) runs `./cut.sh` once the agent's writer is steady; the script cuts the lab disk
 * (nbdkit and nbdfuse SIGKILLed, the agent frozen by SIGSTOP at the same moment: a machine that loses
 * power sends no FIN, so its writer's connection stays open at the listener), reboots it (journal
 * replay, remount) and starts the next `plugcheck agent` under a new boot id, which verifies the
 * cycle, reports the verdicts and writes the next one (see cut-and-reboot.ts). The listener must take
 * those verdicts although the old writer's connection never closed: the rebooted machine's hello ends
 * the old boot's runs. Then `plugcheck report` must show every cycle with the right verdicts:
 *
 *   honest: fdatasync passes every cycle          lying: fdatasync fails every cycle
 *   subtle: fdatasync fails (partial losses)      every disk: the `none` control loses records every cycle
 *
 * On the honest disk the listener is SIGKILLed in the middle of cycle 2 and started again with the
 * same arguments: the campaign resumes, every cycle is counted once, the cut ran once per cycle.
 *
 * The three campaigns run at once (one listener and one disk each). The agent writes fdatasync and
 * the `none` control side by side in the overwrite pattern: an overwrite of preallocated blocks adds
 * nothing to ext4's journal, so fdatasync of one file never carries the other's blocks along.
 */
import t from 'tap'
import { spawn, type ChildProcess } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { campaignFileSchema, type CampaignFile } from '../../src/store/campaign-file.js'
import { reportDocumentSchema, type CampaignReport } from '../../src/report/schema.js'
import { binPath, exitedWithOutput, runInProcess } from '../fixtures/cli.js'
import { labUnavailableReason, type DiskMode } from '../fixtures/lab/harness.js'
import { LabMachine } from '../fixtures/lab/cut-and-reboot.js'
import { labSeed } from '../fixtures/lab/seeded.js'

const cycles = 3
/** Bounds, not timings: a cycle takes ~8 s (3 s to steady, a 1-2 s cut delay, cut, reboot, verify). */
const campaignTimeoutMs = 240_000
const listenerStartMs = 60_000

interface ListenerProcess {
  readonly child: ChildProcess
  output(): string
  exited: Promise<void>
}

async function freePort(): Promise<number> {
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  const { port } = server.address() as net.AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

async function startListener(args: readonly string[], cwd: string): Promise<ListenerProcess> {
  const child = spawn(process.execPath, [binPath, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout!.on('data', (c: Buffer) => (output += c.toString()))
  child.stderr!.on('data', (c: Buffer) => (output += c.toString()))
  // Resolves once its last lines are read: the test matches a killed listener's output after it.
  const exited = exitedWithOutput(child).then(() => undefined)
  const deadline = Date.now() + listenerStartMs
  while (!/listening on 127\.0\.0\.1:\d+/.test(output)) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL')
      await exited
      throw new Error(`the listener did not start (exit ${child.exitCode}): ${output}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  return { child, output: () => output, exited }
}

function readCampaign(path: string): CampaignFile | null {
  try {
    return campaignFileSchema.parse(JSON.parse(fs.readFileSync(path, 'utf8')))
  } catch {
    return null // not written yet (it is replaced by rename, so never half written)
  }
}

interface CampaignResult {
  readonly disk: DiskMode
  readonly file: CampaignFile | null
  readonly cuts: number
  readonly report: CampaignReport | undefined
  readonly reportText: string
  readonly htmlBytes: number
  readonly listenerOutput: string[]
  /** The campaign as it was on disk when the listener was killed, if it was. */
  readonly killedAt: CampaignFile | null
  readonly lastAgentDone: boolean
  readonly agentLogs: string
}

async function runCampaign(disk: DiskMode, outsideDir: string, seed: number, killListenerInCycle: number | null): Promise<CampaignResult> {
  const dir = join(outsideDir, disk)
  fs.mkdirSync(dir)
  const listenerDir = join(dir, 'listener')
  const port = await freePort()
  const server = `127.0.0.1:${port}`
  const machine = await LabMachine.start({
    mode: disk,
    imageSizeMiB: 64,
    server,
    outsideDir,
    agentArgs: ['--method', 'fdatasync,none', '--pattern', 'overwrite', '--size', '4MiB'],
  })
  const listeners: ListenerProcess[] = []
  try {
    fs.writeFileSync(join(dir, 'cut.sh'), machine.cutScript(), { mode: 0o755 })
    const name = `lab-${disk}`
    const args = [
      'listen',
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--dir',
      listenerDir,
      '--events',
      join(dir, 'events.jsonl'),
      '--campaign',
      name,
      '--cycles',
      String(cycles),
      '--cut-command',
      './cut.sh',
      '--cut-after',
      '1-2',
      '--reboot-timeout',
      '60',
      '--seed',
      String(seed),
    ]
    listeners.push(await startListener(args, dir))
    machine.boot()

    const campaignPath = join(listenerDir, 'campaigns', `${name}.json`)
    let killedAt: CampaignFile | null = null
    if (killListenerInCycle !== null) {
      // The moment the cut command of that cycle asks for the cut: the command is surely running then.
      // (Killed between writing `cutting` and starting the command, the listener would rightly never
      // run it: a resumed `cutting` never cuts again, and that cycle would wait for an agent in vain.)
      machine.beforeCut = (n) => {
        if (n !== killListenerInCycle) return
        killedAt = readCampaign(campaignPath)
        listeners.at(-1)!.child.kill('SIGKILL')
      }
    }
    const deadline = Date.now() + campaignTimeoutMs
    for (;;) {
      const file = readCampaign(campaignPath)
      if (file !== null && (file.phase === 'done' || file.phase === 'stopped')) break
      if (Date.now() > deadline)
        throw new Error(`the ${disk} campaign did not end within ${campaignTimeoutMs / 1000} s: ${JSON.stringify(file)}`)
      if (killedAt !== null && listeners.length === 1) {
        // Started again with the same arguments while the cut command still runs.
        await listeners[0]!.exited
        listeners.push(await startListener(args, dir))
      }
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    // The last agent verifies cycle 3, finds the campaign done and exits.
    const lastAgentDone = await machine.agentDone(60_000)
    const file = readCampaign(campaignPath)

    const json = await runInProcess(['report', '--dir', listenerDir, '--json'])
    const parsed = reportDocumentSchema.safeParse(json.stdout === '' ? null : JSON.parse(json.stdout))
    const text = await runInProcess(['report', '--dir', listenerDir])
    const htmlFile = join(dir, 'report.html')
    await runInProcess(['report', '--dir', listenerDir, '--html', htmlFile])
    const htmlBytes = fs.existsSync(htmlFile) ? fs.statSync(htmlFile).size : 0
    const agentLogs = Array.from({ length: machine.generations }, (_, i) => {
      try {
        return `--- agent ${i + 1}\n${fs.readFileSync(machine.agentLog(i + 1), 'utf8').slice(-1500)}`
      } catch {
        return ''
      }
    }).join('\n')
    return {
      disk,
      file,
      cuts: machine.cuts,
      report: parsed.success ? parsed.data.campaigns.find((c) => c.name === name) : undefined,
      reportText: text.stdout + text.stderr + (parsed.success ? '' : `\nreport --json (exit ${json.code}): ${json.stderr}`),
      htmlBytes,
      listenerOutput: listeners.map((l) => l.output()),
      killedAt,
      lastAgentDone,
      agentLogs,
    }
  } finally {
    for (const listener of listeners) {
      if (listener.child.exitCode === null && listener.child.signalCode === null) listener.child.kill('SIGTERM')
      await listener.exited
    }
    await machine.close()
  }
}

const reason = labUnavailableReason()
if (reason !== null) {
  t.fail(
    `the power-cut lab cannot run here: ${reason}\nhint: run the suite as root on Linux with /dev/fuse and nbdkit, libnbd-bin, e2fsprogs (.ci/run installs them)`,
  )
} else {
  const seed = labSeed()
  t.comment(`lab seed ${seed} (replay the cut moments with PLUGCHECK_LAB_SEED=${seed})`)
  const outsideDir = fs.mkdtempSync(join(tmpdir(), 'plugcheck-lab-campaign-'))
  t.teardown(() => fs.rmSync(outsideDir, { recursive: true, force: true }))

  const disks: DiskMode[] = ['honest', 'lying', 'subtle']
  const results = await Promise.all(disks.map((disk) => runCampaign(disk, outsideDir, seed, disk === 'honest' ? 2 : null)))

  for (const result of results) {
    const { disk, file, report } = result
    t.test(`${disk} disk: a ${cycles}-cycle campaign`, async (t) => {
      const diagnostics = `listener:\n${result.listenerOutput.join('\n=== restarted\n').slice(-4000)}\n${result.agentLogs}`
      t.ok(file !== null && file.phase === 'done', `the campaign is done (${file?.phase} ${file?.detail ?? ''})`, { diagnostics })
      if (file === null) return
      // A listener killed while the cut command ran never learns its exit code (and never runs it again).
      const killedWhileCutting = result.killedAt?.phase === 'cutting' ? result.killedAt.cycle : null
      t.same(
        file.history.map((c) => [c.cycle, c.outcome, c.cycle === killedWhileCutting ? 'unknown' : c.cutExitCode]),
        [1, 2, 3].map((cycle) => [cycle, 'verdict', cycle === killedWhileCutting ? 'unknown' : 0]),
        'every cycle was cut and came back with its verdicts',
      )
      t.equal(result.cuts, cycles, 'the cut command cut the disk once per cycle, never twice')
      const runIds = file.history.flatMap((c) => c.runIds)
      t.equal(runIds.length, cycles * 2, 'two runs per cycle (fdatasync and the none control)')
      t.equal(new Set(runIds).size, runIds.length, 'no run is counted in two cycles')
      t.ok(result.lastAgentDone, 'the last agent found the campaign done and exited')
      // Each cut froze a writer whose connection stayed open; the listener ended its run when the machine
      // came back under a new boot id. (The listener killed in cycle 2 lost that connection with itself.)
      const rebootEnds =
        result.listenerOutput.join('\n').match(/ended as vanished: its writer's machine rebooted: \S+ connected from 127\.0\.0\.1/g)
          ?.length ?? 0
      t.equal(
        rebootEnds,
        result.killedAt === null ? cycles : cycles - 1,
        "every frozen writer's run ended when its machine came back with a new boot id",
      )

      t.ok(report !== undefined, `report --json parsed: ${result.reportText.slice(-2000)}`)
      if (report === undefined) return
      t.comment(`report:\n${result.reportText}`)
      t.equal(report.cycles.length, cycles, 'the report shows every cycle')
      t.ok(result.htmlBytes > 0, `report --html wrote the file (${result.htmlBytes} bytes)`)
      for (const cycle of report.cycles) {
        const tested = cycle.runs.find((r) => r.method === 'fdatasync')
        const control = cycle.runs.find((r) => r.method === 'none')
        const v = tested?.verdict
        t.ok(v != null && control?.verdict != null, `cycle ${cycle.cycle}: both runs have a verdict`)
        if (v == null || control?.verdict == null) continue
        const failed = v.lost + v.torn + v.corrupt
        t.comment(
          `cycle ${cycle.cycle}: fdatasync ${v.verdict}, acked ${v.acked}, lost/torn/corrupt ${failed}; control ${cycle.control}, acked ${control.verdict.acked}, lost ${control.verdict.lost}`,
        )
        t.ok(
          control.verdict.lost + control.verdict.torn + control.verdict.corrupt > 0,
          `cycle ${cycle.cycle}: the none control lost records`,
        )
        if (disk === 'honest') {
          t.equal(v.verdict, 'pass', `cycle ${cycle.cycle}: fdatasync passes on the honest disk`)
          t.equal(cycle.control, 'noticed', `cycle ${cycle.cycle}: the control noticed the cut`)
        } else if (disk === 'lying') {
          t.equal(v.verdict, 'fail', `cycle ${cycle.cycle}: fdatasync fails on the lying disk`)
        } else {
          // The control may lose its file's creation there too (then its sight is 'failed'): losses either way.
          t.ok(failed < v.acked, `cycle ${cycle.cycle}: the subtle disk's losses are partial`)
        }
      }
      const summary = report.methods.find((m) => m.method === 'fdatasync')
      t.ok(summary !== undefined, 'a summary for fdatasync')
      if (summary !== undefined) {
        t.equal(summary.cycles, cycles, 'fdatasync judged in every cycle')
        if (disk === 'honest') t.same([summary.verdicts.pass, summary.cyclesWithLoss], [cycles, 0], 'honest: pass, no loss')
        else t.ok(summary.verdicts.fail > 0 && summary.cyclesWithLoss > 0, `${disk}: fail (${summary.verdicts.fail} of ${cycles} cycles)`)
        if (disk === 'subtle')
          t.ok(summary.lost > 0 && summary.lost < summary.acked, `subtle: 0 < lost ${summary.lost} < acked ${summary.acked}`)
      }
      t.equal(report.control?.ran, cycles, 'the control ran every cycle')

      if (disk === 'honest') {
        t.ok(
          result.killedAt?.cycle === 2 && result.killedAt.phase === 'cutting',
          `the listener was killed in cycle 2 while cutting (${result.killedAt?.phase})`,
        )
        t.equal(result.listenerOutput.length, 2, 'the listener was started again')
        t.match(result.listenerOutput[1] ?? '', /resumed in cycle 2 of 3/, 'the restarted listener resumed the campaign in cycle 2')
      }
    })
  }
}
