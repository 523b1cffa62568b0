/**
 * One job of `write --jobs N`, in a worker thread: runWrite with this job's options (its own files,
 * runs and connection), its output passed to the main thread (src/client/write/jobs.ts), which owns it.
 *
 * Every job announces its runs and creates its files, then waits at a start barrier for the main
 * thread's go, sent once every job has got that far (or ended): all of the group's announcements
 * happen while every job's connection is open, and the jobs start writing together.
 *
 * The trail (run lines; the first job adds the verify command) is written to fd 1 from here before
 * the loop starts, synchronously, as a single write does: a message to the main thread could still be queued
 * when a SIGKILL lands. Signals reach only the main thread; it passes them on, and they are emitted
 * here to the handlers writeLoop registered, again every few milliseconds until the job ends, so a
 * signal that came before the loop registered them still stops it.
 */
import { writeSync } from 'node:fs'
import { parentPort, workerData } from 'node:worker_threads'
import { PlugcheckError, exitCodes } from '../../base/errors.js'
import type { JobCommand, JobData, JobMessage } from './job-messages.js'
import { runWrite } from './writer.js'
import type { GroupStart, WriteIo } from './write-options.js'
import type { StopSignal } from './stop-signals.js'

const resendSignalMs = 20

const port = parentPort!
const { options, statusTty } = workerData as JobData
const post = (message: JobMessage): void => port.postMessage(message)

let signal: StopSignal | undefined
/** Why the main thread stopped this job when no one sent a signal (another job failed). */
let stopBecause: string | undefined
const resend = setInterval(() => {
  if (signal !== undefined) process.emit(signal as 'SIGINT')
}, resendSignalMs)
/** Resolves the start barrier once the main thread says go. */
let go: ((groupFailure: string | undefined) => void) | undefined
port.on('message', (command: JobCommand) => {
  if (command.kind === 'go') return go?.(command.groupFailure)
  if (signal === undefined) stopBecause = command.because
  signal ??= command.signal
  process.emit(signal as 'SIGINT')
})

/** The start barrier (WriteOptions.startBarrier): tell the main thread this job is ready (or why it failed to start), wait for its go. */
function startBarrier(failure: string | undefined): Promise<GroupStart> {
  return new Promise((resolve) => {
    go = (groupFailure) => resolve({ signal, groupFailure })
    post({ kind: 'ready', ...(failure === undefined ? {} : { failure }) })
  })
}

const io: WriteIo = {
  out: (text) => post({ kind: 'out', text }),
  err: (text) => post({ kind: 'err', text }),
  statusTty,
  outNow: writeAll,
  progress: (progress) => post({ kind: 'progress', progress }),
}

/** Like the CLI's trail: every byte out before returning; a reader that went away loses the trail, never the run. */
function writeAll(text: string): void {
  const bytes = Buffer.from(text)
  let done = 0
  try {
    while (done < bytes.length) done += writeSync(1, bytes, done)
  } catch {
    // EPIPE or a full non-blocking pipe: the summary still goes through the main thread
  }
}

try {
  post({ kind: 'done', exitCode: await runWrite({ ...options, startBarrier, stopBecause: () => stopBecause }, io) })
} catch (error) {
  if (error instanceof PlugcheckError) {
    post({
      kind: 'done',
      exitCode: error.exitCode,
      error: { message: error.message, exitCode: error.exitCode, ...(error.hint === undefined ? {} : { hint: error.hint }) },
    })
  } else {
    const message = `internal error: ${(error as Error)?.stack ?? String(error)}`
    post({ kind: 'done', exitCode: exitCodes.runtime, error: { message, exitCode: exitCodes.runtime } })
  }
} finally {
  clearInterval(resend)
  port.close()
}
