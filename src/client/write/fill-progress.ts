/**
 * What a write says while it fills an overwrite run's new data file with zeros (createDataFile in
 * data-file.ts): a 2 GiB file takes seconds to write and fsync, and a silent writer looks hung. On a
 * terminal, a status line redrawn in place (the MiB filled, then the fsync), ending as a line that
 * says how long it took; without one, one plain line, its end written once the file is ready. A
 * group's jobs fill their files at once, so each says it in whole lines of its own (no redrawn line
 * can be shared). A region under minShownFillBytes is ready before anyone waits: nothing is said.
 */
import { performance } from 'node:perf_hooks'
import { eraseToEndOfLine } from '../../base/status-line.js'
import { formatSize } from '../../base/sizes.js'
import type { Io } from '../../base/io.js'
import type { FillStep } from './data-file.js'
import { statusIntervalMs } from './write-status.js'

/** The smallest zero-filled region the write reports on (smaller ones take well under a second). */
export const minShownFillBytes = 64 * 1024 * 1024

export interface FillReportOptions {
  readonly path: string
  readonly totalBytes: number
  /** A job of write --jobs: whole lines only. */
  readonly grouped: boolean
  /** Monotonic milliseconds (tests pass their own clock). */
  readonly nowMs?: () => number
}

const mebibyte = 1024 * 1024

/** The reporter for one file's fill, or undefined when the region is too small to report. */
export function fillReporter(io: Io, options: FillReportOptions): ((step: FillStep) => void) | undefined {
  if (options.totalBytes < minShownFillBytes) return undefined
  const nowMs = options.nowMs ?? (() => performance.now())
  const startMs = nowMs()
  const head = `preparing ${options.path}: ${formatSize(options.totalBytes)}`
  const took = (): string => `${((nowMs() - startMs) / 1000).toFixed(1)} s`
  if (io.statusTty && !options.grouped) return drawnReporter(io, head, options.totalBytes, nowMs, took)
  // Without a terminal the line is begun now and ended when the file is ready; a job's are two whole lines.
  io.err(`${head}, filling it with zeros for the overwrite pattern ...${options.grouped ? '\n' : ''}`)
  const ending = (text: string): string => (options.grouped ? `preparing ${options.path}: ${text}\n` : ` ${text}\n`)
  return (step) => {
    if (step.kind === 'done') io.err(ending(`done in ${took()}`))
    else if (step.kind === 'failed') io.err(ending(`failed after ${took()}`))
    else if (step.kind === 'stopped') io.err(ending(stoppedText(took())))
  }
}

/** How a fill a stop signal cut short ends its line: the run then ends without a record. */
function stoppedText(took: string): string {
  return `stopped after ${took} by a stop signal, the rest left unfilled (the run writes no record)`
}

/** A terminal's status line: redrawn at most every statusIntervalMs, then left as one line saying how it ended. */
function drawnReporter(io: Io, head: string, totalBytes: number, nowMs: () => number, took: () => string): (step: FillStep) => void {
  let drawnMs = -Infinity
  const draw = (text: string): void => io.err(`\r${head}, ${text}${eraseToEndOfLine}`)
  draw('filling it with zeros for the overwrite pattern')
  return (step) => {
    switch (step.kind) {
      case 'filling': {
        if (nowMs() - drawnMs < statusIntervalMs) return
        drawnMs = nowMs()
        const percent = Math.floor((step.filledBytes / totalBytes) * 100)
        draw(`filling it with zeros: ${Math.floor(step.filledBytes / mebibyte).toLocaleString('en-US')} MiB written (${percent}%)`)
        return
      }
      case 'syncing':
        draw('filled with zeros, fsync ...')
        return
      case 'done':
        draw(`filled with zeros, done in ${took()}`)
        io.err('\n')
        return
      case 'failed':
        draw(`failed after ${took()}`)
        io.err('\n')
        return
      case 'stopped':
        draw(stoppedText(took()))
        io.err('\n')
        return
    }
  }
}
