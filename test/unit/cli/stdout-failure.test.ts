/**
 * A stdout that cannot be written: a command whose output is its product exits 3 saying so (its
 * document was never written), a reader that went away (EPIPE) changes nothing, and the trail of a
 * write run never changes the run's code. The table of stdoutFailure over every case, and real
 * processes whose stdout is /dev/full (ENOSPC at every write) or a pipe closed early.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { closeSync, openSync } from 'node:fs'
import { join } from 'node:path'
import { stdoutFailure } from '../../../src/cli/stdout-failure.js'
import { binPath, startListener, tempDir } from '../../fixtures/cli.js'

const enospc = Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' })
const epipe = Object.assign(new Error('EPIPE: broken pipe, write'), { code: 'EPIPE' })

t.test('stdoutFailure: the code after stdout failed, for every kind of command and error', async (t) => {
  const cases: Array<[string[], unknown, number, number, boolean]> = [
    // args, error, code, expected code, a message said
    [['report', '--dir', 'd'], undefined, 0, 0, false],
    [['report', '--dir', 'd'], enospc, 0, 3, true],
    [['runs', '--server', 'h:1', '--json'], enospc, 0, 3, true],
    [['verify', '--acks', 'd', '--file', 'f', '--json'], enospc, 0, 3, true],
    [['verify', '--acks', 'd', '--file', 'f', '--json'], enospc, 1, 1, true],
    [['methods'], enospc, 0, 3, true],
    [['--version'], enospc, 0, 3, true],
    [['write', '--help'], enospc, 0, 3, true],
    [['report', '--dir', 'd'], epipe, 0, 0, false],
    [['write', '--server', 'h:1', '--file', 'f'], enospc, 0, 0, false],
    [['agent', '--server', 'h:1', '--file', 'f'], enospc, 1, 1, false],
    [['listen', '--dir', 'd'], enospc, 0, 0, false],
    [['report', '--dir', 'd'], enospc, 2, 2, true],
  ]
  for (const [args, error, code, expected, said] of cases) {
    const after = stdoutFailure(args, error, code)
    const name = `${args.join(' ')} (${(error as { code?: string } | undefined)?.code ?? 'no error'}, code ${code})`
    t.equal(after.code, expected, `${name}: exit ${expected}`)
    if (said) t.match(after.message, /^plugcheck: could not write to stdout: ENOSPC \(no space left on device\)/, `${name}: said`)
    else t.equal(after.message, undefined, `${name}: nothing said`)
  }
})

/** The CLI as a child with stdout on /dev/full. */
function runToDevFull(args: readonly string[]): Promise<{ code: number | null; stderr: string }> {
  const full = openSync('/dev/full', 'w')
  const child = spawn(process.execPath, [binPath, ...args], { stdio: ['ignore', full, 'pipe'] })
  closeSync(full)
  let stderr = ''
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000)
  return new Promise((resolve) =>
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stderr })
    }),
  )
}

t.test('a command whose output is its product, stdout on /dev/full: exit 3, said on stderr', async (t) => {
  for (const args of [['methods'], ['methods', '--json'], ['--version'], ['--help'], ['report', '--help']]) {
    const r = await runToDevFull(args)
    t.equal(r.code, 3, `${args.join(' ')} > /dev/full: exit 3`)
    t.equal(r.stderr, 'plugcheck: could not write to stdout: ENOSPC (no space left on device); the output is incomplete\n', args.join(' '))
  }
  const usage = await runToDevFull(['bogus'])
  t.equal(usage.code, 2, 'a usage error that printed nothing on stdout keeps its code')
  t.notMatch(usage.stderr, /stdout/, 'and is not blamed on stdout')
})

t.test('a reader that stops early (EPIPE): exit 0, nothing said', async (t) => {
  const child = spawn(process.execPath, [binPath, '--help'], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
  // Closed before the child writes a byte: its first write meets EPIPE.
  child.stdout!.destroy()
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000)
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
  clearTimeout(timer)
  t.equal(code, 0, 'exit 0')
  t.equal(stderr, '', 'nothing on stderr')
})

t.test('write with stdout on /dev/full: the run is the job, its code is the run’s', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'acks'))
  t.teardown(() => listener.kill())
  const r = await runToDevFull(['write', '--server', listener.server, '--file', join(dir, 'p.dat'), '--duration', '0.3'])
  t.equal(r.code, 0, `write ended by its duration: exit 0 (${r.stderr.trim()})`)
  t.notMatch(r.stderr, /could not write to stdout/, 'its lost trail is not an error')
})
