/**
 * The write's summary says what the listener holds, never what the writer guesses: "N records synced
 * and acknowledged, M recorded by the listener" with M what `plugcheck runs` lists for the run, when
 * the listener's disk filled mid-run; and "unknown, the listener stopped answering" with the command
 * to ask it, when the listener died mid-run and cannot be asked.
 */
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { mkdirSync, rmSync, statfsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, spawnCli, startListener, tempDir, waitFor } from '../fixtures/cli.js'

/** The summary's counts of the run: acknowledged, and recorded (undefined when it says unknown). */
function summaryCounts(stdout: string): { acked: number; recorded: number | undefined; line: string } {
  const line = /^ {2}([\d,]+) records synced and acknowledged.*$/m.exec(stdout)
  if (line === null) throw new Error(`no summary line in: ${stdout}`)
  const recorded = /, ([\d,]+) recorded by the listener$/.exec(line[0])
  return {
    acked: Number(line[1]!.replaceAll(',', '')),
    recorded: recorded === null ? undefined : Number(recorded[1]!.replaceAll(',', '')),
    line: line[0],
  }
}

/** What `plugcheck runs --json` says the listener holds of each run. */
async function listedAcks(server: string): Promise<Map<string, number>> {
  const runs = await runCli(['runs', '--server', server, '--json'])
  if (runs.code !== 0) throw new Error(`runs failed: ${runs.stderr}`)
  const parsed = JSON.parse(runs.stdout) as { runs: Array<{ runId: string; ackedThroughSeq: number }> }
  return new Map(parsed.runs.map((r) => [r.runId, r.ackedThroughSeq]))
}

t.test("a listener whose disk filled mid-run: the summary's recorded count is what the listener holds", async (t) => {
  const dir = tempDir(t)
  const mnt = join(dir, 'm')
  mkdirSync(mnt)
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=3m', 'tmpfs', mnt])
  t.teardown(() => execFileSync('umount', ['-l', mnt]))
  // No reserve: the disk fills while the run records (a reserve would refuse the run at its announcement).
  const listener = await startListener(join(mnt, 'ld'), ['--reserve', '0'])
  t.teardown(() => listener.kill())
  const fs = statfsSync(mnt)
  writeFileSync(join(mnt, 'filler'), Buffer.alloc(fs.bavail * fs.bsize - 24 * 1024))

  const write = await runCli([
    'write',
    '--server',
    listener.server,
    '--file',
    join(dir, 'p.dat'),
    '--method',
    'fdatasync',
    '--duration',
    '10',
  ])
  t.equal(write.code, 3, `the writer stops: the listener could not record (${write.stderr.trim()})`)
  t.match(write.stderr, /could not record acks of run [0-9a-f]{16}: ENOSPC/)
  const runId = /^run ([0-9a-f]{16}):/m.exec(write.stdout)?.[1]
  t.ok(runId, 'the summary names the run')
  const counts = summaryCounts(write.stdout)
  const held = (await listedAcks(listener.server)).get(runId ?? '')
  t.ok(held !== undefined && held > 0, `the listener lists the run with its recorded acks (${held})`)
  t.equal(counts.recorded, held, `the summary's recorded count is the listener's (${counts.line.trim()})`)
  t.ok(counts.acked >= (held ?? 0), 'never more recorded than acknowledged')
  rmSync(join(mnt, 'filler'))
})

t.test('a listener killed mid-run: the summary says it cannot know, and how to ask', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'ld'))
  t.teardown(() => listener.kill())
  const writer = spawnCli(['write', '--server', listener.server, '--file', join(dir, 'p.dat'), '--method', 'fdatasync', '--duration', '60'])
  let stdout = ''
  let stderr = ''
  writer.stdout!.on('data', (c: Buffer) => (stdout += c.toString()))
  writer.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
  const exited = new Promise<number>((resolve) => writer.on('close', (code) => resolve(code ?? -1)))
  t.teardown(() => writer.kill('SIGKILL'))
  // The listener has recorded acks of the run before it dies.
  await waitFor('recorded acks at the listener', () => /after a power cut and reboot/.test(stdout))
  let held = 0
  const deadline = Date.now() + 20_000
  // Bounded: a listener that never lists the run fails the assertion below.
  while (held === 0 && Date.now() < deadline) held = [...(await listedAcks(listener.server)).values()][0] ?? 0
  t.ok(held > 0, `the listener recorded acks first (${held})`)
  await listener.kill('SIGKILL')

  const code = await exited
  t.equal(code, 3, `the writer stops: the listener is gone (${stderr.trim()})`)
  const counts = summaryCounts(stdout)
  t.equal(counts.recorded, undefined, `no recorded count is claimed (${counts.line.trim()})`)
  t.match(
    counts.line,
    /; recorded by the listener: unknown, the listener stopped answering \(it had confirmed [\d,]+\): ask it with plugcheck runs --server 127\.0\.0\.1:\d+$/,
  )
  t.ok(counts.acked > 0, 'the acknowledged count is still given')
})
