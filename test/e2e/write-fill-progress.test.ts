/**
 * A write of the overwrite pattern fills its new data file with zeros before the first record (2 GiB
 * takes seconds): it says so before the fill, on a real terminal (a pseudo-terminal from script(1))
 * as a status line redrawn in place, without one as one plain line ended with the time it took, and
 * both before any record is synced (the trace file, written after each sync, is still empty).
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { binPath, fileSize, spawnCli, startListener, tempDir } from '../fixtures/cli.js'
import { shellQuote } from '../../src/base/shell-quote.js'

// 256 MiB of zeros: over a second of writing and fsync on the test machine, and cheap.
const fill = ['--pattern', 'overwrite', '--size', '256MiB', '--method', 'none', '--duration', '1']

/** Runs the child to its end, noting how many trace bytes existed when its output first matched seen. */
async function watch(
  child: ReturnType<typeof spawn>,
  traceFile: string,
  seen: RegExp,
): Promise<{ code: number; output: string; traceBytesWhenSeen: number | undefined }> {
  let output = ''
  let traceBytesWhenSeen: number | undefined
  const take = (c: Buffer): void => {
    output += c.toString()
    if (traceBytesWhenSeen === undefined && seen.test(output)) traceBytesWhenSeen = fileSize(traceFile)
  }
  child.stdout?.on('data', take)
  child.stderr?.on('data', take)
  const timer = setTimeout(() => child.kill('SIGKILL'), 120_000)
  const code = await new Promise<number>((resolve) => child.on('close', (c) => resolve(c ?? -1)))
  clearTimeout(timer)
  return { code, output, traceBytesWhenSeen }
}

t.test('without a terminal: one plain line, said before the first record', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'ld'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'p.dat')
  const trace = join(dir, 'trace')
  const r = await watch(
    spawnCli(['write', '--server', listener.server, '--file', file, '--trace-file', trace, ...fill]),
    trace,
    /preparing .*\.\.\./,
  )
  t.equal(r.code, 0, r.output)
  const line = new RegExp(
    `^preparing ${file}: 256 MiB, filling it with zeros for the overwrite pattern \\.\\.\\. done in (\\d+\\.\\d) s$`,
    'm',
  )
  t.match(r.output, line, 'one line, ended with the time it took')
  t.equal(r.traceBytesWhenSeen, 0, 'said before any record was synced')
  t.ok(fileSize(trace) > 0, 'and records followed')
  t.notMatch(r.output, /\r|\x1b\[K/, 'no terminal controls')
})

t.test('on a terminal: a status line redrawn in place, before the first record', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'ld'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'p.dat')
  const trace = join(dir, 'trace')
  const command = [process.execPath, binPath, 'write', '--server', listener.server, '--file', file, '--trace-file', trace, ...fill]
  // script(1) gives the write a pseudo-terminal for stdin, stdout and stderr (merged on its stdout).
  const child = spawn('script', ['-qfec', command.map((word) => shellQuote(word, 'posix')).join(' '), '/dev/null'], {
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  const r = await watch(child, trace, /preparing .*MiB written/)
  t.equal(r.code, 0, r.output)
  const frames = r.output.split('\r').filter((f) => f.startsWith('preparing '))
  const filling = frames.filter((f) => /MiB written/.test(f))
  t.ok(filling.length >= 1, `the fill drawn (${filling.length} frames)`)
  t.ok(
    filling.every((f) =>
      new RegExp(`^preparing ${file}: 256 MiB, filling it with zeros: [\\d,]+ MiB written \\(\\d+%\\)\\x1b\\[K$`).test(f),
    ),
    'each redrawn in place',
  )
  t.ok(frames.includes(`preparing ${file}: 256 MiB, filled with zeros, fsync ...\x1b[K`), 'then the fsync')
  t.match(
    r.output,
    new RegExp(`\\rpreparing ${file}: 256 MiB, filled with zeros, done in \\d+\\.\\d s\\x1b\\[K\\r?\\n`),
    'a line that stays',
  )
  t.equal(r.traceBytesWhenSeen, 0, 'drawn before any record was synced')
  const firstStatus = r.output.search(/records written and acked/)
  t.ok(firstStatus > r.output.indexOf('done in'), "before write's own status lines")
})
