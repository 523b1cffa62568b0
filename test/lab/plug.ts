/**
 * One plug pull in the lab: a plugcheck writer (a real child process) writes into the lab's ext4,
 * the power is cut after a chosen time, the disk "reboots", and verify judges every run. The
 * listener runs in this process on 127.0.0.1, outside the cut, as a second machine would.
 *
 * The writer's trace file lives outside the cut too: it counts the syncs the writer completed, so
 * ack coverage (acks the listener holds / syncs completed) can be measured.
 */
import { spawn } from 'node:child_process'
import { readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { main, reportError } from '../../src/cli.js'
import type { RunReport } from '../../src/client/judge.js'
import type { VerifyReport } from '../../src/client/verify.js'
import type { Io } from '../../src/client/writer.js'
import { binPath } from '../fixtures/cli.js'
import type { Lab } from './harness.js'

export interface PlugOptions {
  readonly methods: readonly string[]
  readonly direct: boolean
  readonly pattern: 'append' | 'overwrite'
  /** Time from the first completed sync to the cut (at most, with mayEndFirst). */
  readonly runMs: number
  readonly size: string
  /** Where the trace file goes: outside the lab's disk. */
  readonly outsideDir: string
  readonly server: string
  /**
   * The writer may end on its own before the cut (it read back a record the disk lost: exit 1,
   * storage-lost): the disk is cut and rebooted all the same, and verify judges. Otherwise a writer
   * that stops before the cut is an error.
   */
  readonly mayEndFirst?: boolean
  /** Drop the host's cache of the disk this often while the writer runs (Lab.dropHostCache), so its read-back reaches the disk. */
  readonly dropHostCacheEveryMs?: number
}

export interface PlugResult {
  readonly verifyCode: number
  readonly report: VerifyReport | undefined
  readonly verifyStderr: string
  /** Syncs the writer completed before the cut, per run id (from the trace file). */
  readonly completed: ReadonlyMap<string, number>
  readonly writerStderr: string
  /** The writer's exit code when it ended before the cut (mayEndFirst); null when the cut ended it. */
  readonly writerExitCode: number | null
}

const traceEntryBytes = 24
const startTimeoutMs = 30_000

export async function plugPull(lab: Lab, options: PlugOptions): Promise<PlugResult> {
  const file = join(lab.mountPoint, 'data')
  const trace = join(options.outsideDir, `trace-${Date.now()}-${Math.random().toString(16).slice(2)}`)
  const args = ['write', '--server', options.server, '--file', file, '--method', options.methods.join(','), '--pattern', options.pattern, '--size', options.size, '--trace-file', trace]
  if (options.direct) args.push('--direct', '--record-size', '8192')
  const writer = spawn(process.execPath, [binPath, ...args], { stdio: ['ignore', 'ignore', 'pipe'] })
  let writerStderr = ''
  writer.stderr.on('data', (c: Buffer) => (writerStderr += c.toString()))
  const exited = new Promise<void>((resolve) => writer.on('exit', () => resolve()))

  // Wait for the first completed sync, bounded, then let the writer run for runMs.
  const deadline = Date.now() + startTimeoutMs
  while (size(trace) < traceEntryBytes) {
    if (writer.exitCode !== null || Date.now() > deadline) {
      writer.kill('SIGKILL')
      await exited
      throw new Error(`the writer did not start writing (exit ${writer.exitCode}): ${writerStderr}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  // A writer that may end on its own is cut at runMs at the latest, at once when it has ended.
  let timer: NodeJS.Timeout | undefined
  let running = true
  const dropping = (async () => {
    while (running && options.dropHostCacheEveryMs !== undefined) {
      await new Promise((resolve) => setTimeout(resolve, options.dropHostCacheEveryMs))
      if (running) await lab.dropHostCache()
    }
  })()
  await Promise.race([new Promise((resolve) => (timer = setTimeout(resolve, options.runMs))), ...(options.mayEndFirst === true ? [exited] : [])])
  clearTimeout(timer)
  running = false
  await dropping
  const writerExitCode = writer.exitCode
  if (writerExitCode !== null && options.mayEndFirst !== true) throw new Error(`the writer stopped before the cut (exit ${writerExitCode}): ${writerStderr}`)

  await lab.cut(writerExitCode === null ? [writer.pid!] : [])
  await exited
  const completed = completedPerRun(trace)
  // Acks sent just before the cut are still in this process's socket buffer: let the listener take them in.
  await new Promise((resolve) => setTimeout(resolve, 200))
  await lab.reboot()

  let out = ''
  let err = ''
  const io: Io = { out: (s) => void (out += s), err: (s) => void (err += s), statusTty: false }
  let verifyCode: number
  try {
    verifyCode = await main(['verify', '--server', options.server, '--file', file, '--json'], io)
  } catch (error) {
    verifyCode = reportError(error, io)
  }
  return { verifyCode, report: out === '' ? undefined : (JSON.parse(out) as VerifyReport), verifyStderr: err, completed, writerStderr, writerExitCode }
}

function size(path: string): number {
  try {
    return statSync(path).size
  } catch {
    return 0
  }
}

function completedPerRun(trace: string): Map<string, number> {
  const bytes = readFileSync(trace)
  const completed = new Map<string, number>()
  for (let offset = 0; offset + traceEntryBytes <= bytes.length; offset += traceEntryBytes) {
    const runId = bytes.subarray(offset, offset + 8).toString('hex')
    const seq = bytes.readDoubleLE(offset + 8)
    if (seq > (completed.get(runId) ?? 0)) completed.set(runId, seq)
  }
  return completed
}

export const failedRecords = (run: RunReport): number => run.lost + run.torn + run.corrupt
