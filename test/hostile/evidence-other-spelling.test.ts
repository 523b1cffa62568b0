/**
 * The evidence of a cut must not be destroyed by naming the same data file another way: a writer
 * SIGKILLed (a power cut) leaves an unverified vanished run; a new `write` on the same file through a
 * symbolic link to its directory (a mount point reached through a link, /data -> /mnt/ssd) is the
 * same file, and must be refused (exit 2) until that run is verified, the file left as it was.
 */
import t from 'tap'
import { readFileSync, symlinkSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, startListener, tempDir, writeThenKill } from '../fixtures/cli.js'

t.test('a write through a symlinked directory does not destroy an unverified run', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  mkdirSync(join(dir, 'mnt'))
  symlinkSync(join(dir, 'mnt'), join(dir, 'data'))
  const file = join(dir, 'mnt', 'p.dat')
  await writeThenKill(listener.server, file, ['--method', 'fdatasync'], 200, join(dir, 'trace'))
  const before = readFileSync(file)

  const same = await runCli(['write', '--server', listener.server, '--file', file, '--method', 'fdatasync', '--duration', '1'])
  t.equal(same.code, 2, 'the same spelling is refused')

  const viaLink = await runCli([
    'write',
    '--server',
    listener.server,
    '--file',
    join(dir, 'data', 'p.dat'),
    '--method',
    'fdatasync',
    '--duration',
    '1',
  ])
  t.equal(viaLink.code, 2, `the same file through a link is refused too (stderr: ${viaLink.stderr})`)
  t.match(viaLink.stderr, /refusing to write/)
  t.ok(readFileSync(file).equals(before), 'the evidence is untouched')
})

t.test('a write to a member file of an unverified multi-method run does not destroy it', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'p.dat')
  await writeThenKill(listener.server, file, ['--method', 'fsync,none'], 200, join(dir, 'trace'))
  const member = `${file}.fsync`
  const before = readFileSync(member)
  // The file holds run X of --file p.dat: writing --file p.dat.fsync replaces it.
  const onMember = await runCli(['write', '--server', listener.server, '--file', member, '--method', 'fdatasync', '--duration', '1'])
  t.equal(onMember.code, 2, `refused: the file holds an unverified run's evidence (stderr: ${onMember.stderr})`)
  t.ok(readFileSync(member).equals(before), 'the evidence is untouched')
})
