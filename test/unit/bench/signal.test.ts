/**
 * The scratch file never outlives the run: a real SIGINT or SIGTERM sent to a child process in the
 * middle of a measurement removes it (the loop yields between short slices, so the handler runs);
 * a file left behind by SIGKILL is recognised as ours and reclaimed by the next run.
 */
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { cliPath, quickSecs, repoRoot, runCli, scratchDir, spawn } from '../../fixtures/bench-helpers.js'
import { exitedWithOutput } from '../../fixtures/cli.js'

const startupTimeoutMs = 60_000
/**
 * Seconds per test: long enough that a bench that ignores the signal until its test ends is told from
 * one that stops within a slice, even when a loaded machine takes seconds to run the handler.
 */
const benchSecs = 30
const stopBoundMs = 15_000

interface Child {
  readonly stdout: () => string
  readonly stderr: () => string
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  readonly kill: (signal: NodeJS.Signals) => void
}

function startBench(dir: string): Child {
  const child = spawn(process.execPath, [cliPath, 'bench', '--secs', String(benchSecs), '--file', dir], {
    cwd: repoRoot,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  return {
    stdout: () => stdout,
    stderr: () => stderr,
    exited: exitedWithOutput(child), // once its last lines are read: the tests match its stderr after
    kill: (signal) => void child.kill(signal),
  }
}

/** Waits until the first row is being measured (its label is printed before its loop starts). */
async function untilMeasuring(child: Child, dir: string): Promise<string> {
  const deadline = Date.now() + startupTimeoutMs
  while (Date.now() < deadline) {
    const files = fs.readdirSync(dir)
    if (files.length === 1 && /open_datasync \(buffered\)/.test(child.stdout())) return path.join(dir, files[0]!)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`bench did not start measuring: ${child.stderr()}`)
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  t.test(`${signal} mid-measurement removes the scratch file`, async (t) => {
    const dir = scratchDir('/dev/shm', t)
    const child = startBench(dir)
    const file = await untilMeasuring(child, dir)
    t.ok(fs.existsSync(file), 'scratch file exists while measuring')
    const sentAt = Date.now()
    child.kill(signal)
    const { code } = await child.exited
    const stoppedMs = Date.now() - sentAt
    t.ok(stoppedMs < stopBoundMs, `stops within a slice, not at the end of the ${benchSecs} s test (${stoppedMs} ms)`)
    t.equal(code, 3, 'runtime failure: the run did not complete')
    t.match(child.stderr(), new RegExp(`plugcheck: interrupted by ${signal}; removed .*plugcheck-bench\\.`))
    t.same(fs.readdirSync(dir), [], 'scratch file gone')
  })
}

t.test('a file left by SIGKILL is reclaimed by --file and removed', async (t) => {
  const dir = scratchDir('/dev/shm', t)
  const child = startBench(dir)
  const file = await untilMeasuring(child, dir)
  child.kill('SIGKILL')
  await child.exited
  t.ok(fs.existsSync(file), 'SIGKILL leaves the file behind')
  const result = runCli(['bench', '--secs', quickSecs, '--file', file, '--json'])
  t.equal(result.status, 0, result.stderr)
  t.equal(JSON.parse(result.stdout).file, file)
  t.notOk(fs.existsSync(file), 'removed after the run')
})
