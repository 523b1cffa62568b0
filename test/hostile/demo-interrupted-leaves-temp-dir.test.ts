/**
 * `plugcheck demo` makes a temp directory (plugcheck-demo-XXXXXX: the listener's directory and a 64 MiB
 * data file) and removes it in a finally. Stopped while it waits to kill its writer (Ctrl-C, or a
 * SIGTERM from a supervisor: --kill-after 30 leaves half a minute to do so), Node's default signal
 * action ends the process at once: the finally never runs and ~70 MiB stay in $TMPDIR, one more for
 * each demo stopped. A demo stopped by a signal must still remove what it made.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { existsSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { binPath, tempDir, waitFor } from '../fixtures/cli.js'

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  t.test(`demo stopped by ${signal} while it waits for the kill: its temp directory is removed`, async (t) => {
    const tmp = tempDir(t)
    const demo = spawn(process.execPath, [binPath, 'demo', '--kill-after', '30'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, TMPDIR: tmp },
    })
    let stderr = ''
    demo.stderr.on('data', (c: Buffer) => (stderr += c.toString()))
    demo.stdout.resume()
    const exited = new Promise<number | null>((resolve) =>
      demo.on('close', (code, sig) => resolve(code ?? (sig === 'SIGINT' ? 130 : sig === 'SIGTERM' ? 143 : -1))),
    )
    t.teardown(() => demo.kill('SIGKILL'))
    await waitFor(`the demo starts its writer (${stderr})`, () => /writer on .*plugcheck-demo-/.test(stderr), 30_000)
    const demoDir = readdirSync(tmp).find((name) => name.startsWith('plugcheck-demo-'))
    t.ok(demoDir, 'the demo made its directory in TMPDIR')
    // Its writer has written records: the 64 MiB file is there.
    await waitFor('the data file', () => existsSync(join(tmp, demoDir ?? '', 'data.plugcheck')), 30_000)
    await new Promise((resolve) => setTimeout(resolve, 2000))
    demo.kill(signal)
    const code = await exited
    // Exit 128 + the signal, or ended by the signal itself (a shell reports both the same).
    t.equal(code, signal === 'SIGINT' ? 130 : 143, `exit 128 + the signal (${stderr.trim()})`)
    t.same(
      readdirSync(tmp).filter((name) => name.startsWith('plugcheck-demo-')),
      [],
      'no plugcheck-demo- directory left in TMPDIR',
    )
  })
}
