/**
 * What a connection does with each message after hello (servedHandlers, by type), once
 * message-rules.ts has admitted it (Connection.admit): announce a run, take its acks, end it, mark it
 * steady, store a verdict, list runs, answer a campaign query, a query and its span pages. A handler
 * returns a promise only when the next message of the connection must wait for it (disk I/O);
 * a refusal is a thrown ProtocolViolation.
 */
import { encodeFrame } from '../../protocol/framing.js'
import { maxInlineSpans, maxSpansPerPage, type ClientMessage, type ServerMessage, type StoredRun } from '../../protocol/messages.js'
import { verdictDisagreement } from '../../protocol/verdict-rules.js'
import type { ServedConnection } from './connection-contracts.js'
import { legacyRunsReply } from './legacy-reply.js'
import { maxInlineSpansPerReply, maxLegacyReplySpans } from './listener-options.js'
import { ProtocolViolation } from './protocol-violation.js'

/** The first protocol whose verifiers read a long run's spans page by page. */
const pagedSpansProtocol = 4

/** A message after hello. */
export type ServedMessage = Exclude<ClientMessage, { type: 'hello' }>
type Served<T extends ServedMessage['type']> = Extract<ServedMessage, { type: T }>
/** Returns a promise only when the message needs I/O before the next one may be handled. */
type Handler<T extends ServedMessage['type']> = (connection: ServedConnection, message: Served<T>) => Promise<void> | undefined

/** The handler of every message after hello, by its type. */
export const servedHandlers: { readonly [T in ServedMessage['type']]: Handler<T> } = {
  run: announceRun,
  ack: (connection, message) => connection.handleAcks(message),
  end: endRun,
  steady: markSteady,
  verdict: storeVerdict,
  list: listRuns,
  'campaign-query': answerCampaignQuery,
  query: answerQuery,
  spans: sendSpanPage,
}

/** A run announcement: its group, ownership of its path and the quotas checked, then stored; run-ok once that is durable. */
function announceRun(connection: ServedConnection, message: Served<'run'>): Promise<void> | undefined {
  const listener = connection.listener
  const store = listener.store
  const { meta } = message
  if (store.hasRun(meta.runId)) throw new ProtocolViolation('out-of-order', `run ${meta.runId} was already announced`)
  listener.admitRun(connection.peer, message.writer)
  // A run joining another connection's group would be judged with that group by verify: only
  // another job of the same `write --jobs` may, with the group's key.
  if (
    !connection.ownedGroups.has(meta.groupId) &&
    store.hasGroup(meta.groupId) &&
    !listener.mayJoinGroup(meta.groupId, message.groupKey, connection.peer)
  ) {
    throw new ProtocolViolation('out-of-order', `group ${meta.groupId} belongs to runs announced on another connection`)
  }
  connection.ownedGroups.add(meta.groupId)
  if (message.groupKey !== undefined && !connection.groupKeys.has(meta.groupId)) connection.groupKeys.set(meta.groupId, message.groupKey)
  let busyRunId = listener.liveRunOn(meta.host, meta.requestedPath, connection, meta.groupId)
  if (busyRunId !== undefined && listener.takeOverFromRebooted(busyRunId, message.writer?.bootId, connection.peer)) {
    busyRunId = listener.liveRunOn(meta.host, meta.requestedPath, connection, meta.groupId)
  }
  if (busyRunId !== undefined) {
    const busy = store.runInfo(busyRunId)!
    throw new ProtocolViolation(
      'path-busy',
      `${meta.host}:${meta.requestedPath} is being written by run ${busyRunId} (${busy.meta.method}, from ${busy.origin.peer ?? 'an unknown peer'}, announced ${new Date(busy.announcedMs).toISOString()}); wait for it to end or stop it`,
    )
  }
  const runId = meta.runId
  listener.claimRun(meta, connection)
  const origin = {
    peer: connection.peer,
    ...(message.writer === undefined ? {} : { writer: message.writer }),
    // Only a listener with --token can vouch for who announced a run.
    authenticated: listener.options.token !== undefined,
    ...(message.campaign === undefined ? {} : { campaign: message.campaign }),
  }
  const announcedMs = Date.now()
  return store.createRun(meta, announcedMs, origin).then(
    () => {
      connection.ownedRuns.add(runId)
      listener.emit({
        kind: 'run',
        runId,
        groupId: meta.groupId,
        host: meta.host,
        path: meta.requestedPath,
        method: meta.method,
        peer: connection.peer,
        campaign: message.campaign ?? null,
        atMs: announcedMs,
      })
      if (connection.isClosed()) return listener.releaseRun(runId, connection)
      connection.send({ type: 'run-ok', runId })
    },
    (error: unknown) => {
      listener.releaseRun(runId, connection)
      throw error
    },
  )
}

/** The writer's end of its run, recorded with the next round. */
function endRun(connection: ServedConnection, message: Served<'end'>): Promise<void> | undefined {
  const listener = connection.listener
  const store = listener.store
  const info = store.runInfo(message.runId)!
  const atMs = Date.now()
  store.endRun(message.runId, message.reason, message.detail, atMs)
  listener.emit({
    kind: 'end',
    runId: message.runId,
    groupId: info.meta.groupId,
    host: info.meta.host,
    path: info.meta.requestedPath,
    reason: message.reason,
    ...(message.detail === undefined ? {} : { detail: message.detail }),
    acked: store.lastAckedSeq(message.runId),
    durationMs: Math.max(0, atMs - info.announcedMs),
    atMs,
  })
  return
}

/** The writer's first steady of a run (a campaign's cut waits for it); later ones count for nothing. */
function markSteady(connection: ServedConnection, message: Served<'steady'>): Promise<void> | undefined {
  const listener = connection.listener
  const store = listener.store
  const info = store.runInfo(message.runId)!
  // A run whose log failed takes nothing more; its writer is being told so.
  if (!store.isWritable(message.runId)) return
  const atMs = Date.now()
  if (!store.recordSteady(message.runId, atMs)) return // only the first one counts
  listener.emit({
    kind: 'steady',
    runId: message.runId,
    groupId: info.meta.groupId,
    host: info.meta.host,
    path: info.meta.requestedPath,
    campaign: info.origin.campaign ?? null,
    acked: store.lastAckedSeq(message.runId),
    atMs,
  })
  return
}

/** A verifier's verdict on a run it may judge, held against the run as recorded, stored before verdict-ok. */
function storeVerdict(connection: ServedConnection, message: Served<'verdict'>): Promise<void> | undefined {
  const listener = connection.listener
  const store = listener.store
  const { runId, result } = message
  const info = store.runInfo(runId)! // admit(): held and created
  // Without a token anyone can connect: only the machine that announced the run may judge it.
  if (listener.options.token === undefined && info.origin.peer !== connection.peer) {
    throw new ProtocolViolation(
      'unauthorized',
      `verdict for run ${runId} from ${connection.peer}, but the run was announced from ${info.origin.peer ?? 'an unknown address'}; only that address may report its verdict (start the listener with --token to accept verdicts from any holder of the token)`,
    )
  }
  // An end accepted and not recorded yet is recorded first (one round): the verdict is held
  // against the run as recorded (what a query answers), never acks not durable yet.
  return store.endsRecorded([runId]).then(() => {
    // A verdict is what verify found after the cut: a run whose writer is still connected and has
    // not ended was not cut, and a verdict now would end a campaign cycle that never happened.
    const recorded = store.recorded(runId)
    if (recorded === undefined) throw new ProtocolViolation('unknown-run', `verdict for run ${runId}, which the listener no longer holds`)
    if ((listener.isLive(runId) && !recorded.ended) || recorded.settling) {
      throw new ProtocolViolation(
        'out-of-order',
        `verdict for run ${runId}, which is still being written (its writer is connected, or its end is not recorded yet); verify after the cut`,
      )
    }
    // Its acks are final here (ended, or its writer gone: a live run was refused above).
    const problem = verdictDisagreement(result, info.meta.method, recorded.throughSeq, recorded.ended || !listener.isLive(runId))
    if (problem !== undefined) throw new ProtocolViolation('bad-frame', `the verdict for run ${runId} ${problem}`)
    return store.recordVerdict(runId, result).then(() => {
      listener.emit({
        kind: 'verdict',
        runId,
        groupId: info.meta.groupId,
        host: info.meta.host,
        path: info.meta.requestedPath,
        campaign: info.origin.campaign ?? null,
        result,
        atMs: Date.now(),
      })
      if (!connection.isClosed()) connection.send({ type: 'verdict-ok', runId })
    })
  })
}

/** Every run on record (runs), within the reply budget. */
function listRuns(connection: ServedConnection, message: Served<'list'>): Promise<void> | undefined {
  const listener = connection.listener
  const { runs, truncated } = listener.listRuns(message.campaign)
  connection.sendQueryReply(encodeFrame({ type: 'run-list', runs, truncated } satisfies ServerMessage))
  return
}

/** The listener's campaign, if it runs one. */
function answerCampaignQuery(connection: ServedConnection, _message: Served<'campaign-query'>): Promise<void> | undefined {
  const listener = connection.listener
  connection.send({ type: 'campaign-state', campaign: listener.options.campaignState?.() ?? null })
  return
}

/** The runs verify judges for a host and path, with the claims on it: paged for protocol 4, whole for older verifiers. */
function answerQuery(connection: ServedConnection, message: Served<'query'>): Promise<void> | undefined {
  const listener = connection.listener
  // Async: an ended run's spans are read back from its log (ack-store.ts), a chunk at a time.
  if (connection.protocol < pagedSpansProtocol) return legacyQuery(connection, message)
  return runsToJudge(connection, message).then((runs) => {
    const reply = encodeFrame({
      type: 'runs',
      runs,
      claims: listener.claims(message.host, message.requestedPath),
    } satisfies ServerMessage)
    connection.sendQueryReply(reply)
  })
}

/** A page of a run's spans (protocol 4), for a run whose spans did not come inline. */
function sendSpanPage(connection: ServedConnection, message: Served<'spans'>): Promise<void> | undefined {
  const listener = connection.listener
  const store = listener.store
  return store.spanPageAsync(message.runId, message.afterSeq, message.throughSeq, maxSpansPerPage).then((page) => {
    if (page === undefined)
      throw new ProtocolViolation(
        'bad-frame',
        `spans of run ${message.runId} through seq ${message.throughSeq}, but its acks go to seq ${store.lastAckedSeq(message.runId)}`,
      )
    connection.sendQueryReply(
      encodeFrame({ type: 'span-page', runId: message.runId, afterSeq: message.afterSeq, spans: page } satisfies ServerMessage),
    )
  })
}

/** The runs a query of protocol 4 asks for: a long run's spans are read page by page. */
async function runsToJudge(connection: ServedConnection, query: Served<'query'>): Promise<StoredRun[]> {
  return connection.listener.store.queryAsync(query.host, query.requestedPath, query.runId, {
    maxInlineSpans: maxInlineSpans,
    maxInlineSpansTotal: maxInlineSpansPerReply,
  })
}

/**
 * A query of protocol 2 or 3: every span in one reply, which is refused past maxLegacyReplySpans
 * rather than built (a week of two methods is ~400 MB) or cut short. Built a page at a time
 * (legacy-reply.ts), legacyRepliesAtOnce at once.
 */
async function legacyQuery(connection: ServedConnection, query: Served<'query'>): Promise<void> {
  const listener = connection.listener
  const store = listener.store
  const heads = await store.queryAsync(query.host, query.requestedPath, query.runId, { maxInlineSpans: 0 })
  const spans = heads.reduce((sum, run) => sum + store.spanCount(run.meta.runId), 0)
  if (spans > maxLegacyReplySpans) {
    throw new ProtocolViolation(
      'protocol-version',
      `the acks of ${query.host}:${query.requestedPath} are ${spans} spans, more than one reply of protocol ${connection.protocol} carries (${maxLegacyReplySpans}); this verifier is older than the listener: run the same plugcheck version here, whose verify reads them page by page`,
    )
  }
  const giveBack = await listener.legacyReplies.take()
  try {
    const readPage = (runId: string, afterSeq: number, throughSeq: number, maxCount: number): Promise<Buffer | undefined> =>
      store.spanPageAsync(runId, afterSeq, throughSeq, maxCount)
    const pieces = await legacyRunsReply(
      heads,
      () => listener.claims(query.host, query.requestedPath),
      readPage,
      () => connection.isClosed(),
    )
    if (pieces !== undefined && !connection.isClosed()) connection.sendQueryReply(pieces)
  } finally {
    giveBack()
  }
}
