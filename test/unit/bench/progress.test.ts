/**
 * A long bench shows its progress on stderr: on a terminal (statusTty) a status line redrawn in place
 * with the time left and the test measured, erased at the end; without one a plain line per test
 * started, no control characters. stdout is the same either way: the table, or one JSON document.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Io } from '../../../src/base/io.js'
import { benchProgress, formatTimeLeft, progressRedrawMs } from '../../../src/bench/progress.js'
import { benchPlan } from '../../../src/bench/sections/plan.js'
import { methodAvailability } from '../../../src/native/registry.js'
import { runCli, scratchDir } from '../../fixtures/bench-helpers.js'
import type { CliResult } from '../../fixtures/cli.js'
import { waitFor } from '../../fixtures/cli.js'

const ttyScript = fileURLToPath(new URL('../../fixtures/write-tty.ts', import.meta.url))
const secs = '0.05'
const plan = benchPlan(8192)
const measuredRows = plan.flatMap((section) => section.rows.filter((row) => methodAvailability(row.method).available))
const controlCharacters = /[\x00-\x09\x0b-\x1f\x7f]/
const statusText = /^bench: about (\d+) s left, test (\d+) of (\d+): (.+)$/

/** The command run as on a terminal (stderr a TTY for plugcheck), in a child process. */
async function onTerminal(dir: string, args: readonly string[]): Promise<CliResult> {
  const result = join(dir, 'result.json')
  const child = spawn(process.execPath, ['--import', 'tsx', ttyScript, result, ...args], { stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
  const timer = setTimeout(() => child.kill('SIGKILL'), 120_000)
  const exit = await new Promise<number | null>((resolve) => child.on('close', resolve))
  clearTimeout(timer)
  if (exit !== 0) throw new Error(`write-tty exited ${exit}: ${stderr}`)
  return JSON.parse(readFileSync(result, 'utf8')) as CliResult
}

/** Each measured row's name as the progress gives it: its section's brief and its label. */
const rowNames = measuredRows.map((row) => {
  const section = plan.find((s) => s.rows.includes(row))!
  return `${section.brief}, ${row.label.trim().replace(/\s+/g, ' ')}`
})

/** The table with its figures (and their padding), scratch file name and verdicts on speed left out: what both runs share. */
function tableShape(stdout: string): string {
  const lines = stdout.split('\n')
  const end = lines.findIndex((line) => line.startsWith("Non-sync'ed"))
  return lines
    .slice(0, end + 2)
    .join('\n')
    .replace(/plugcheck-bench\.[\w-]+/g, 'SCRATCH')
    .replace(/\d+(\.\d+)?/g, '#')
    .replace(/ +/g, ' ')
}

t.test('without a terminal: one plain line per test started, no control characters', async (t) => {
  const dir = scratchDir('/dev/shm', t)
  const result = runCli(['bench', '--file', dir, '--secs', secs])
  t.equal(result.status, 0, result.stderr)
  t.notMatch(result.stderr, controlCharacters, 'no control characters')
  const lines = result.stderr.split('\n').filter((line) => line !== '')
  t.equal(lines.length, measuredRows.length, 'a line per measured test')
  let lastLeftS = Number.POSITIVE_INFINITY
  lines.forEach((line, i) => {
    const match = statusText.exec(line)
    t.ok(match, `a progress line: ${line}`)
    t.equal(Number(match![2]), i + 1, 'tests counted in order')
    t.equal(Number(match![3]), measuredRows.length, 'out of every measured test')
    t.equal(match![4], rowNames[i], 'names the test')
    t.ok(Number(match![1]) <= lastLeftS, 'the time left does not grow')
    lastLeftS = Number(match![1])
  })
  t.equal(result.stdout.match(/\d ops\/sec /g)?.length, measuredRows.length, 'each line a row of the table measured')
})

t.test('on a terminal: a status line redrawn in place and erased at the end; the same table on stdout', async (t) => {
  const dir = scratchDir('/dev/shm', t)
  const onTty = await onTerminal(dir, ['bench', '--file', dir, '--secs', secs])
  t.equal(onTty.code, 0, onTty.stderr)
  t.ok(onTty.stderr.endsWith('\r\x1b[K'), 'the status line is erased at the end')
  const draws = onTty.stderr
    .split('\r\x1b[K')
    .join('')
    .split('\r')
    .filter((s) => s !== '')
  t.ok(draws.length >= measuredRows.length, `drawn at least once a test (${draws.length})`)
  t.ok(
    draws.every((draw) => draw.endsWith('\x1b[K') && statusText.test(draw.slice(0, -3))),
    'only status lines, each erasing the rest of its line',
  )
  const named = new Set(draws.map((draw) => statusText.exec(draw.slice(0, -3))![4]))
  t.same([...named], rowNames, 'every test named, in order')
  t.notMatch(onTty.stdout, controlCharacters, 'stdout has no control characters')
  const plain = runCli(['bench', '--file', dir, '--secs', secs])
  t.equal(plain.status, 0, plain.stderr)
  t.equal(tableShape(onTty.stdout), tableShape(plain.stdout), 'the table, as without a terminal')
  t.match(onTty.stdout, /\n {8}fdatasync +[\d.]+ ops\/sec/, 'a row on one line, label and figures')
})

t.test('on a terminal with --json: stdout is the JSON document alone', async (t) => {
  const dir = scratchDir('/dev/shm', t)
  const onTty = await onTerminal(dir, ['bench', '--file', dir, '--secs', secs, '--json'])
  t.equal(onTty.code, 0, onTty.stderr)
  t.match(onTty.stderr, /^\rbench: about \d+ s left, test 1 of /, 'the status line on stderr')
  t.ok(onTty.stdout.startsWith('{\n') && onTty.stdout.endsWith('}\n'), 'one document')
  const report = JSON.parse(onTty.stdout)
  t.equal(report.secsPerTest, 0.05)
  t.equal(onTty.stdout, `${JSON.stringify(report, null, 2)}\n`, 'as JSON.stringify writes it')
})

t.test('the status line is redrawn while a test runs, the time left going down', async (t) => {
  let nowMs = 0
  let err = ''
  const io: Io = { out: () => {}, err: (s) => void (err += s), statusTty: true }
  const progress = benchProgress(
    io,
    plan,
    5,
    (row) => methodAvailability(row.method).available,
    () => nowMs,
  )
  t.teardown(() => progress.end())
  progress.rowStarted(plan[0]!, measuredRows[0]!)
  const total = measuredRows.length
  t.equal(err, `\rbench: about ${formatTimeLeft(total * 5)} left, test 1 of ${total}: ${rowNames[0]}\x1b[K`)
  nowMs = 2000
  await waitFor('a redraw', () => err.split('\r').length > 2, 10 * progressRedrawMs)
  t.equal(err.split('\r')[2], `bench: about ${formatTimeLeft(total * 5 - 2)} left, test 1 of ${total}: ${rowNames[0]}\x1b[K`)
  progress.end()
  t.ok(err.endsWith('\r\x1b[K'), 'erased at the end')
  const written = err.length
  progress.rowStarted(plan[0]!, measuredRows[1]!)
  progress.end()
  t.equal(err.length, written, 'nothing drawn after the end')
})

t.test('formatTimeLeft: rounded up, seconds, minutes, hours', async (t) => {
  t.equal(formatTimeLeft(0.2), '1 s')
  t.equal(formatTimeLeft(45), '45 s')
  t.equal(formatTimeLeft(59.5), '1 min 0 s')
  t.equal(formatTimeLeft(112), '1 min 52 s')
  t.equal(formatTimeLeft(3600), '1 h 0 min')
  t.equal(formatTimeLeft(28 * 3600 - 1), '27 h 59 min')
})
