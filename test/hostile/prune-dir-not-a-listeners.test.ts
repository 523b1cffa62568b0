/**
 * `runs --prune --dir DIR` where DIR is not a listener's directory (a typo, a path that does not
 * exist, an unrelated directory): the operator must be told so (exit 2), and nothing may be created
 * there. Today it creates lock, journal/ and runs/ in it and says "pruned 0 runs ... 0 bytes" with
 * exit 0, as if the directory held nothing old enough: the operator believes the prune ran.
 */
import t from 'tap'
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, tempDir } from '../fixtures/cli.js'

t.test('runs --prune on a directory that does not exist: exit 2 naming it, nothing created', async (t) => {
  const base = tempDir(t)
  const typo = join(base, 'plugchek-data')
  const r = await runCli(['runs', '--prune', '--older-than', '30d', '--dir', typo])
  t.equal(r.code, 2, `exit 2 (got ${r.code}: ${r.stdout}${r.stderr})`)
  t.match(r.stderr, typo, 'the message names the directory')
  t.notMatch(r.stdout, /pruned 0 runs/, 'no report of a prune that did not look at any listener directory')
  t.notOk(existsSync(typo), 'the directory is not created')
})

t.test("runs --prune on a directory that is not a listener's: exit 2, nothing created in it", async (t) => {
  const base = tempDir(t)
  const other = join(base, 'photos')
  mkdirSync(other)
  writeFileSync(join(other, 'holiday.jpg'), 'not a listener file')
  const r = await runCli(['runs', '--prune', '--older-than', '30d', '--dir', other])
  t.equal(r.code, 2, `exit 2 (got ${r.code}: ${r.stdout}${r.stderr})`)
  t.match(r.stderr, other, 'the message names the directory')
  t.same(readdirSync(other), ['holiday.jpg'], 'no lock, journal/ or runs/ left in it')
})
