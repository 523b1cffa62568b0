/**
 * `plugcheck demo` (src/cli/demo.ts) run for real, in this process (its listener) with its writer a
 * child: its closing explanation names the method it ran, and for the control (none), whose verdict
 * is INCONCLUSIVE after a mere kill, says why instead of claiming what a synced method acknowledged.
 */
import t from 'tap'
import { runInProcess } from '../../fixtures/cli.js'

t.test('demo --method none: inconclusive (exit 4), explained as the control, no claim of synced records', async (t) => {
  const result = await runInProcess(['demo', '--method', 'none', '--kill-after', '0.5'])
  t.equal(result.code, 4, result.stderr)
  t.match(result.stdout, /^INCONCLUSIVE: .*control \(none\)/)
  const meaning = result.stdout.slice(result.stdout.indexOf('What this means: '))
  t.match(meaning, /^What this means: none is the negative control: it syncs nothing/)
  t.match(meaning, /verify says INCONCLUSIVE \(exit 4\): a control shows a cut was real only by losing records/)
  t.match(meaning, /--method fdatasync,none/)
  t.notMatch(result.stdout, /reported as synced|what fdatasync acknowledged/, 'nothing said of syncs the control never made')
})

t.test('demo --method fsync: the explanation names fsync, not fdatasync', async (t) => {
  const result = await runInProcess(['demo', '--method', 'fsync', '--kill-after', '0.5'])
  t.equal(result.code, 0, result.stderr)
  t.match(result.stdout, /^PASS: /)
  t.match(
    result.stdout,
    /\nWhat this means: the writer was killed in the middle of its run, yet every record it had reported as synced \(fsync returned\) is on disk/,
  )
  t.match(result.stdout, /keep what fsync acknowledged: run `plugcheck listen`/)
  t.notMatch(result.stdout, /fdatasync/)
})

t.test('demo --json: the explanation is left out, the document alone on stdout', async (t) => {
  const result = await runInProcess(['demo', '--method', 'none', '--kill-after', '0.5', '--json'])
  t.equal(result.code, 4, result.stderr)
  t.equal(JSON.parse(result.stdout).verdict, 'inconclusive')
  t.notMatch(result.stdout, /What this means/)
})
