/**
 * An agent that verified the last cycle and found a loss (verify's exit 1: FAIL), reported it, then
 * wrote the next cycle, whose cut command failed: the campaign stops and the agent's writer is told to
 * stop. The agent must still exit 1: it found a loss in this invocation, and exit 3 ("the campaign
 * stopped") hides it from whatever watches the service's exit status.
 *
 * The first cut is simulated on this one machine: the cut command SIGKILLs the agent (its writer dies
 * mid-write, as at a power cut) and truncates the fdatasync file (acknowledged records gone); it exits
 * 0. The second cut command exits 1.
 */
import t from 'tap'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { ChildProcess } from 'node:child_process'
import { exitedWithOutput, spawnCli, startListener, tempDir } from '../fixtures/cli.js'

function spawnAgent(args: readonly string[]): { process: ChildProcess; out: () => string; exited: Promise<number | null> } {
  const child = spawnCli(args)
  let out = ''
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()))
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()))
  // Once its last lines are read: the tests match them after.
  const exited = exitedWithOutput(child).then(({ code }) => code)
  return { process: child, out: () => out, exited }
}

t.test('a loss found by the agent is its exit code even when the next cycle stops on a failed cut', async (t) => {
  const dir = tempDir(t)
  const data = join(dir, 'd.dat')
  const pidFile = join(dir, 'agent.pid')
  const script = join(dir, 'cut.sh')
  writeFileSync(
    script,
    [
      `if [ ! -e '${dir}/cut1' ]; then`,
      `  touch '${dir}/cut1'`,
      `  kill -9 "$(cat '${pidFile}')"`,
      `  truncate -s 16384 '${data}.fdatasync'`,
      '  exit 0',
      'fi',
      'exit 1',
      '',
    ].join('\n'),
  )
  const listener = await startListener(join(dir, 'listener'), [
    '--campaign',
    'lo',
    '--cycles',
    '3',
    '--cut-command',
    `sh '${script}'`,
    '--cut-after',
    '0',
    '--reboot-timeout',
    '60',
    '--seed',
    '7',
  ])
  t.teardown(() => listener.kill())
  const agentArgs = ['agent', '--server', listener.server, '--file', data, '--method', 'fdatasync,none', '--size', '16MiB']

  const first = spawnAgent(agentArgs)
  t.teardown(() => first.process.kill('SIGKILL'))
  writeFileSync(pidFile, String(first.process.pid))
  const bound1 = setTimeout(() => first.process.kill('SIGKILL'), 30_000)
  t.equal(await first.exited, null, 'the first agent died at the simulated cut')
  clearTimeout(bound1)

  const second = spawnAgent(agentArgs)
  t.teardown(() => second.process.kill('SIGKILL'))
  writeFileSync(pidFile, String(second.process.pid))
  const bound2 = setTimeout(() => second.process.kill('SIGKILL'), 40_000)
  const code = await second.exited
  clearTimeout(bound2)
  t.match(second.out(), /^FAIL: fdatasync lost acknowledged data/m, 'the agent found the loss of cycle 1')
  t.match(second.out(), /campaign lo stopped \(cycle 2: the cut command exited 1\)/, 'then cycle 2 stopped on the failed cut')
  t.equal(code, 1, `the agent exits 1: it found a loss (output:\n${second.out()})`)
})
