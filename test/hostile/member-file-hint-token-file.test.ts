/**
 * verify --file PATH.fsync --token-file F, where PATH.fsync is gone (the cut lost it): the message names
 * the write to PATH and the exact command that judges it. That command says --token 'YOUR-TOKEN', so
 * an operator who keeps the token off the command line (ps, shell history) with --token-file is told
 * to type it there. Must: the command names --token-file with the file given (the same one works),
 * never --token. write's own verify command (printed at start and at the end) says --token 'YOUR-TOKEN'
 * after a write given --token-file too.
 */
import t from 'tap'
import { rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, startListener, tempDir } from '../fixtures/cli.js'

t.test('the command a member file name leads to keeps --token-file', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'acks'), ['--token', 'secret-token'])
  t.teardown(() => listener.kill())
  const tokenFile = join(dir, 'token')
  writeFileSync(tokenFile, 'secret-token\n', { mode: 0o600 })
  const file = join(dir, 'x')
  const w = await runCli([
    'write',
    '--server',
    listener.server,
    '--token-file',
    tokenFile,
    '--file',
    file,
    '--method',
    'fsync,fdatasync',
    '--size',
    '1MiB',
    '--duration',
    '0.5',
  ])
  t.equal(w.code, 0, w.stderr)
  // write's own trail (stdout, at start and at the end) names the verify command the same way.
  t.notMatch(w.stdout, /--token 'YOUR-TOKEN'/, "write's verify command: not told to put the token on the command line")
  t.match(w.stdout, `--token-file ${tokenFile}`, "write's verify command keeps the token file")
  rmSync(`${file}.fsync`)
  const v = await runCli(['verify', '--server', listener.server, '--token-file', tokenFile, '--file', `${file}.fsync`])
  t.equal(v.code, 2)
  t.match(v.stderr, `--file ${file}`, 'the write to PATH is named')
  t.notMatch(v.stderr, /--token 'YOUR-TOKEN'/, 'not told to put the token on the command line')
  t.match(v.stderr, `--token-file ${tokenFile}`, 'the command keeps the token file')
})
