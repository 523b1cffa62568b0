/**
 * A careless operator's --html: a path that holds the listener's own state, or a FIFO. The report
 * "only reads the directory" (README) and must not hang.
 */
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, runInProcess } from '../../fixtures/cli.js'
import { craftListenerDir, threeCycles } from '../../fixtures/report.js'

t.test("--html naming the campaign file itself does not overwrite the listener's state", async (t) => {
  const dir = t.testdir()
  await craftListenerDir(dir, [threeCycles])
  const stateFile = join(dir, 'campaigns', 'ssd-a.json')
  const before = readFileSync(stateFile, 'utf8')
  // One slip of tab completion: the campaign's own state file as the HTML output.
  const result = await runInProcess(['report', '--dir', dir, '--html', stateFile])
  t.equal(readFileSync(stateFile, 'utf8'), before, 'the campaign file is untouched')
  t.not(result.code, 0, 'the report refuses to write over a file that is not a report of its own')
  // The listener can no longer resume the campaign from it, and the next report is "damaged".
  const again = await runInProcess(['report', '--dir', dir])
  t.equal(again.code, 0, 'the directory still reports afterwards')
})

t.test('--html over an existing file that is not a plugcheck report is refused', async (t) => {
  const dir = t.testdir()
  await craftListenerDir(dir, [threeCycles])
  const notes = join(t.testdirName, 'notes.txt')
  writeFileSync(notes, 'my lab notes: 3 weeks of measurements\n')
  const result = await runInProcess(['report', '--dir', dir, '--html', notes])
  t.equal(readFileSync(notes, 'utf8'), 'my lab notes: 3 weeks of measurements\n', "the user's file is untouched")
  t.equal(result.code, 2, 'refused like write refuses a foreign file (exit 2)')
})

t.test('--html to a FIFO does not hang the report', async (t) => {
  const dir = t.testdir()
  await craftListenerDir(dir, [threeCycles])
  const fifo = join(t.testdirName, 'out.html')
  execFileSync('mkfifo', [fifo])
  const started = Date.now()
  // A report that hangs on the FIFO is killed at 60 s; one that ends on its own does so well within 45 s,
  // however long a loaded machine takes to start it.
  const result = await runCli(['report', '--dir', dir, '--html', fifo], 60_000)
  t.ok(Date.now() - started < 45_000, `the report ends on its own (took ${Date.now() - started} ms)`)
  t.not(result.code, -1, "not killed by the test's time-out")
  t.equal(result.code, 3, 'a FIFO is not a file to write a report to: exit 3 naming it')
})
