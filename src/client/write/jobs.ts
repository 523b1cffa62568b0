/**
 * `plugcheck write --jobs N`: N writer threads (worker_threads), so a device with a queue deeper than
 * one, or a box with many cores, is tested as a database uses it: several syncs in flight at once.
 *
 * Each job is a whole `write` of its own (src/client/write/job-worker.ts runs runWrite in its thread): its
 * own data files (PATH.jobK, PATH.method.jobK), runs, connection to the listener and synchronous
 * loop, so no job waits for another's sync or ack. All runs share one group id and the path given to
 * --file, so `verify --file PATH` finds and judges the whole group. The listener lets a job join the
 * group on its own connection only with the group's key (random, never printed) from the address of
 * the job that announced it first, and only while one of the group's connections is open; a stranger
 * still cannot join or shadow a group. So the jobs meet at a start barrier: each announces its runs
 * and creates its files, then waits for this thread's go, sent once every job has (or has ended).
 * Jobs start at different times (worker threads on a busy box); without the barrier an early job
 * could end (--duration, a signal, a failure) and close before a late one joined.
 *
 * This thread owns what the user sees and what the process returns: one status line summed over the
 * jobs, the trail, the summaries in job order with one verify command, SIGINT/SIGTERM/SIGHUP (passed on to
 * every job, which ends its runs as 'interrupted'), and the exit code, the worst of the jobs. A job
 * that fails (a failed write or sync, a data file changed, the storage losing a record, the listener lost) ends the whole write:
 * the other jobs are stopped so that every run is ended, and the failing job's error is the result.
 */
import { randomBytes } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import type { Worker } from 'node:worker_threads'
import { startModuleWorker } from '../../base/module-worker.js'
import { PlugcheckError, exitCodes } from '../../base/errors.js'
import type { FileLock } from '../../native/index.js'
import { lockExisting } from './data-file.js'
import { checkEvidence } from './evidence.js'
import { listenerTimeoutMs } from '../../protocol/endpoint.js'
import {
  evidenceQuestion,
  groupDataPaths,
  validateWriteOptions,
  verifyLine,
  type WriteIo,
  type WriteOptions,
  type WriteProgress,
} from './write-options.js'
import { formatUs } from './write-status.js'
import { stoppedLine, type StopSignal } from './stop-signals.js'
import { runWrite } from './writer.js'

/** What the main thread hands a job. */
export interface JobData {
  readonly options: WriteOptions
  readonly statusTty: boolean
}

/** What a job tells the main thread. */
export type JobMessage =
  | { readonly kind: 'out'; readonly text: string }
  | { readonly kind: 'err'; readonly text: string }
  | { readonly kind: 'progress'; readonly progress: WriteProgress }
  /** At the start barrier: runs announced and files created, or (failure) why its start failed; its announced runs are ended. */
  | { readonly kind: 'ready'; readonly failure?: string }
  | {
      readonly kind: 'done'
      readonly exitCode: number
      readonly error?: { readonly message: string; readonly exitCode: 2 | 3; readonly hint?: string }
    }

/**
 * What the main thread tells a job: a signal to act on as if it had received it, or go (every job is
 * past its start; groupFailure: one of them could not start, so none writes and every run ends saying why).
 */
/** signal: stop as on that signal; because says why when no one sent it (another job failed), for the runs' end. */
export type JobCommand =
  | { readonly kind: 'signal'; readonly signal: StopSignal; readonly because?: string }
  | { readonly kind: 'go'; readonly groupFailure?: string }

const statusIntervalMs = 250

interface Job {
  readonly worker: Worker
  /** Its summary (io.out: its runs, without the verify command), printed in job order when every job has ended. */
  out: string
  /** Its latest progress (only while stderr is a terminal). */
  progress: WriteProgress | undefined
  result: JobResult | undefined
  /** It reached the start barrier, or ended. */
  started: boolean
}

type JobResult = Extract<JobMessage, { kind: 'done' }>

/** `plugcheck write`: one job in this process, or --jobs N jobs in worker threads (runJobs). */
export function writeCommand(options: WriteOptions, io: WriteIo): Promise<number> {
  return (options.jobs ?? 1) > 1 && options.job === undefined ? runJobs(options, io) : runWrite(options, io)
}

export async function runJobs(options: WriteOptions, io: WriteIo): Promise<number> {
  const count = options.jobs ?? 1
  validateWriteOptions(options)
  // Every job's files, before any job announces anything: a second writer on any of them is refused
  // now (exit 2), not after some jobs have started. Each job takes its own locks again (flock is per
  // open file, so these must go first).
  const locks: (FileLock | null)[] = []
  try {
    for (const path of groupDataPaths(options)) locks.push(lockExisting(path))
  } finally {
    for (const lock of locks) lock?.release()
  }
  // Once for the group, before any job announces: the last run's evidence (evidence.ts).
  await checkEvidence(evidenceQuestion(options, options.listenerTimeoutMs ?? listenerTimeoutMs))

  const groupId = randomBytes(8).toString('hex')
  const groupKey = randomBytes(16).toString('hex')
  const jobs: Job[] = []
  let signal: StopSignal | undefined
  let goSent = false
  /** The first job that could not start, and why ("job 3 of 4 could not start: ..."), until go. */
  let startFailure: string | undefined
  /** Set when a job failed and this thread stopped the others. */
  let stoppedForFailure = false
  /** Failed jobs' results in the order they arrived: the first is the cause, the rest may be its consequences. */
  const failures: JobResult[] = []
  const printedErr = new Set<string>()
  let statusShown = false
  let steadyTold = false
  let nextStatusMs = 0
  const startedMs = performance.now()
  const finish = (job: Job, result: JobResult): void => {
    if (job.result !== undefined) return
    job.result = result
    if (result.error !== undefined) failures.push(result)
    if (!goSent && result.error !== undefined) failedToStart(job, result.error.message)
    // A job that failed ends the write: the others stop, so every run is ended, not left to vanish.
    if (result.exitCode !== exitCodes.ok)
      stopForFailure(
        `job ${jobs.indexOf(job) + 1} of ${count} failed: ${result.error?.message ?? (result.exitCode === exitCodes.lossFound ? 'the storage lost an acknowledged record of its file' : `it exited ${result.exitCode}`)}`,
      )
    reachedStart(job)
  }
  // The other jobs stop as on SIGTERM, and their runs end saying which job failed (no one sent a signal).
  const stopForFailure = (because: string): void => {
    if (signal !== undefined || stoppedForFailure) return
    stoppedForFailure = true
    stopAll('SIGTERM', because.slice(0, 3000))
  }
  const stopAll = (s: StopSignal, because?: string): void => {
    for (const job of jobs)
      if (job.result === undefined)
        job.worker.postMessage({ kind: 'signal', signal: s, ...(because === undefined ? {} : { because }) } satisfies JobCommand)
  }
  // The start barrier: go once every job has announced its runs (or ended), so that none ends or
  // closes its connection while another is still joining the group; a stop meanwhile is acted on after go.
  const reachedStart = (job: Job): void => {
    job.started = true
    if (goSent || jobs.length < count || !jobs.every((j) => j.started)) return
    goSent = true
    const go: JobCommand = { kind: 'go', ...(startFailure === undefined ? {} : { groupFailure: startFailure }) }
    for (const j of jobs) if (j.result === undefined) j.worker.postMessage(go)
  }
  const failedToStart = (job: Job, message: string): void => {
    startFailure ??= `job ${jobs.indexOf(job) + 1} of ${count} could not start: ${message}`
  }
  const onSignal = (s: StopSignal): void => {
    signal ??= s
    stopAll(s)
  }
  const onSigint = (): void => onSignal('SIGINT')
  const onSigterm = (): void => onSignal('SIGTERM')
  const onSighup = (): void => onSignal('SIGHUP')
  process.on('SIGINT', onSigint)
  process.on('SIGTERM', onSigterm)
  process.on('SIGHUP', onSighup)

  const showStatus = (): void => {
    const now = performance.now()
    if (now < nextStatusMs) return
    nextStatusMs = now + statusIntervalMs
    const seen = jobs.filter((j) => j.progress !== undefined).map((j) => j.progress!)
    if (seen.length === 0) return
    statusShown = true
    io.err(`\r${groupStatusLine(seen, count, (now - startedMs) / 1000)}\x1b[K`)
    if (!steadyTold && jobs.every((j) => j.progress?.steady === true)) {
      steadyTold = true
      io.err(
        `\nsteady: all ${count} jobs are recording acks at the listener. Now is the moment to cut the power (pull the plug, not a clean shutdown).\n`,
      )
    }
  }

  const onProgress = (job: Job, progress: WriteProgress): void => {
    const steadied = progress.steady && job.progress?.steady !== true
    job.progress = progress
    if (steadied) nextStatusMs = 0 // the 'steady' line as soon as the last job is steady
    showStatus()
  }

  const onErr = (text: string): void => {
    if (printedErr.has(text)) return // every job warns of the same file system
    printedErr.add(text)
    io.err(`${statusShown ? '\n' : ''}${text}`)
    statusShown = false
  }

  try {
    const ended = Array.from({ length: count }, (_, index) => {
      const data: JobData = { options: { ...options, job: { index, count, groupId, groupKey } }, statusTty: io.statusTty }
      const job: Job = {
        worker: startModuleWorker(import.meta.url, 'job-worker', data),
        out: '',
        progress: undefined,
        result: undefined,
        started: false,
      }
      jobs.push(job)
      return new Promise<void>((resolve) => {
        job.worker.on('message', (message: JobMessage) => {
          if (message.kind === 'out') job.out += message.text
          else if (message.kind === 'err') onErr(message.text)
          else if (message.kind === 'progress') onProgress(job, message.progress)
          else if (message.kind === 'ready') {
            if (message.failure !== undefined) {
              failedToStart(job, message.failure)
              stopForFailure(`job ${index + 1} of ${count} could not start: ${message.failure}`)
            }
            reachedStart(job)
          } else finish(job, message)
        })
        job.worker.on('error', (error) =>
          finish(job, {
            kind: 'done',
            exitCode: exitCodes.runtime,
            error: { message: `job ${index + 1} failed: ${error.message}`, exitCode: exitCodes.runtime },
          }),
        )
        job.worker.on('exit', () => {
          finish(job, {
            kind: 'done',
            exitCode: exitCodes.runtime,
            error: { message: `job ${index + 1} ended without a result`, exitCode: exitCodes.runtime },
          })
          resolve()
        })
      })
    })
    await Promise.all(ended)
  } finally {
    process.off('SIGINT', onSigint)
    process.off('SIGTERM', onSigterm)
    process.off('SIGHUP', onSighup)
  }
  if (statusShown) io.err('\n')

  io.out(`${jobs.map((j) => j.out).join('')}${verifyLine(options)}\n`)
  // The first job that failed is the write's error; else a job's storage loss (1); else every job got the same signal (130, 143, 129); else 0.
  const cause = failures[0]?.error
  if (cause !== undefined) throw new PlugcheckError(cause.message, cause.exitCode, cause.hint)
  // A job that found the storage losing an acknowledged record (exit 1) decides over the jobs it stopped.
  const codes = jobs.map((j) => j.result!.exitCode)
  const code = codes.includes(exitCodes.lossFound) ? exitCodes.lossFound : (codes.find((c) => c !== exitCodes.ok) ?? exitCodes.ok)
  if (signal !== undefined && code !== exitCodes.ok) io.err(stoppedLine(signal))
  return code
}

/** The group's status: the jobs' records summed, the rate since the write began, the slowest job's sync latency. */
function groupStatusLine(seen: readonly WriteProgress[], count: number, elapsedS: number): string {
  const written = seen.reduce((n, p) => n + p.written, 0)
  const recorded = seen.reduce((n, p) => n + p.recorded, 0)
  const waiting = seen.filter((p) => p.waitingUnrecorded !== undefined)
  const p50 = Math.max(...seen.map((p) => p.syncP50Us))
  const p99 = Math.max(...seen.map((p) => p.syncP99Us))
  const wait =
    waiting.length === 0
      ? ''
      : `, ${waiting.length} waiting for the listener (${waiting.reduce((n, p) => n + p.waitingUnrecorded!, 0).toLocaleString('en-US')} acks unrecorded)`
  return `${elapsedS.toFixed(0)} s: ${count} jobs, ${written.toLocaleString('en-US')} records written and acked, ${recorded.toLocaleString('en-US')} recorded by the listener, ${Math.round(written / elapsedS).toLocaleString('en-US')}/s, sync p50 ${formatUs(p50)} p99 ${formatUs(p99)}${wait}`
}
