/**
 * What the store answers: a run's state for the listener's checks, a verifier's query of runs and its
 * span pages (evicted runs read back first: store-read-back.ts), claims, and one summary per run. Every
 * count answered is of recorded acks (a state a replay of the durable journal and logs gives).
 */
import type { RunMeta } from '../record/format.js'
import { maxGroupRuns } from '../record/run-id.js'
import type { Claim, RunSummary, StoredRun } from '../protocol/messages.js'
import { SpanTable } from './span-table.js'
import { type RunOrigin, type RunState, announceOrder, endAccepted, isSettling, isWritable, storedRun, summaryOf } from './run-state.js'
import { StoreWrites } from './store-writes.js'

/** The store answering the listener, verifiers and reports. */
export abstract class StoreQueries extends StoreWrites {
  hasRun(runId: string): boolean {
    return this.runs.has(runId)
  }

  /** True when some run on record belongs to this group (runs of one `write --method a,b`). */
  hasGroup(groupId: string): boolean {
    return this.runs.runsByGroup.has(groupId)
  }

  lastAckedSeq(runId: string): number {
    return this.runs.get(runId)?.lastAckedSeq ?? 0
  }

  /** What the listener needs to judge a new announcement or an ack against a known run. */
  runInfo(
    runId: string,
  ): { meta: RunMeta; announcedMs: number; origin: RunOrigin; ended: boolean; steadyMs: number | null; creating: boolean } | undefined {
    const run = this.runs.get(runId)
    return run === undefined
      ? undefined
      : {
          meta: run.meta,
          announcedMs: run.announcedMs,
          origin: run.origin,
          ended: endAccepted(run),
          steadyMs: run.steadyMs ?? run.steadyQueuedMs ?? null,
          creating: run.creating === true,
        }
  }

  /**
   * What a query answers of the run (a state a replay of the durable journal and log gives): its
   * recorded acks, whether its end is recorded, and whether an end was accepted whose round is not
   * durable yet (settling: answered as live until then). Undefined for a run not on record.
   */
  recorded(runId: string): { throughSeq: number; ended: boolean; settling: boolean } | undefined {
    const run = this.runs.get(runId)
    return run === undefined || run.creating === true
      ? undefined
      : { throughSeq: run.durableThroughSeq, ended: run.end !== undefined, settling: isSettling(run) }
  }

  /** Resolves once none of these runs has an end accepted and not recorded (its round durable, or the journal failed). */
  async endsRecorded(runIds: readonly string[]): Promise<void> {
    const settling = (): boolean =>
      runIds.some((id) => {
        const run = this.runs.get(id)
        return run !== undefined && isSettling(run)
      })
    // The commit loop runs until nothing is queued: when it ends, each end was written or failed.
    while (settling() && this.committing !== undefined) await this.committing
  }

  /** Spans held in memory right now, in all (tests of the memory bound). */
  residentSpanCount(): number {
    let count = 0
    for (const run of this.runs.values()) count += run.spans.length
    for (const entry of this.cache.readBack.values()) count += entry.copy?.spans.length ?? 0
    return count
  }

  /** Runs the read-back cache holds right now (tests of its bound). */
  cachedRunCount(): number {
    return this.cache.readBack.size
  }

  isWritable(runId: string): boolean {
    const run = this.runs.get(runId)
    return run !== undefined && isWritable(run)
  }

  /** Run files open right now (in a fold; for tests of the descriptor bound). */
  openLogCount(): number {
    return this.foldFiles.openLogs
  }

  /**
   * The runs a verify asks for: by run id, or the latest group for this host and path. A run with more
   * than maxInlineSpans spans comes without them (spanPage reads them).
   */
  query(host: string, requestedPath: string, runId?: string, options: { maxInlineSpans?: number } = {}): StoredRun[] {
    const runs = this.queried(host, requestedPath, runId)
    // A damaged run says why first (its directory gone, its log unreadable): an evicted one is no error of the caller's then.
    const damaged = runs.find((r) => r.damaged !== undefined)
    if (damaged !== undefined) throw damaged.damaged
    if (runs.some((r) => r.evicted !== undefined)) throw new Error('query() of evicted runs: the listener uses queryAsync()')
    return runs.map((r) => storedRun(r, options.maxInlineSpans))
  }

  /**
   * query() for the listener: evicted runs' spans are read back first (without blocking the event loop).
   * maxInlineSpansTotal bounds the spans inline in the whole reply (a wide group's runs each under
   * maxInlineSpans add up): a run that would go past it comes without its spans, as a long one does.
   */
  async queryAsync(
    host: string,
    requestedPath: string,
    runId?: string,
    options: { maxInlineSpans?: number; maxInlineSpansTotal?: number } = {},
  ): Promise<StoredRun[]> {
    if (runId === undefined) await this.checkNewerThanLatest(host, requestedPath)
    const runs = this.queried(host, requestedPath, runId)
    for (const run of runs) {
      await this.checked(run)
      if (run.damaged !== undefined) throw run.damaged
    }
    // Each member's reply made in turn (its spans as an array, the only copy the reply holds): no
    // member's read-back copy is held while the next one is read back.
    const stored: StoredRun[] = []
    let inlineLeft = options.maxInlineSpansTotal ?? Number.POSITIVE_INFINITY
    for (const run of runs) {
      const inlineMax = Math.min(options.maxInlineSpans ?? Number.POSITIVE_INFINITY, inlineLeft)
      const spanCount = run.evicted?.spanCount
      // Its spans do not go in the reply (a verifier pages them): its summary says all the reply needs.
      const reply =
        spanCount !== undefined && spanCount > inlineMax ? await this.summaryReply(run) : storedRun(await this.resident(run), inlineMax)
      inlineLeft -= reply.spans.length
      stored.push(reply)
    }
    return stored
  }

  /**
   * Before the background check has passed them, the catalogued runs announced after the path's latest
   * run (by the catalog) are checked first: one of them may be that path's run by its files (a catalog
   * made by hand or by someone else can say another path), and the latest run is the one the files say.
   * The check goes newest first, so this waits for few runs; a path no catalogued run names is answered
   * from the catalog until the check has passed every run.
   */
  private async checkNewerThanLatest(host: string, requestedPath: string): Promise<void> {
    for (;;) {
      const latest = this.queried(host, requestedPath).reduce<RunState | undefined>(
        (a, b) => (a === undefined || announceOrder(b, a) > 0 ? b : a),
        undefined,
      )
      if (latest === undefined) return
      const newer = [...this.runs.values()].filter((r) => r.catalogued === true && announceOrder(r, latest) > 0)
      if (newer.length === 0) return
      for (const run of newer) await this.checked(run)
    }
  }

  /**
   * An evicted run's reply without its spans, from its summary: the spans a read-back would give end
   * at its durable seq, at its last ack's time (the summary takes the same logged items). Its writer
   * read back if trimmed.
   */
  private async summaryReply(run: RunState): Promise<StoredRun> {
    const writer =
      run.writerTrimmed === true ? (this.cache.cachedFor(run)?.writer ?? (await this.writerOf(run.meta.runId))) : run.origin.writer
    // An empty table for the fields storedRun reads; the summary's values replace them.
    const reply = storedRun({ ...run, spans: new SpanTable(), origin: writer === undefined ? run.origin : { ...run.origin, writer } })
    const lastAckMs = run.evicted?.lastAckMs
    return { ...reply, ackedThroughSeq: run.durableThroughSeq, ...(lastAckMs === undefined ? {} : { lastAckMs }) }
  }

  /** spanPage() for the listener (see queryAsync). */
  async spanPageAsync(runId: string, afterSeq: number, throughSeq: number, maxCount: number): Promise<Buffer | undefined> {
    const run = this.runs.get(runId)
    if (run === undefined || run.creating === true || throughSeq > run.lastAckedSeq) return undefined
    await this.checked(run)
    if (run.damaged !== undefined) throw run.damaged
    const view = await this.resident(run)
    if (throughSeq > view.spans.throughSeq) return undefined
    return view.spans.page(afterSeq, throughSeq, maxCount)
  }

  private queried(host: string, requestedPath: string, runId?: string): RunState[] {
    if (runId !== undefined) {
      const run = this.runs.get(runId)
      return run === undefined ? [] : [run]
    }
    let latest: RunState | undefined
    for (const run of this.runs.values()) {
      if (run.meta.host !== host || run.meta.requestedPath !== requestedPath) continue
      if (latest === undefined || announceOrder(run, latest) > 0) latest = run
    }
    if (latest === undefined) return []
    const groupId = latest.meta.groupId
    return [...this.runs.values()]
      .filter((r) => r.meta.groupId === groupId && r.meta.host === host && r.meta.requestedPath === requestedPath)
      .sort((a, b) => a.meta.method.localeCompare(b.meta.method))
      .slice(0, maxGroupRuns)
  }

  /** Spans the run holds in memory (0 for a run not on record). */
  spanCount(runId: string): number {
    const run = this.runs.get(runId)
    if (run?.evicted !== undefined) return run.evicted.spanCount ?? this.cache.cachedFor(run)?.copy?.spans.length ?? 0
    return run?.spans.length ?? 0
  }

  /**
   * A span-page of the run: the spans holding seqs afterSeq+1..throughSeq, at most maxCount (cut to
   * that range); undefined for a run not on record or throughSeq past its last acknowledged seq.
   */
  spanPage(runId: string, afterSeq: number, throughSeq: number, maxCount: number): Buffer | undefined {
    const run = this.runs.get(runId)
    if (run?.evicted !== undefined) throw new Error('spanPage() of an evicted run: the listener uses spanPageAsync()')
    if (run === undefined || run.creating === true || throughSeq > run.spans.throughSeq) return undefined
    return run.spans.page(afterSeq, throughSeq, maxCount)
  }

  /**
   * Every run on record for this host and path, newest first, at most maxGroupRuns; live here only for a
   * run whose end is accepted and not recorded yet (the listener marks the runs whose writer is connected).
   */
  claims(host: string, requestedPath: string): Claim[] {
    return [...this.runs.values()]
      .filter((r) => r.meta.host === host && r.meta.requestedPath === requestedPath)
      .sort((a, b) => announceOrder(b, a))
      .slice(0, maxGroupRuns)
      .map((r) => ({
        runId: r.meta.runId,
        groupId: r.meta.groupId,
        method: r.meta.method,
        announcedMs: r.announcedMs,
        ...(r.origin.peer === undefined ? {} : { peer: r.origin.peer }),
        ...(r.origin.authenticated === undefined ? {} : { authenticated: r.origin.authenticated }),
        // An end accepted, not recorded yet: answered as live until it is (never ended with fewer acks).
        live: isSettling(r),
        ...(r.end === undefined ? {} : { end: r.end }),
        ackedThroughSeq: r.durableThroughSeq,
      }))
  }

  /**
   * One line per run, newest first (announcement order), only the campaign's runs when one is named;
   * acks as recorded; live as in claims (the listener marks the runs whose writer is connected).
   */
  summaries(campaign?: string): RunSummary[] {
    return this.newestFirst(campaign).map(summaryOf)
  }

  /** Every run with its summary and its stored acks, newest first (for the report). */
  runRecords(): Array<{ summary: RunSummary; run: StoredRun }> {
    // A damaged run (its directory gone) has no acks to show: its warning names it instead.
    return this.newestFirst()
      .filter((r) => r.damaged === undefined)
      .map((r) => ({ summary: summaryOf(r), run: storedRun(r) }))
  }

  private newestFirst(campaign?: string): RunState[] {
    return [...this.runs.values()]
      .filter((r) => r.creating !== true && (campaign === undefined || r.origin.campaign?.name === campaign))
      .sort((a, b) => announceOrder(b, a))
  }
}
