/**
 * `plugcheck demo` with TMPDIR naming a folder that does not exist (a stale environment, a typo)
 * fails in mkdtempSync and says "plugcheck: internal error: Error: ENOENT ..." with a stack trace,
 * exit 3: the doc's word for a bug (docs/exit-codes.md). write in a folder that does not exist says
 * "the folder ... does not exist" with a hint, exit 2. The demo must say what is wrong in one line
 * naming the folder (a configuration error, exit 2), with no stack.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { binPath, tempDir } from '../fixtures/cli.js'

t.test('demo with TMPDIR a missing folder: a configuration error naming it, no internal error', async (t) => {
  const missing = join(tempDir(t), 'no-such-folder')
  const demo = spawn(process.execPath, [binPath, 'demo', '--kill-after', '1'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, TMPDIR: missing },
  })
  let stderr = ''
  demo.stderr.on('data', (c: Buffer) => (stderr += c.toString()))
  demo.stdout.resume()
  t.teardown(() => demo.kill('SIGKILL'))
  const code = await new Promise<number | null>((resolve) => demo.on('close', (c) => resolve(c)))
  t.notMatch(stderr, /internal error/, `not an internal error (${stderr.trim()})`)
  t.notMatch(stderr, /^\s+at /m, 'no stack trace')
  t.match(stderr, new RegExp(`^plugcheck: .*${missing.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}`, 'm'), 'names the folder')
  t.equal(code, 2, 'exit 2: a configuration error')
})
