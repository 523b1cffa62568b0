/**
 * The status a terminal sees, built from the loop's progress as data: a single write draws its own
 * line and one 'steady' line; write --jobs N sums its jobs' progress into one line of its own and says
 * 'steady' once every job is steady, with no job's own status text reaching the user.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { runWrite } from '../../src/client/write/writer.js'
import type { WriteProgress } from '../../src/client/write/write-options.js'
import { parseEndpoint, type Endpoint } from '../../src/protocol/endpoint.js'
import { startListener, tempDir, type CliResult } from '../fixtures/cli.js'

const ttyScript = fileURLToPath(new URL('../fixtures/write-tty.ts', import.meta.url))
// Steady comes 3 s in at the earliest, once the listener has recorded acks (a loaded machine's listener
// can take seconds more): the run lasts long enough for it to come.
const duration = ['--duration', '10', '--size', '4MiB']

/** The command run as on a terminal, in a child process. */
async function onTerminal(dir: string, args: readonly string[]): Promise<CliResult> {
  const result = join(dir, 'result.json')
  const child = spawn(process.execPath, ['--import', 'tsx', ttyScript, result, ...args], { stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
  const exit = await new Promise<number | null>((resolve) => child.on('close', resolve))
  if (exit !== 0) throw new Error(`write-tty exited ${exit}: ${stderr}`)
  return JSON.parse(readFileSync(result, 'utf8')) as CliResult
}

const number = '[\\d,]+'
const latency = '(\\d+(\\.\\d)? (us|ms)|-)'

t.test('a single write draws its status line and one steady line', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const r = await onTerminal(dir, ['write', '--server', listener.server, '--file', join(dir, 'data'), ...duration])
  t.equal(r.code, 0, r.stderr)
  const status = new RegExp(
    `^\\d+ s: ${number} records written and acked, ${number} recorded by the listener, ${number}/s, sync p50 ${latency} p99 ${latency}\\x1b\\[K$`,
  )
  const steady = 'steady: the listener is recording acks. Now is the moment to cut the power (pull the plug, not a clean shutdown).'
  const lines = r.stderr.split(/[\r\n]/).filter((line) => line !== '')
  t.ok(lines.length > 2, 'status lines drawn')
  t.equal(lines.filter((line) => line === steady).length, 1, 'steady once')
  t.ok(
    lines.every((line) => line === steady || status.test(line)),
    'only status lines and the steady line',
  )
  t.equal(r.stderr.split(`\x1b[K\n${steady}\n\r`).length, 2, 'steady on a line of its own between two status lines')
  t.ok(r.stderr.startsWith('\r') && r.stderr.endsWith('\x1b[K\n'), 'the status line ends with the loop')
})

t.test('write --jobs 2: one summed status line, one steady line, the summary once', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'data')
  const r = await onTerminal(dir, ['write', '--server', listener.server, '--file', file, '--jobs', '2', ...duration])
  t.equal(r.code, 0, r.stderr)
  const status = new RegExp(
    `^\\d+ s: 2 jobs, (${number}) records written and acked, ${number} recorded by the listener, ${number}/s, sync p50 ${latency} p99 ${latency}\\x1b\\[K$`,
  )
  const steady =
    'steady: all 2 jobs are recording acks at the listener. Now is the moment to cut the power (pull the plug, not a clean shutdown).'
  const lines = r.stderr.split(/[\r\n]/).filter((line) => line !== '')
  t.equal(lines.filter((line) => line === steady).length, 1, 'steady once')
  const statusLines = lines.filter((line) => line !== steady)
  t.ok(statusLines.length > 2 && statusLines.every((line) => status.test(line)), "only the group's status lines")
  t.equal(r.stderr.split(`\x1b[K\n${steady}\n\r`).length, 2, 'steady on a line of its own between two status lines')
  const written = statusLines.map((line) => Number(status.exec(line)![1]!.replaceAll(',', '')))
  t.same(
    written,
    [...written].sort((a, b) => a - b),
    'the sum only grows',
  )
  t.ok(r.stderr.startsWith('\r') && r.stderr.endsWith('\x1b[K\n'), 'the status line ends once')
  t.equal(r.stdout.match(/^run [0-9a-f]{16}: /gm)?.length, 2, 'one summary per job')
  t.equal(r.stdout.match(/^to check it now: /gm)?.length, 1, 'the summary names the verify command once, after every run')
  // The write ended by --duration: no cut came, so the command is to be run now, not after a cut.
  t.match(r.stdout, new RegExp(`\\.job2\\n.*\\n.*\\nto check it now: plugcheck verify --server ${listener.server} --file ${file}\\n$`))
})

t.test('a progress callback gets the status as data, and nothing is drawn', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const reports: WriteProgress[] = []
  let err = ''
  const options = {
    server: parseEndpoint(listener.server) as Endpoint,
    file: join(dir, 'data'),
    methods: ['fdatasync', 'none'] as const,
    direct: false,
    recordSizeBytes: 8192,
    sizeBytes: 4 * 1024 * 1024,
    pattern: 'append' as const,
    durationS: 10, // long enough for steady on a loaded machine (3 s in at the earliest)
    force: false,
  }
  const code = await runWrite(options, {
    out: () => undefined,
    err: (s) => void (err += s),
    statusTty: true,
    progress: (p) => void reports.push(p),
  })
  t.equal(code, 0, err)
  t.equal(err, '', 'no status or steady text')
  t.ok(reports.length > 2)
  t.ok(
    reports.every((p, i) => i === 0 || (p.written >= reports[i - 1]!.written && p.elapsedS > reports[i - 1]!.elapsedS)),
    'written and elapsed grow',
  )
  t.ok(reports.every((p) => p.recorded <= p.written && p.waitingUnrecorded === undefined))
  const steady = reports.findIndex((p) => p.steady)
  t.ok(steady > 0 && reports.slice(steady).every((p) => p.steady), 'steady from one point on')
  t.ok(reports[steady]!.elapsedS >= 3 && reports[steady]!.recorded > 0)
  t.ok(reports.at(-1)!.syncP50Us > 0 && reports.at(-1)!.syncP99Us >= reports.at(-1)!.syncP50Us)
})
