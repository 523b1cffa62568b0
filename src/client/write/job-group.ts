/**
 * The main thread's side of `write --jobs N` while its jobs run (jobs.ts): the start barrier (go once
 * every job has announced its runs, or ended), every job stopped when one fails or a signal comes,
 * each job's output kept for the end, and one progress summed over the jobs, shown as a single
 * write's is (write-status.ts: the status line, or the events without a terminal).
 */
import { performance } from 'node:perf_hooks'
import type { Worker } from 'node:worker_threads'
import { exitCodes } from '../../base/errors.js'
import type { JobCommand, JobMessage, JobResult } from './job-messages.js'
import type { StopSignal } from './stop-signals.js'
import type { WriteIo, WriteProgress } from './write-options.js'
import { progressView, statusIntervalMs, type ProgressView, type ShownProgress } from './write-status.js'
import type { WriteOutput } from './write-events.js'

export interface Job {
  readonly worker: Worker
  /** Its summary (io.out: its runs, without the verify command), printed in job order when every job has ended. */
  out: string
  /** Its latest progress (only while stderr is a terminal). */
  progress: WriteProgress | undefined
  result: JobResult | undefined
  /** It reached the start barrier, or ended. */
  started: boolean
}

/** The jobs of one write, and what the main thread has learnt of them. */
export class JobGroup {
  readonly jobs: Job[] = []
  signal: StopSignal | undefined
  private goSent = false
  /** The first job that could not start, and why ("job 3 of 4 could not start: ..."), until go. */
  private startFailure: string | undefined
  /** Set when a job failed and this thread stopped the others. */
  private stoppedForFailure = false
  /** Why the agent's campaign asked the write to stop (stopOnRequest), if it did. */
  requested: string | undefined
  /** Failed jobs' results in the order they arrived: the first is the cause, the rest may be its consequences. */
  readonly failures: JobResult[] = []
  private readonly printedErr = new Set<string>()
  /** A status line is on the terminal's current line: a message starts a new line first. */
  statusShown = false
  private nextStatusMs = 0
  private readonly startedMs = performance.now()
  private readonly view: ProgressView

  constructor(
    private readonly io: WriteIo,
    private readonly count: number,
    output: WriteOutput,
  ) {
    this.view = progressView(io, output)
  }

  /** Follows a job's thread until it exits: its messages, its failure, its end. */
  follow(worker: Worker, index: number): Promise<void> {
    const job: Job = {
      worker,
      out: '',
      progress: undefined,
      result: undefined,
      started: false,
    }
    this.jobs.push(job)
    return new Promise<void>((resolve) => {
      job.worker.on('message', (message: JobMessage) => {
        if (message.kind === 'out') job.out += message.text
        else if (message.kind === 'err') this.onErr(message.text)
        else if (message.kind === 'progress') this.onProgress(job, message.progress)
        else if (message.kind === 'ready') {
          if (message.failure !== undefined) {
            this.failedToStart(job, message.failure)
            this.stopForFailure(`job ${index + 1} of ${this.count} could not start: ${message.failure}`)
          }
          this.reachedStart(job)
        } else this.finish(job, message)
      })
      job.worker.on('error', (error) =>
        this.finish(job, {
          kind: 'done',
          exitCode: exitCodes.runtime,
          error: { message: `job ${index + 1} failed: ${error.message}`, exitCode: exitCodes.runtime },
        }),
      )
      job.worker.on('exit', () => {
        this.finish(job, {
          kind: 'done',
          exitCode: exitCodes.runtime,
          error: { message: `job ${index + 1} ended without a result`, exitCode: exitCodes.runtime },
        })
        resolve()
      })
    })
  }

  /** SIGINT/SIGTERM/SIGHUP of this process, passed on to every job; returns what removes the handlers. */
  catchSignals(): () => void {
    const onSigint = (): void => this.onSignal('SIGINT')
    const onSigterm = (): void => this.onSignal('SIGTERM')
    const onSighup = (): void => this.onSignal('SIGHUP')
    process.on('SIGINT', onSigint)
    process.on('SIGTERM', onSigterm)
    process.on('SIGHUP', onSighup)
    return () => {
      process.off('SIGINT', onSigint)
      process.off('SIGTERM', onSigterm)
      process.off('SIGHUP', onSighup)
    }
  }

  private finish(job: Job, result: JobResult): void {
    if (job.result !== undefined) return
    job.result = result
    if (result.error !== undefined) this.failures.push(result)
    if (!this.goSent && result.error !== undefined) this.failedToStart(job, result.error.message)
    // A job that failed ends the write: the others stop, so every run is ended, not left to vanish.
    if (result.exitCode !== exitCodes.ok)
      this.stopForFailure(
        `job ${this.jobs.indexOf(job) + 1} of ${this.count} failed: ${result.error?.message ?? (result.exitCode === exitCodes.lossFound ? 'the storage lost an acknowledged record of its file' : `it exited ${result.exitCode}`)}`,
      )
    this.reachedStart(job)
  }

  /** The agent's campaign asked the write to stop: every job stops as on SIGTERM, its runs ending with the reason. */
  stopOnRequest(because: string): void {
    if (this.signal !== undefined || this.stoppedForFailure || this.requested !== undefined) return
    this.requested = because.slice(0, 3000)
    this.stopAll('SIGTERM', this.requested)
  }

  // The other jobs stop as on SIGTERM, and their runs end saying which job failed (no one sent a signal).
  private stopForFailure(because: string): void {
    if (this.signal !== undefined || this.stoppedForFailure) return
    this.stoppedForFailure = true
    this.stopAll('SIGTERM', because.slice(0, 3000))
  }

  private stopAll(s: StopSignal, because?: string): void {
    for (const job of this.jobs)
      if (job.result === undefined)
        job.worker.postMessage({ kind: 'signal', signal: s, ...(because === undefined ? {} : { because }) } satisfies JobCommand)
  }

  // The start barrier: go once every job has announced its runs (or ended), so that none ends or
  // closes its connection while another is still joining the group; a stop meanwhile is acted on after go.
  private reachedStart(job: Job): void {
    job.started = true
    if (this.goSent || this.jobs.length < this.count || !this.jobs.every((j) => j.started)) return
    this.goSent = true
    const go: JobCommand = { kind: 'go', ...(this.startFailure === undefined ? {} : { groupFailure: this.startFailure }) }
    for (const j of this.jobs) if (j.result === undefined) j.worker.postMessage(go)
  }

  private failedToStart(job: Job, message: string): void {
    this.startFailure ??= `job ${this.jobs.indexOf(job) + 1} of ${this.count} could not start: ${message}`
  }

  private onSignal(s: StopSignal): void {
    this.signal ??= s
    this.stopAll(s)
  }

  private showStatus(): void {
    const now = performance.now()
    if (now < this.nextStatusMs) return
    this.nextStatusMs = now + statusIntervalMs
    const seen = this.jobs.filter((j) => j.progress !== undefined).map((j) => j.progress!)
    if (seen.length === 0) return
    const steady = this.jobs.every((j) => j.progress?.steady === true)
    this.view.report(groupProgress(seen, this.count, (now - this.startedMs) / 1000, steady))
    this.statusShown = this.view.shown()
  }

  private onProgress(job: Job, progress: WriteProgress): void {
    const steadied = progress.steady && job.progress?.steady !== true
    job.progress = progress
    if (steadied) this.nextStatusMs = 0 // the 'steady' line as soon as the last job is steady
    this.showStatus()
  }

  private onErr(text: string): void {
    if (this.printedErr.has(text)) return // every job warns of the same file system
    this.printedErr.add(text)
    this.io.err(`${this.statusShown ? '\n' : ''}${text}`)
    this.statusShown = false
  }
}

/** The group's progress: the jobs' records summed, the rate since the write began, the slowest job's sync latency. */
function groupProgress(seen: readonly WriteProgress[], count: number, elapsedS: number, steady: boolean): ShownProgress {
  const waiting = seen.filter((p) => p.waitingUnrecorded !== undefined)
  return {
    elapsedS,
    written: seen.reduce((n, p) => n + p.written, 0),
    recorded: seen.reduce((n, p) => n + p.recorded, 0),
    syncP50Us: Math.max(...seen.map((p) => p.syncP50Us)),
    syncP99Us: Math.max(...seen.map((p) => p.syncP99Us)),
    waitingUnrecorded: waiting.length === 0 ? undefined : waiting.reduce((n, p) => n + p.waitingUnrecorded!, 0),
    steady,
    jobs: { count, waiting: waiting.length },
  }
}
