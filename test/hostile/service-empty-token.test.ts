/**
 * agent --print-service systemd --token "$TOKEN" with TOKEN unset (or --token=): the empty token is
 * taken, the unit loads /etc/plugcheck/agent.token as its credential and the commands on stderr write
 * an empty line into it (printf '%s\n' '' > ...). The agent the unit starts reads that file with
 * --token-file, which refuses an empty token file (exit 2): the agent fails at every boot, though
 * --print-service said nothing was wrong (exit 0). README: a flag that takes a value and is given none
 * is refused. Must: --print-service refuses the empty token (exit 2, naming --token), printing no unit.
 */
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { runCli, tempDir } from '../fixtures/cli.js'

t.test('an empty --token never becomes a unit whose agent cannot start', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'data.dat')
  for (const tokenArgs of [['--token', ''], ['--token=']]) {
    const r = await runCli(['agent', '--print-service', 'systemd', '--server', '127.0.0.1:7', '--file', file, ...tokenArgs])
    t.equal(r.code, 2, `${tokenArgs.join(' ')}: refused`)
    t.match(r.stderr, /--token/)
    t.equal(r.stdout, '', 'no unit printed')
  }
  // What the printed commands would leave, read as the unit's agent reads its credential: refused.
  const tokenFile = join(dir, 'agent.token')
  execFileSync('sh', ['-c', `printf '%s\\n' '' > '${tokenFile}'`])
  const agent = await runCli(['agent', '--server', '127.0.0.1:7', '--file', file, '--token-file', tokenFile])
  t.equal(agent.code, 2, 'the agent refuses the empty token file such a unit gives it')
  t.match(agent.stderr, /empty/)
})
