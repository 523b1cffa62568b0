/** The command line contract of plugcheck bench: help, flag validation, exit codes, refusing to overwrite. */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { main, reportError } from '../../../src/cli/cli.js'
import { quickSecs, runCli, scratchDir } from '../../fixtures/bench-helpers.js'

/** The CLI in-process, as bin/plugcheck.js runs it: an exit code, and what went to stdout and stderr. */
async function runInProcess(args: string[]): Promise<{ status: number; stdout: string; stderr: string }> {
  const io = {
    stdout: '',
    stderr: '',
    out: (text: string) => void (io.stdout += text),
    err: (text: string) => void (io.stderr += text),
    statusTty: false,
  }
  const status = await main(args, io).catch((error: unknown) => reportError(error, io))
  return { status, stdout: io.stdout, stderr: io.stderr }
}

t.test('help names the command and its options, exit 0', async (t) => {
  const result = runCli(['bench', '--help'])
  t.equal(result.status, 0)
  for (const option of ['--file', '--secs', '--record-size', '--json']) t.match(result.stdout, option)
  t.match(result.stdout, /default: 5/)
})

t.test('top-level usage mentions bench', async (t) => {
  const result = runCli([])
  t.equal(result.status, 2)
  t.match(result.stderr, /listen, write, verify, agent, runs, report, bench, demo or methods/)
})

t.test('bad flags are usage errors, exit 2, one line naming the problem', async (t) => {
  const dir = scratchDir('/dev/shm', t)
  const cases: [string[], RegExp][] = [
    [['--secs', '0'], /--secs must be positive/],
    [['--secs', '-1'], /--secs must be positive/],
    [['--secs', 'soon'], /secs/],
    [['--record-size', '1000'], /--record-size must be a multiple of 512/],
    [['--record-size', '2MiB'], /at most 1024 KiB/],
    [['--record-size', 'big'], /--record-size big is not a size/],
    [['--bogus'], /^plugcheck: unknown flag --bogus$/m],
  ]
  for (const [flags, message] of cases) {
    const result = await runInProcess(['bench', '--file', dir, ...flags])
    t.equal(result.status, 2, `exit 2 for ${flags.join(' ')}`)
    t.match(result.stderr, message, flags.join(' '))
    t.notMatch(result.stderr, /\n\s+at /, 'no stack trace')
    t.equal(result.stdout, '', 'nothing on stdout')
  }
  t.same(fs.readdirSync(dir), [], 'no scratch file was created')
  const child = runCli(['bench', '--file', dir, '--secs', '0'])
  t.equal(child.status, 2, 'the same from the real binary')
  t.equal(child.stderr, 'plugcheck: --secs must be positive\n')
})

t.test('refuses to overwrite a file it did not create, exit 2, file untouched', async (t) => {
  const dir = scratchDir('/dev/shm', t)
  const precious = path.join(dir, 'precious.dat')
  fs.writeFileSync(precious, 'not yours')
  const result = runCli(['bench', '--secs', quickSecs, '--file', precious])
  t.equal(result.status, 2)
  t.match(result.stderr, /refusing to overwrite .*precious\.dat: it exists and is not a file plugcheck bench created/)
  t.match(result.stderr, /^hint: /m)
  t.equal(fs.readFileSync(precious, 'utf8'), 'not yours')
})

t.test('a path in a missing directory is a usage error, exit 2', async (t) => {
  const dir = scratchDir('/dev/shm', t)
  const result = runCli(['bench', '--secs', quickSecs, '--file', path.join(dir, 'no/such/dir/file')])
  t.equal(result.status, 2)
  t.match(result.stderr, /could not create .*: ENOENT/)
})
