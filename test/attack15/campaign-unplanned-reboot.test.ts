/**
 * A campaign whose machine reboots on its own before the planned cut (a kernel panic, a watchdog, a
 * power outage in the lab): the writer's connection is left open (frozen), the machine comes back with
 * a new boot id and its agent verifies and reports the old runs' verdicts (the listener ends them as
 * vanished). The agent came back and spoke to the listener; whatever the campaign makes of that cycle,
 * it must not stop as "did-not-come-back" ("the machine under test did not come back: check it"),
 * which is false: the machine is up, and its agent asked for the campaign after the next cut too.
 *
 * The power cut is modelled as in the lab: the agent SIGSTOPped (its connection stays open), the next
 * agent started under a new boot id (unshare -m, a bind-mounted boot_id); once the listener has
 * ended the old boot's runs, the frozen process is killed so its file locks go, as a cut's would.
 */
import t from 'tap'
import { spawn, type ChildProcess } from 'node:child_process'
import { chmodSync, readFileSync, writeFileSync } from 'node:fs'
import { createServer, type AddressInfo } from 'node:net'
import { join } from 'node:path'
import { binPath, sleep, tempDir } from '../fixtures/cli.js'

function script(dir: string, port: number, listenerLog: string): string {
  return `#!/bin/sh
# "cut and reboot": freeze the agent (no FIN), start the next one under a new boot id
old=$(cat ${dir}/agent.pid 2>/dev/null)
[ -n "$old" ] && kill -STOP $old
before=$(grep -c "closed its connection" ${listenerLog})
n=$(ls ${dir}/boot-* 2>/dev/null | wc -l)
cat /proc/sys/kernel/random/uuid > ${dir}/boot-$n
unshare --mount sh -c 'mount --bind "$0" /proc/sys/kernel/random/boot_id && exec "$@"' ${dir}/boot-$n \\
  ${process.execPath} ${binPath} agent --server 127.0.0.1:${port} --token T --file ${dir}/data.plugcheck --size 8MiB --method fdatasync,none \\
  > ${dir}/agent-$n.out 2>&1 &
echo $! > ${dir}/agent.pid
echo $! >> ${dir}/agent.pids
if [ -n "$old" ]; then
  ( i=0; while [ $(grep -c "closed its connection" ${listenerLog}) -le $before ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done; sleep 0.2; kill -9 $old ) &
fi
exit 0
`
}

interface Campaign {
  phase: string
  detail?: string | null
  history: Array<{ cycle: number; outcome: string | null }>
}

t.test('an unplanned reboot before the cut does not stop the campaign as did-not-come-back', async (t) => {
  const dir = tempDir(t)
  const probe = createServer()
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', () => resolve()))
  const port = (probe.address() as AddressInfo).port
  await new Promise((resolve) => probe.close(resolve))
  const listenerLog = join(dir, 'listener.log')
  writeFileSync(listenerLog, '')
  const reboot = join(dir, 'reboot.sh')
  writeFileSync(reboot, script(dir, port, listenerLog))
  chmodSync(reboot, 0o755)
  const listenerDir = join(dir, 'listener')
  const listener = spawn(process.execPath, [binPath, 'listen', '--host', '127.0.0.1', '--port', String(port), '--dir', listenerDir, '--token', 'T',
    '--campaign', 'c', '--cycles', '2', '--cut-command', reboot, '--cut-after', '8-9', '--reboot-timeout', '12', '--seed', '1'], { stdio: ['ignore', 'pipe', 'pipe'] })
  let log = ''
  const append = (c: Buffer): void => {
    log += c.toString()
    writeFileSync(listenerLog, log)
  }
  listener.stdout!.on('data', append)
  listener.stderr!.on('data', append)
  const listenerExited = new Promise<void>((resolve) => listener.on('exit', () => resolve()))
  t.teardown(async () => {
    try {
      for (const pid of readFileSync(join(dir, 'agent.pids'), 'utf8').split('\n').filter(Boolean)) {
        try {
          process.kill(Number(pid), 'SIGKILL')
        } catch {}
      }
    } catch {}
    listener.kill('SIGKILL')
    await listenerExited
  })
  const waitLog = async (re: RegExp, ms: number): Promise<boolean> => {
    const deadline = Date.now() + ms
    while (!re.test(log) && Date.now() < deadline) await sleep(50)
    return re.test(log)
  }
  t.ok(await waitLog(/listening on 127\.0\.0\.1/, 60_000), 'the listener started')
  const boot = (): ChildProcess => spawn('sh', [reboot], { stdio: 'ignore' })
  boot() // the first boot's agent
  t.ok(await waitLog(/cycle 1: the writer is steady/, 60_000), 'cycle 1 is steady')
  await sleep(1000)
  boot() // the machine reboots on its own, before the planned cut
  const campaignFile = join(listenerDir, 'campaigns', 'c.json')
  const deadline = Date.now() + 90_000
  let campaign: Campaign | null = null
  while (Date.now() < deadline) {
    try {
      campaign = JSON.parse(readFileSync(campaignFile, 'utf8')) as Campaign
    } catch {}
    if (campaign !== null && (campaign.phase === 'done' || campaign.phase === 'stopped')) break
    await sleep(200)
  }
  t.ok(campaign !== null && (campaign.phase === 'done' || campaign.phase === 'stopped'), `the campaign ended (${campaign?.phase})`)
  t.notOk(campaign?.history.some((c) => c.outcome === 'did-not-come-back'), `no cycle "did not come back": ${JSON.stringify(campaign?.history.map((c) => [c.cycle, c.outcome]))} ${campaign?.detail ?? ''}`)
  t.notMatch(log, /did not come back/, 'the listener does not say the machine did not come back')
  if (campaign?.phase === 'stopped') t.match(campaign.detail ?? '', /before the cut|rebooted|unplanned/, 'a stop says the machine rebooted before the cut')
})
