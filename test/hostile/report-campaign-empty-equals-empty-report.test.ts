/**
 * `plugcheck report --dir D --campaign="$NAME"` with NAME unset, i.e. `--campaign=` as the last
 * argument: report exits 0 and prints only its heading, no campaign and no runs outside campaigns
 * (--campaign given hides them), nothing said. `--campaign ''` and `--campaign= --json` are refused
 * (exit 2, "a campaign name is 1-64 letters ..."). README (flags): "A flag that takes a value and is
 * given none is refused too ... never run with its default". Must: exit 2, naming --campaign.
 */
import t from 'tap'
import { join } from 'node:path'
import { runCli, startListener, tempDir, writeThenKill } from '../fixtures/cli.js'

t.test('report --campaign= (an empty value) is refused, not an empty report with exit 0', async (t) => {
  const dir = tempDir(t)
  const store = join(dir, 'ld')
  const listener = await startListener(store)
  t.teardown(() => listener.kill())
  await writeThenKill(listener.server, join(dir, 'p.dat'), ['--method', 'fdatasync', '--duration', '60'], 20)
  for (const args of [['--campaign='], ['--html', join(dir, 'r.html'), '--campaign=']]) {
    const r = await runCli(['report', '--dir', store, ...args])
    t.equal(r.code, 2, `report ${args.join(' ')}: exit 2 (stdout: ${JSON.stringify(r.stdout)})`)
    t.match(r.stderr, /--campaign/, `report ${args.join(' ')}: the message names --campaign`)
  }
})
