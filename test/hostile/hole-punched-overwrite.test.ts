/**
 * Another program punches a hole (fallocate -p) into the data file of a live `--pattern overwrite`
 * writer. A hole where records were written is evidence of another program, not of the storage: the
 * file was preallocated whole, so its allocation dropping is a punched hole. The writer must end the
 * run as `file-changed` (exit 3, naming the hole) and verify must judge nothing (exit 2), never call
 * the acknowledged records the hole swallowed lost by the storage (FAIL).
 */
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { runCli, spawnCli, startListener, tempDir, waitFor } from '../fixtures/cli.js'

t.test('a hole punched into a live overwrite run is blamed on the other program, not the storage', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'p.dat')
  const writer = spawnCli([
    'write',
    '--server',
    listener.server,
    '--file',
    file,
    '--method',
    'fdatasync',
    '--pattern',
    'overwrite',
    '--size',
    '64MiB',
    '--duration',
    '8',
  ])
  let stderr = ''
  writer.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
  const exited = new Promise<number>((resolve) => writer.on('close', (c) => resolve(c ?? -1)))
  t.teardown(() => void writer.kill('SIGKILL'))
  await waitFor('the writer to be steady', () => listener.stderr().includes('is steady'), 30_000)
  execFileSync('fallocate', ['--punch-hole', '--offset', String(10 * 1024 * 1024), '--length', String(4 * 1024 * 1024), file])
  const code = await exited
  t.equal(code, 3, `the writer sees the hole and blames another program (stderr: ${stderr})`)
  t.match(stderr, /hole/)

  const verify = await runCli(['verify', '--server', listener.server, '--file', file])
  t.notMatch(verify.stdout, /^FAIL/m, 'the storage is not blamed for the hole')
  t.equal(verify.code, 2, `not judged: the file was changed by another program (stdout: ${verify.stdout}, stderr: ${verify.stderr})`)
})
