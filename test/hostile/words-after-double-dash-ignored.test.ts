/**
 * Everything after `--` is dropped without a word: `plugcheck methods -- junk` exits 0 where
 * `plugcheck methods junk` is refused ("unexpected argument junk (methods takes flags only)", exit 2),
 * and `report --dir D -- --campaign nosuch` prints the whole directory's report with exit 0 where
 * `--campaign nosuch` is refused ("holds no campaign named nosuch", exit 2); `write ... -- --duration 5`
 * runs with the duration given before the `--`. README (flags): each command takes its own flags
 * only, and no command takes a positional argument. Must: the words after `--` are refused as
 * unexpected arguments, exit 2, named.
 */
import t from 'tap'
import { join } from 'node:path'
import { runCli, startListener, tempDir, writeThenKill } from '../fixtures/cli.js'

t.test('words after -- are refused, not dropped', async (t) => {
  const methods = await runCli(['methods', '--', 'junk'])
  t.equal(methods.code, 2, `methods -- junk: exit 2 (stdout starts ${JSON.stringify(methods.stdout.slice(0, 60))})`)
  t.match(methods.stderr, /junk/, 'methods -- junk: names junk')

  const dir = tempDir(t)
  const store = join(dir, 'ld')
  const listener = await startListener(store)
  t.teardown(() => listener.kill())
  await writeThenKill(listener.server, join(dir, 'p.dat'), ['--method', 'fdatasync', '--duration', '60'], 20)
  const report = await runCli(['report', '--dir', store, '--', '--campaign', 'nosuch'])
  t.equal(report.code, 2, `report --dir D -- --campaign nosuch: exit 2 (stdout: ${JSON.stringify(report.stdout.slice(0, 80))})`)
  t.match(report.stderr, /--campaign|nosuch/, 'report: names what it does not take')
})
