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
  verifyCommand,
  verifyLine,
  type WriteIo,
  type WriteOptions,
} from './write-options.js'
import { summaryEvent, summaryRunsOf, writeOutputOf } from './write-events.js'
import { stoppedLine } from './stop-signals.js'
import { runWrite } from './writer.js'
import { requestedStopLine } from './run-end.js'
import { JobGroup } from './job-group.js'
import type { JobData } from './job-messages.js'

/** How often the group's thread asks whether the agent's campaign wants the write stopped (WriteOptions.stopRequest). */
const stopRequestPollMs = 100

/** `plugcheck write`: one job in this process, or --jobs N jobs in worker threads (runJobs). */
export function writeCommand(options: WriteOptions, io: WriteIo): Promise<number> {
  return (options.jobs ?? 1) > 1 && options.job === undefined ? runJobs(options, io) : runWrite(options, io)
}

/** The group's checks, its jobs started in their threads and followed until every one has ended, then the group's result. */
export async function runJobs(options: WriteOptions, io: WriteIo): Promise<number> {
  const count = options.jobs ?? 1
  validateWriteOptions(options)
  await checkGroupBeforeStart(options)

  const groupId = randomBytes(8).toString('hex')
  const groupKey = randomBytes(16).toString('hex')
  const group = new JobGroup(io, count, writeOutputOf(options.json, io.statusTty))
  const releaseSignals = group.catchSignals()
  // The agent's campaign asks this thread to stop the group (a function cannot cross into a job's thread).
  const { stopRequest, ...jobOptions } = options
  const watch =
    stopRequest === undefined
      ? undefined
      : setInterval(() => {
          const reason = stopRequest()
          if (reason !== undefined) group.stopOnRequest(reason)
        }, stopRequestPollMs)
  try {
    const ended = Array.from({ length: count }, (_, index) => {
      const data: JobData = { options: { ...jobOptions, job: { index, count, groupId, groupKey } }, statusTty: io.statusTty }
      return group.follow(startModuleWorker(import.meta.url, 'job-worker', data), index)
    })
    await Promise.all(ended)
  } finally {
    clearInterval(watch)
    releaseSignals()
  }
  if (group.statusShown) io.err('\n')
  return groupResult(options, io, group)
}

/** What is checked once for the whole group, before any job announces anything. */
async function checkGroupBeforeStart(options: WriteOptions): Promise<void> {
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
}

/**
 * How the whole group ended, for its verify line: stopped (a signal, or its campaign's request) or
 * ended by --duration when no job failed or found a loss; else undefined (the line for after a cut).
 */
function groupEndKind(group: JobGroup): 'interrupted' | 'duration' | undefined {
  const codes = group.jobs.map((j) => j.result?.exitCode)
  if (group.failures.length > 0 || codes.includes(exitCodes.lossFound)) return undefined
  if (group.signal !== undefined || group.requested !== undefined) return 'interrupted'
  return codes.every((c) => c === exitCodes.ok) ? 'duration' : undefined
}

/** Every job's summary in job order with one verify command, then the write's exit code or error. */
function groupResult(options: WriteOptions, io: WriteIo, group: JobGroup): number {
  const { jobs, failures, signal } = group
  // --json: one summary event of every job's runs, in job order (each job's out is its own summary event).
  if (options.json)
    io.out(
      summaryEvent(
        jobs.flatMap((j) => summaryRunsOf(j.out)),
        verifyCommand(options),
      ),
    )
  else io.out(`${jobs.map((j) => j.out).join('')}${verifyLine(options, groupEndKind(group))}\n`)
  // The first job that failed is the write's error; else a job's storage loss (1); else every job got the same signal (130, 143, 129); else 0.
  const cause = failures[0]?.error
  if (cause !== undefined) throw new PlugcheckError(cause.message, cause.exitCode, cause.hint)
  if (group.requested !== undefined && signal === undefined) {
    io.err(requestedStopLine(group.requested))
    return exitCodes.runtime
  }
  // A job that found the storage losing an acknowledged record (exit 1) decides over the jobs it stopped.
  const codes = jobs.map((j) => j.result!.exitCode)
  const code = codes.includes(exitCodes.lossFound) ? exitCodes.lossFound : (codes.find((c) => c !== exitCodes.ok) ?? exitCodes.ok)
  if (signal !== undefined && code !== exitCodes.ok) io.err(stoppedLine(signal))
  return code
}
