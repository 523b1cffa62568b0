/**
 * A write to PATH.fsync (one method), then a write to PATH with --method fsync,fdatasync, whose fsync
 * file is PATH.fsync again. `verify --file PATH.fsync` finds the first write by its path, sees the
 * file holds the second write's run, and says NOT JUDGED: the file holds a run "which this listener
 * does not know on this path (another listener, host name or spelling of the path)", hint "verify the
 * latest run (leave out --run)", though no --run was given and the listener knows that run: it is the
 * fsync file of its latest write to PATH, which the file's superblock names.
 *
 * Not judged is right (exit 2: the run asked for was replaced); the message must name the write the
 * file holds and the command that judges it (plugcheck verify ... --file PATH), as a member file name
 * with no run of its own does, never blame another listener or a --run that was not given.
 */
import t from 'tap'
import { join } from 'node:path'
import { runCli, startListener, tempDir } from '../fixtures/cli.js'

t.test('a member file name that also names an older write', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'acks'))
  t.teardown(() => listener.kill())
  const path = join(dir, 'x')
  const w1 = await runCli([
    'write',
    '--server',
    listener.server,
    '--file',
    `${path}.fsync`,
    '--method',
    'fsync',
    '--size',
    '1MiB',
    '--duration',
    '0.3',
  ])
  t.equal(w1.code, 0, w1.stderr)
  const w2 = await runCli([
    'write',
    '--server',
    listener.server,
    '--file',
    path,
    '--method',
    'fsync,fdatasync',
    '--size',
    '1MiB',
    '--duration',
    '0.3',
  ])
  t.equal(w2.code, 0, w2.stderr)
  const v = await runCli(['verify', '--server', listener.server, '--file', `${path}.fsync`])
  const said = v.stdout + v.stderr
  t.equal(v.code, 2, `not judged: ${said}`)
  t.notMatch(said, /does not know/, 'the listener knows the run the file holds')
  t.notMatch(said, /leave out --run/, 'no --run was given')
  t.match(said, `--file ${path}`, 'names the write the file holds')
  t.notMatch(said, `--file ${path}.fsync`, 'the command named is the write to PATH')
})
