/**
 * `write --pattern files --force` on a directory with no files superblock used to delete every file
 * under a record name (rec-5, .rec-7.tmp) before its run: a user's own file so named was destroyed.
 * A record name alone does not show plugcheck made the file: without a files superblock, each must
 * hold what plugcheck writes there (a record's stamp, zeros, nothing), or the directory is refused
 * (exit 2) with nothing touched.
 */
import t from 'tap'
import { readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, startListener, tempDir, type ListenerChild } from '../fixtures/cli.js'

let listener: ListenerChild
t.before(async () => {
  listener = await startListener(tempDir(t, 'plugcheck-files-force-listener-'))
})
t.teardown(() => listener.kill())

const write = (dir: string, extra: readonly string[] = []) =>
  runCli(['write', '--server', listener.server, '--file', dir, '--pattern', 'files', '--keep-files', '4', '--duration', '0.3', ...extra])

t.test("a user's file named rec-5, and one named .rec-7.tmp, survive --force: exit 2, nothing touched", async (t) => {
  for (const name of ['rec-5', '.rec-7.tmp']) {
    const dir = join(tempDir(t), 'mine')
    const made = await write(dir)
    t.equal(made.code, 0, made.stderr)
    rmSync(join(dir, 'superblock')) // no superblock: nothing shows the directory is plugcheck's
    writeFileSync(join(dir, name), 'my notes, not a record\n')
    const before = readdirSync(dir).sort()
    const result = await write(dir, ['--force'])
    t.equal(result.code, 2, `${name}: refused`)
    t.match(result.stderr, new RegExp(`"${name.replace(/\./g, '\\.')}" does not hold a plugcheck record`))
    t.equal(readFileSync(join(dir, name), 'utf8'), 'my notes, not a record\n', `${name}: the user's file untouched`)
    t.same(readdirSync(dir).sort(), before, 'nothing deleted')
  }
})

t.test("--force still reuses a directory of plugcheck's records whose superblock is gone or damaged", async (t) => {
  const dir = join(tempDir(t), 'run')
  const made = await write(dir)
  t.equal(made.code, 0, made.stderr)
  const names = readdirSync(dir).filter((n) => n.startsWith('rec-'))
  t.ok(names.length > 0)
  truncateSync(join(dir, names[0]!), 0) // what a cut leaves: empty
  if (names.length > 1) writeFileSync(join(dir, names[1]!), Buffer.alloc(8192)) // and zeros
  writeFileSync(join(dir, 'superblock'), Buffer.alloc(4096)) // damaged
  const refused = await write(dir)
  t.equal(refused.code, 2, 'without --force: refused')
  const reused = await write(dir, ['--force'])
  t.equal(reused.code, 0, reused.stderr)
  t.equal(readFileSync(join(dir, 'superblock')).subarray(0, 7).toString(), 'PLUGCHK', 'a new superblock in place')
})
