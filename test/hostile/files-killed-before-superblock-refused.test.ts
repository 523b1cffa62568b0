/**
 * A write stopped (SIGKILL, a power cut) while it made a new files directory leaves the directory
 * holding only the superblock's temporary name (.superblock.plugcheck-<runId>.tmp: mkdir, then the
 * superblock made under that name, fsynced, renamed). The next write on the path was refused, "it
 * holds record files but no superblock", and asked for --force: no record file is there, and that
 * name is plugcheck's alone. It is reused as an empty directory; a record name beside it still is not.
 */
import t from 'tap'
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, startListener, tempDir, type ListenerChild } from '../fixtures/cli.js'

let listener: ListenerChild
t.before(async () => {
  listener = await startListener(tempDir(t, 'plugcheck-files-sbtmp-listener-'))
})
t.teardown(() => listener.kill())

const write = (dir: string) =>
  runCli(['write', '--server', listener.server, '--file', dir, '--pattern', 'files', '--keep-files', '4', '--duration', '0.3'])
const leftover = '.superblock.plugcheck-0123456789abcdef.tmp'

t.test('only a superblock temporary name left: reused without --force, the name gone', async (t) => {
  const dir = join(tempDir(t), 'run')
  mkdirSync(dir)
  writeFileSync(join(dir, leftover), Buffer.alloc(8192))
  const result = await write(dir)
  t.equal(result.code, 0, result.stderr)
  t.notOk(readdirSync(dir).includes(leftover), 'the leftover name deleted')
  t.ok(readdirSync(dir).includes('superblock'))
})

t.test('a record name beside it: still refused, nothing touched', async (t) => {
  const dir = join(tempDir(t), 'run')
  mkdirSync(dir)
  writeFileSync(join(dir, leftover), Buffer.alloc(8192))
  writeFileSync(join(dir, 'rec-1'), 'one')
  const result = await write(dir)
  t.equal(result.code, 2)
  t.match(result.stderr, /holds record files but no superblock/)
  t.same(readdirSync(dir).sort(), [leftover, 'rec-1'].sort())
})
