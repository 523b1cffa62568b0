/**
 * Hostile review of the platform change, Linux side: what an operator pastes back must mean what
 * write meant. Each test asserts the correct behaviour and fails while the defect is there.
 */
import t from 'tap'
import { spawnSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, startListener, tempDir } from '../fixtures/cli.js'

t.test('the verify command printed for an IPv6 --server pastes back into a shell unchanged', async (t) => {
  const dir = tempDir(t, 'plugcheck-platform-attack-')
  const listener = await startListener(join(dir, 'acks'))
  t.teardown(() => listener.kill())
  const server = `[::ffff:127.0.0.1]:${listener.port}`
  const file = join(dir, 'data')
  const write = await runCli(['write', '--server', server, '--file', file, '--method', 'fsync', '--duration', '0.3'])
  t.equal(write.code, 0, write.stderr)
  const line = write.stdout.split('\n').find((l) => l.startsWith('after a power cut and reboot: '))
  t.ok(line, 'the verify command is printed')
  const command = line!.slice('after a power cut and reboot: '.length)
  // `[::ffff:127.0.0.1]:PORT` unquoted is a shell glob (a bracket expression followed by ":PORT"):
  // in a folder holding a file named "1:PORT" bash replaces the argument by that name, and zsh (the
  // default shell on macOS) refuses the whole line with "no matches found".
  const cwd = join(dir, 'cwd')
  mkdirSync(cwd)
  writeFileSync(join(cwd, `1:${listener.port}`), '')
  const pasted = spawnSync('bash', ['-c', `set -- ${command.replace(/^plugcheck verify /, '')}; printf '%s\\n' "$@"`], {
    cwd,
    encoding: 'utf8',
  })
  t.equal(pasted.status, 0, pasted.stderr)
  const args = pasted.stdout.split('\n')
  t.equal(args[args.indexOf('--server') + 1], server, `the pasted --server is the one write used (printed: ${command})`)
})
