/**
 * Evidence (issue class 11) does not depend on how the path is spelled: a run written to
 * DIR/data.plugcheck vanished and was never verified; a `write` to the same file through a symlinked
 * directory (LINK/data.plugcheck, as /mnt/test and /media/test often are) replaces that run's file
 * just the same, so it must be refused (exit 2) as a write to DIR/data.plugcheck is. The file itself
 * says which run it holds (its superblock), and the listener holds the run's real path.
 */
import t from 'tap'
import { mkdirSync, symlinkSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, startListener, tempDir, writeThenKill } from '../fixtures/cli.js'

t.test('a write through a symlinked directory does not destroy an unverified run', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  mkdirSync(join(dir, 'mnt'))
  symlinkSync(join(dir, 'mnt'), join(dir, 'link'))
  const file = join(dir, 'mnt', 'data.plugcheck')
  await writeThenKill(listener.server, file, ['--size', '8MiB'], 200, join(dir, 'trace')) // vanished: the power went

  const direct = await runCli(['write', '--server', listener.server, '--file', file, '--size', '8MiB', '--duration', '1'])
  t.equal(direct.code, 2, 'the same spelling is refused')
  const viaLink = await runCli([
    'write',
    '--server',
    listener.server,
    '--file',
    join(dir, 'link', 'data.plugcheck'),
    '--size',
    '8MiB',
    '--duration',
    '1',
  ])
  t.equal(viaLink.code, 2, `another spelling of the same file is refused too (stderr: ${viaLink.stderr.trim()})`)
  t.match(viaLink.stderr, /never verified/)

  const verify = await runCli(['verify', '--server', listener.server, '--file', file])
  t.notMatch(verify.stdout + verify.stderr, /replaced, not judged/, 'the vanished run was not replaced')
  t.ok(
    verify.code === 0 || verify.code === 4,
    `and can still be judged (exit ${verify.code}: ${verify.stdout.trim()} ${verify.stderr.trim()})`,
  )
})
