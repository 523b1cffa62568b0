/**
 * `runs --prune --dir FILE` (a file, not a directory): a usage error (exit 2) naming the path, as
 * `listen --dir FILE` names it. Today: "plugcheck: internal error: Error: ENOTDIR: not a directory,
 * mkdir '.../runs'" with a stack trace, exit 3.
 */
import t from 'tap'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, tempDir } from '../fixtures/cli.js'

t.test('runs --prune --dir naming a file: exit 2, a plain message, no stack trace, the file untouched', async (t) => {
  const base = tempDir(t)
  const file = join(base, 'acks.tar')
  writeFileSync(file, 'an archive')
  const r = await runCli(['runs', '--prune', '--older-than', '1d', '--dir', file])
  t.equal(r.code, 2, `exit 2 (got ${r.code}: ${r.stderr})`)
  t.notMatch(r.stderr, /internal error/, 'not reported as an internal error')
  t.notMatch(r.stderr, /\n\s+at /, 'no stack trace')
  t.match(r.stderr, file, 'the message names the path')
  t.equal(readFileSync(file, 'utf8'), 'an archive')
})
