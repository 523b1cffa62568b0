/**
 * `plugcheck report --dir D --json > report.json` on a full file system (here stdout is /dev/full,
 * every write ENOSPC): the document is lost and report exits 0, with nothing on stderr. src/bin.ts
 * swallows every stdout error (meant for `write ... | head -1`, where the run is the job and the
 * output a trail), so a command whose output is the product reports success for output never written.
 * README: report's exit 0 is "the report was produced"; 3 is a runtime failure (I/O error). Same for
 * `runs --json`. Must: exit 3, saying on stderr that stdout could not be written.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { openSync, closeSync } from 'node:fs'
import { join } from 'node:path'
import { binPath, startListener, tempDir, writeThenKill } from '../fixtures/cli.js'

function runToDevFull(args: readonly string[]): Promise<{ code: number | null; stderr: string }> {
  const full = openSync('/dev/full', 'w')
  const child = spawn(process.execPath, [binPath, ...args], { stdio: ['ignore', full, 'pipe'] })
  closeSync(full)
  let stderr = ''
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000)
  return new Promise((resolve) =>
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stderr })
    }),
  )
}

t.test('report and runs whose stdout cannot be written exit 3, not 0', async (t) => {
  const dir = tempDir(t)
  const store = join(dir, 'ld')
  const listener = await startListener(store)
  t.teardown(() => listener.kill())
  await writeThenKill(listener.server, join(dir, 'p.dat'), ['--method', 'fdatasync', '--duration', '60'], 20)
  for (const args of [
    ['report', '--dir', store, '--json'],
    ['report', '--dir', store],
    ['runs', '--server', listener.server, '--json'],
  ]) {
    const r = await runToDevFull(args)
    t.equal(r.code, 3, `${args.join(' ')} > /dev/full: exit 3 (stderr: ${r.stderr.trim()})`)
    t.match(r.stderr, /^plugcheck: .*(stdout|standard output|ENOSPC|no space)/im, `${args[0]}: says its output could not be written`)
  }
})
