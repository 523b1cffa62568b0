/**
 * What the listener writes to the store: a run's announcement, its acks, steady moment and end (each
 * durable with the next journal round, store-journal.ts), and the verdicts verifiers report. Ack
 * times are stamped monotonic per run (never before the announcement or the previous ack), so a clock
 * stepped back cannot make a run's own log look implausible.
 */
import { closeSync, constants as fsConstants, openSync, renameSync } from 'node:fs'
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { syncDirectoryAsync } from '../base/directory-sync.js'
import { performance } from 'node:perf_hooks'
import type { RunMeta } from '../record/format.js'
import { epochMsSchema, type StoredVerdict } from '../protocol/messages.js'
import { describeSystemError } from '../base/errors.js'
import { logHeader, maxEndDetailBytes } from './ack-log.js'
import { seal } from './sealed-file.js'
import { cutToBytes } from './journal-rounds.js'
import { fsyncAsync, packr, writeAllSync } from './run-files.js'
import { type EndReason, type RunOrigin, endAccepted, isWritable, newRunState } from './run-state.js'
import { StoreScrub } from './store-scrub.js'
import { StorageError } from './store-state.js'

/** The store taking announcements, acks, steady moments, ends and verdicts. */
export abstract class StoreWrites extends StoreScrub {
  /**
   * Makes the run durable before the writer is told to start: its announcement (meta.msgpack's bytes)
   * goes into the next journal round, and the promise settles when that round's fdatasync returned (a
   * run exists once its announcement is durable; no fsync of its own). The fold later creates its
   * directory, log and meta.msgpack. If the round fails, the announcement is refused and the run forgotten.
   */
  async createRun(meta: RunMeta, announcedMs: number, origin: RunOrigin = {}): Promise<void> {
    if (this.runs.has(meta.runId)) throw new StorageError(`run ${meta.runId} already exists`)
    if (!epochMsSchema.safeParse(announcedMs).success) {
      // Replay and verify refuse such times; storing them would lose the run's acks later.
      throw new StorageError(
        `the listener's clock reads ${new Date(announcedMs).toISOString()}, not a real date: set it before announcing runs`,
      )
    }
    if (this.broken !== undefined) throw new StorageError(`could not store run ${meta.runId}: ${this.broken.message}`)
    // meta.msgpack's schema takes no index past this: a run stored with one could not be read back.
    if (this.lastAnnounceIndex >= Number.MAX_SAFE_INTEGER) {
      throw new StorageError(
        `could not store run ${meta.runId}: the listener's last announcement is number ${this.lastAnnounceIndex}, the highest a run can be stored with (its run files say so: damaged or crafted)`,
      )
    }
    // The order is taken now, in announcement order, whatever the clock says.
    const announceIndex = ++this.lastAnnounceIndex
    const run = newRunState(meta, announcedMs, announceIndex, origin)
    run.announcedPerfMs = performance.now()
    run.creating = true
    run.logBytes = logHeader(meta.runId).length
    run.appliedBytes = run.logBytes
    this.runs.set(meta.runId, run) // reserve the id at once: a second announcement must not race us
    const metaBytes = seal('meta', packr.pack({ meta, announcedMs, announceIndex, ...origin }))
    run.metaBytes = metaBytes.length
    await new Promise<void>((resolve, reject) => {
      run.announce = { metaBytes, resolve, reject }
      this.announceQueue.push(run)
      this.startCommit()
    })
    run.creating = false
    // Acks or an end may have come while the announcement was being stored.
    if (run.pendingEntries.length > 0) this.markDirty(run)
  }

  /**
   * The time to stamp an ack of this run with: its announcement time plus the time elapsed since, by
   * the monotonic clock. A wall clock stepped back or forward mid-run neither freezes the stamps (which
   * would make acks look implausibly fast and refused) nor makes the run's own log implausible at replay.
   */
  ackStampMs(runId: string, nowMs: number): number {
    const run = this.runs.get(runId)
    if (run === undefined) return nowMs
    const elapsedMs = run.announcedPerfMs === undefined ? nowMs - run.announcedMs : performance.now() - run.announcedPerfMs
    return Math.max(Math.round(run.announcedMs + elapsedMs), run.lastStampMs, run.announcedMs)
  }

  /** Accepts an ack in order; durable after the next group commit, announced by a 'recorded' event. */
  appendAck(runId: string, fromSeq: number, toSeq: number, receivedMs: number): void {
    const run = this.runs.get(runId)
    if (run === undefined) throw new Error(`appendAck on unknown run ${runId}`)
    if (!isWritable(run)) throw new Error(`appendAck on run ${runId}, which takes no more acks`)
    receivedMs = this.ackStampMs(runId, receivedMs)
    // Its span is made from the logged item once the round holding it is durable (writeRound), as a
    // replay makes it: acks queued between rounds share one item, and so one span window.
    if (fromSeq !== run.lastAckedSeq + 1 || toSeq < fromSeq)
      throw new Error(`ack ${fromSeq}-${toSeq} does not follow seq ${run.lastAckedSeq} of run ${runId}`)
    run.lastAckedSeq = toSeq
    run.lastStampMs = receivedMs
    this.emit('accepted', runId, fromSeq, toSeq)
    // Acks arriving while a commit runs extend one pending entry: the log grows per commit, not per ack.
    const last = run.pendingEntries.at(-1)
    if (last?.k === 'ack' && last.toSeq + 1 === fromSeq) {
      last.toSeq = toSeq
      last.lastMs = receivedMs
      this.markDirty(run)
    } else {
      this.queue(run, { k: 'ack', fromSeq, toSeq, firstMs: receivedMs, lastMs: receivedMs })
    }
  }

  /** Logs the run's end; its log is closed once that is durable. */
  endRun(runId: string, reason: EndReason, detail: string | undefined, atMs: number): void {
    const run = this.runs.get(runId)
    if (run === undefined) throw new Error(`endRun on unknown run ${runId}`)
    if (endAccepted(run)) throw new Error(`endRun on run ${runId}, which already ended`)
    // Stamped like its acks: a listener clock stepped (to 1970, or back) mid-run cannot write an end its replay refuses.
    atMs = this.ackStampMs(runId, atMs)
    // Cut so that an end alone fits a commit (maxCommitBytes); kept in memory as it is logged.
    if (detail !== undefined) detail = cutToBytes(detail, maxEndDetailBytes)
    // Answered as ended once the round holding it is durable (writeRound): a query before that would
    // show an end with fewer acks than it follows, a state no replay gives.
    run.endQueued = { reason, ...(detail === undefined ? {} : { detail }), atMs }
    run.retired = true
    if (run.failed !== undefined) return
    this.queue(run, { k: 'end', reason, ...(detail === undefined ? {} : { detail }), atMs })
  }

  /**
   * The writer says it has run long enough to be cut: the first time is logged (durable with the
   * next group commit); later ones change nothing. False if the run already had its steady moment.
   */
  recordSteady(runId: string, atMs: number): boolean {
    const run = this.runs.get(runId)
    if (run === undefined) throw new Error(`recordSteady on unknown run ${runId}`)
    if (!isWritable(run)) throw new Error(`recordSteady on run ${runId}, which takes no more entries`)
    if (run.steadyMs !== null || run.steadyQueuedMs !== undefined) return false
    atMs = this.ackStampMs(runId, atMs) // as endRun
    // Answered (runs) once the round holding it is durable, as its end.
    run.steadyQueuedMs = atMs
    this.queue(run, { k: 'steady', atMs })
    return true
  }

  /**
   * Stores the verdict a verifier reported for the run, replacing an earlier one: verdict.msgpack
   * written to a temporary file, fsynced, renamed into place and the run's directory fsynced, all
   * before the promise resolves (the verifier is told verdict-ok only then). Verdicts of one run are
   * stored one after the other. A not-judged verdict never replaces a judged one (pass, fail,
   * inconclusive): it judged no record (the file since holds a newer run, say), and a stored FAIL
   * must stay shown.
   */
  recordVerdict(runId: string, result: StoredVerdict): Promise<void> {
    const run = this.runs.get(runId)
    if (run === undefined || run.creating === true) return Promise.reject(new Error(`recordVerdict on unknown run ${runId}`))
    const previous = this.verdictWrites.get(runId) ?? Promise.resolve()
    const write = previous.then(async () => {
      if (result.verdict === 'not-judged' && run.verdict !== null && run.verdict.verdict !== 'not-judged') return
      const dir = this.runDir(runId)
      const tmpPath = join(dir, 'verdict.msgpack.tmp')
      const path = join(dir, 'verdict.msgpack')
      try {
        // A run not folded yet has no directory: made here (the fold leaves verdict.msgpack alone).
        if ((await mkdir(dir, { recursive: true })) !== undefined) await syncDirectoryAsync(join(this.dir, 'runs'))
        const file = openSync(tmpPath, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_TRUNC, 0o644)
        try {
          const sealed = seal('verdict', packr.pack({ runId, result }))
          writeAllSync(file, sealed, tmpPath)
          run.verdictBytes = sealed.length
          await fsyncAsync(file)
        } finally {
          closeSync(file)
        }
        renameSync(tmpPath, path)
        await syncDirectoryAsync(dir)
      } catch (error) {
        throw new StorageError(`could not store the verdict of run ${runId}: ${describeSystemError(error)}`)
      }
      run.verdict = result
      // Written with the next fold (a crash before it: the scrub reads verdict.msgpack again).
      this.catalogDirty = true
      this.runs.recount(run)
    })
    const settled = write.catch(() => undefined)
    this.verdictWrites.set(runId, settled)
    void settled.then(() => {
      if (this.verdictWrites.get(runId) === settled) this.verdictWrites.delete(runId)
    })
    return write
  }

  /**
   * The run's writer is gone: log a 'vanished' end unless it ended or failed, then close its log.
   * Safe to call more than once and while its announcement is still being stored.
   */
  release(runId: string, atMs: number): void {
    const run = this.runs.get(runId)
    if (run === undefined || run.retired) return
    if (!endAccepted(run) && run.failed === undefined) {
      this.endRun(runId, 'vanished', undefined, atMs)
      return
    }
    run.retired = true
  }
}
