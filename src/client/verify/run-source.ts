/**
 * Where verify's runs come from: the listener over TCP, or a copy of its directory read offline
 * (--acks). Either answers the same query the same way, a long run's spans a page at a time.
 */
import { join } from 'node:path'
import { maxInlineSpans, maxSpansPerPage, type Claim, type StoredRun } from '../../protocol/messages.js'
import { AckStore } from '../../store/ack-store.js'
import { describeSystemError, runtimeError, usageError, PlugcheckError } from '../../base/errors.js'
import { formatEndpoint, listenerTimeoutMs } from '../../protocol/endpoint.js'
import { queryRuns, readSpanPages } from './listener-client.js'
import { ackedThroughSeqOf, pagedTimeline, spansLeftOut, timelineOfSpans, type AckTimeline, type SpanPageReader } from './ack-timeline.js'
import type { VerifyOptions } from './verify-report.js'
import type { Io } from '../../base/io.js'

/** Where runs come from: the listener over TCP, or a copy of its directory read offline. */
export interface RunSource {
  readonly name: string
  /** The listener's file holding a run's metadata, when verify reads its directory itself. */
  readonly metaFileOf?: (runId: string) => string
  find(query: { host: string; requestedPath: string; runId?: string }): Promise<{ runs: StoredRun[]; claims: Claim[] }>
  /** A found run's acks: its spans as found, or read page by page when they were left out (a long run). */
  acks(run: StoredRun): AckTimeline
}

export async function openSource(options: VerifyOptions, io: Pick<Io, 'err'>): Promise<RunSource> {
  if ('server' in options.source) {
    const server = options.source.server
    const timeoutMs = options.listenerTimeoutMs ?? listenerTimeoutMs
    return {
      name: `listener ${formatEndpoint(server)}`,
      find: (query) => queryRuns(server, options.token, query, timeoutMs),
      acks: (run) =>
        timelineOf(run, (afterSeq, onPage) =>
          readSpanPages(server, options.token, timeoutMs, { runId: run.meta.runId, afterSeq, throughSeq: ackedThroughSeqOf(run) }, onPage),
        ),
    }
  }
  const acksDir = options.source.acksDir
  let store: AckStore
  try {
    store = await AckStore.load(acksDir)
  } catch (error) {
    if (error instanceof PlugcheckError) throw error // a run's files exist but cannot be read: exit 3, naming the file
    throw usageError(
      `could not read the ack directory ${acksDir}: ${describeSystemError(error)}`,
      'give --acks the --dir of a plugcheck listener',
    )
  }
  for (const warning of store.warnings) io.err(`plugcheck: ${warning}\n`)
  return {
    name: `ack directory ${acksDir}`,
    metaFileOf: (runId) => join(acksDir, 'runs', runId, 'meta.msgpack'),
    // As the listener answers: a long run's spans stay in the store's table, read a page at a time.
    find: async (query) => ({
      runs: store.query(query.host, query.requestedPath, query.runId, { maxInlineSpans: maxInlineSpans }),
      claims: store.claims(query.host, query.requestedPath),
    }),
    acks: (run) =>
      timelineOf(run, async (startAfterSeq, onPage) => {
        const throughSeq = ackedThroughSeqOf(run)
        for (let afterSeq: number | null = startAfterSeq; afterSeq !== null && afterSeq < throughSeq; ) {
          const page = store.spanPage(run.meta.runId, afterSeq, throughSeq, maxSpansPerPage)
          if (page === undefined)
            throw runtimeError(`the ack directory ${acksDir} no longer holds the acks of run ${run.meta.runId} through seq ${throughSeq}`)
          try {
            afterSeq = onPage(page, afterSeq)
          } catch (error) {
            throw runtimeError(`the ack directory ${acksDir} holds bad spans of run ${run.meta.runId}: ${(error as Error).message}`)
          }
        }
      }),
  }
}

/** The run's spans as given, or a reader of its pages when they were left out. */
function timelineOf(run: StoredRun, read: SpanPageReader): AckTimeline {
  return spansLeftOut(run) ? pagedTimeline(run, read) : timelineOfSpans(run.meta.runId, run.spans)
}
