/**
 * --listener-timeout 0.0001 (or 0.0004, 100us as seconds) passes the "must be positive" check, then is
 * rounded to whole milliseconds: 0 ms. A live listener on loopback is then reported as not answering
 * "within 0 s" (exit 3, a runtime failure, with a hint that blames the program on the port), although
 * nothing failed but the flag. Must: a value that rounds to no wait at all is refused like a
 * non-positive one (exit 2, naming --listener-timeout), before the listener is asked.
 */
import t from 'tap'
import { join } from 'node:path'
import { runCli, startListener, tempDir } from '../fixtures/cli.js'

t.test('--listener-timeout below a millisecond', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'acks'))
  t.teardown(() => listener.kill())
  const ok = await runCli(['runs', '--server', listener.server, '--listener-timeout', '5'])
  t.equal(ok.code, 0, 'the listener answers')
  for (const value of ['0.0001', '0.0004s']) {
    const r = await runCli(['runs', '--server', listener.server, '--listener-timeout', value])
    t.equal(r.code, 2, `--listener-timeout ${value}: a usage error (${r.stderr.trim()})`)
    t.match(r.stderr, /--listener-timeout/)
    t.notMatch(r.stderr, /did not answer within 0 s/)
  }
})
