/**
 * agent --print-service systemd with a data file whose name (not its directory) holds a carriage
 * return. systemd reads \r as a line end in a unit file, so a bare \r inside ExecStart's quoted --file
 * splits the line: the ExecStart is cut at an open quote (systemd: "Unbalanced quoting", a fatal error,
 * the agent never starts at boot) and the rest of the name becomes a line of its own, a directive the
 * path chose. The unit must either be refused (exit 2, as a control character in the directory is) or
 * name the file with an escape systemd reads back (\r): every line of the printed unit is one the
 * printer meant, and systemd-analyze verify takes it without a complaint about its lines.
 *
 * The same for the commonest way a \r gets there: a shell script saved with CRLF line ends passes its
 * last argument with a \r at its end (`--method fsync\r`). The agent's flag checks take the value
 * (trailing white space allowed) and the unit's ExecStart ends in a bare \r inside quotes: systemd
 * refuses the line, and the agent never starts at boot while --print-service said nothing (exit 0).
 */
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, tempDir } from '../fixtures/cli.js'

t.test('a \\r in the data file name never splits a line of the systemd unit', async (t) => {
  const dir = tempDir(t)
  const data = join(dir, 'data')
  mkdirSync(data)
  const file = join(data, 'x\rUser=nobody\r#')
  const r = await runCli(['agent', '--print-service', 'systemd', '--server', '127.0.0.1:7', '--file', file])
  t.not(r.code, 1)
  t.not(r.code, 3)
  if (r.code === 2) {
    t.match(r.stderr, /control character|cannot name/)
    t.equal(r.stdout, '', 'nothing printed for a unit that cannot be written')
    return
  }
  t.equal(r.code, 0)
  // systemd's config reader ends a line at \n, \r or \r\n.
  t.notOk(r.stdout.includes('\r'), 'no bare carriage return in the unit (systemd ends a line there)')
  const lines = r.stdout.split(/\r\n|\r|\n/)
  const injected = lines.filter((l) => /^User=/.test(l))
  t.same(injected, [], 'no directive comes from the file name')
  const execStart = lines.filter((l) => l.startsWith('ExecStart='))
  t.equal(execStart.length, 1)
  t.match(execStart[0], /x\\(r|x0[dD]|015)User=nobody/, 'the name with its \\r written as an escape')
  const unit = join(dir, 'plugcheck-agent.service')
  writeFileSync(unit, r.stdout)
  let analyze = ''
  try {
    execFileSync('systemd-analyze', ['verify', unit], { stdio: ['ignore', 'pipe', 'pipe'] })
  } catch (error) {
    analyze = String((error as { stderr?: Buffer }).stderr ?? '')
  }
  t.notMatch(analyze, /Unbalanced quoting|fatal error|bad unit file setting/, 'systemd takes the unit')
})

t.test('a CRLF script: the last argument ends in \\r', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'data.dat')
  const r = await runCli(['agent', '--print-service', 'systemd', '--server', '127.0.0.1:7', '--file', file, '--method', 'fsync\r'])
  t.not(r.code, 1)
  t.not(r.code, 3)
  if (r.code === 2) {
    t.equal(r.stdout, '', 'nothing printed for a unit that cannot be written')
    return
  }
  t.equal(r.code, 0)
  t.notOk(r.stdout.includes('\r'), 'no bare carriage return in the unit')
  const unit = join(dir, 'plugcheck-agent.service')
  writeFileSync(unit, r.stdout)
  let analyze = ''
  try {
    execFileSync('systemd-analyze', ['verify', unit], { stdio: ['ignore', 'pipe', 'pipe'] })
  } catch (error) {
    analyze = String((error as { stderr?: Buffer }).stderr ?? '')
  }
  t.notMatch(analyze, /Unbalanced quoting|fatal error|bad unit file setting/, 'systemd takes the unit')
})
