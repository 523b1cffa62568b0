/**
 * `listen --max-runs 100000001` (one over the ceiling the flag accepts, 100,000,000) is refused with
 * "--max-runs must be a whole number": it is one. The operator is not told what is wrong (the value
 * is over the largest accepted) nor what the largest is. Same for --max-runs-per-peer.
 */
import t from 'tap'
import { runInProcess, tempDir } from '../fixtures/cli.js'

t.test('--max-runs and --max-runs-per-peer over their ceiling say so, not "must be a whole number"', async (t) => {
  const dir = tempDir(t)
  for (const flag of ['--max-runs', '--max-runs-per-peer']) {
    const r = await runInProcess(['listen', '--port', '0', '--host', '127.0.0.1', '--dir', dir, flag, '100000001'])
    t.equal(r.code, 2, flag)
    t.notMatch(r.stderr, /must be a whole number/, `${flag} 100000001 is a whole number`)
    t.match(r.stderr, new RegExp(`${flag} .*(at most|100,?000,?000)`), `${flag}: the message names the largest value (${r.stderr.trim()})`)
  }
})
