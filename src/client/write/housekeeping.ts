/**
 * The write loop's periodic work, once per housekeeping interval and only after a record's ack has
 * left: take in the listener's "recorded" reports, let a stop signal be seen, watch the data files,
 * wait when the listener is too far behind (flow-control.ts), send 'steady' once, report the
 * progress (the status line, or the events without a terminal: write-status.ts). None of it ever
 * runs between a sync returning and its ack.
 */
import { performance } from 'node:perf_hooks'
import type { AckChannel } from './ack-channel.js'
import type { ActiveRun } from './active-run.js'
import { watchFiles, type FileFinding } from './file-watch.js'
import { everyRunRecorded, maxUnrecordedAcks, unrecordedMax, waitForListener } from './flow-control.js'
import { yieldToEventLoop, type StopSignals } from './stop-signals.js'
import type { WriteIo, WriteProgress } from './write-options.js'
import { progressOf, progressView, statusIntervalMs } from './write-status.js'
import { writeOutputOf } from './write-events.js'

const housekeepingIntervalMs = 50
const steadyAfterMs = 3000

/** The loop's clocks for its periodic work, and what that work found. */
export class Housekeeping {
  /** When the loop next stops for housekeeping (performance.now() ms). */
  nextMs: number
  /** A data file changed by someone else, or an acknowledged record the storage lost, during the run (file-watch.ts). */
  watched: FileFinding | null = null
  private nextStatusMs: number
  private steadyNow = false
  private steadySent = false
  private readonly report: (progress: WriteProgress) => void

  constructor(
    private readonly runs: ActiveRun[],
    private readonly channel: AckChannel,
    io: WriteIo,
    private readonly signals: StopSignals,
    private readonly startMs: number,
    private readonly endMs: number,
    private readonly timeoutMs: number,
    json?: boolean,
  ) {
    this.nextMs = startMs + housekeepingIntervalMs
    this.nextStatusMs = startMs + statusIntervalMs
    this.report = io.progress ?? progressView(io, writeOutputOf(json, io.statusTty)).report
  }

  /** One tick at afterMs (when the last record's ack had left): true when the loop must stop. */
  async stopsLoop(afterMs: number): Promise<boolean> {
    this.nextMs = afterMs + housekeepingIntervalMs
    this.channel.poll() // takes in "recorded" reports; throws if the listener refused or went away
    await yieldToEventLoop() // lets a SIGINT/SIGTERM/SIGHUP handler run (stop-signals.ts)
    if (this.signals.received() !== undefined) return true
    this.watched = watchFiles(this.runs)
    if (this.watched !== null) return true
    if (afterMs >= this.endMs) return true
    if (!(await this.keptUpWithListener())) return true
    this.sendSteadyOnce(afterMs)
    this.drawStatus(afterMs)
    return false
  }

  /** Flow control: waits while the listener trails by more than maxUnrecordedAcks; false when a signal came meanwhile. */
  private async keptUpWithListener(): Promise<boolean> {
    if (unrecordedMax(this.runs, this.channel) > maxUnrecordedAcks) {
      const status = (nowMs: number, n: number): void => this.showStatus(nowMs, n)
      if (!(await waitForListener(this.runs, this.channel, this.timeoutMs, this.signals.received, status))) return false
      this.nextMs = performance.now() + housekeepingIntervalMs
    }
    return true
  }

  /** Steady, once per run: the campaign's listener waits for it before it plans the cut. */
  private sendSteadyOnce(afterMs: number): void {
    if (!this.steadySent && afterMs - this.startMs >= steadyAfterMs && everyRunRecorded(this.runs, this.channel)) {
      this.steadySent = true
      for (const r of this.runs) this.channel.steady(r.meta.runId)
    }
  }

  /** The progress, every status interval, whatever stderr is: the view decides what it shows (write-status.ts). */
  private drawStatus(afterMs: number): void {
    if (afterMs >= this.nextStatusMs) {
      this.steadyNow ||= afterMs - this.startMs >= steadyAfterMs && everyRunRecorded(this.runs, this.channel)
      this.showStatus(afterMs)
    }
  }

  private showStatus(nowMs: number, waiting?: number): void {
    this.nextStatusMs = nowMs + statusIntervalMs
    this.report(progressOf(this.runs, this.channel, (nowMs - this.startMs) / 1000, waiting, this.steadyNow))
  }
}
