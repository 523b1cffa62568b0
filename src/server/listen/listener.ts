/**
 * `plugcheck listen`: a TCP server that stores acknowledged seqs durably and answers verify's queries.
 *
 * Each connection is a small state machine (hello first, then run/ack/end or query). A frame that is
 * garbage, oversized or out of order gets an error reply naming the problem and the connection is
 * closed; other connections and everything stored are unaffected.
 *
 * Bounds, so that a busy or hostile network cannot knock the listener over:
 * - connections that have not completed hello are capped on their own (maxPendingHandshakes): a new
 *   connection beyond it evicts the oldest pending one ('limit'), never the newcomer, so peers that
 *   connect and say nothing cannot keep out an honest client whose hello comes promptly;
 * - at most maxConnections connections past hello; the next hello gets an error frame ('limit') and
 *   the connection is closed (without --token anyone can say hello and hold these);
 * - at start, the descriptor limit must hold all of the above and the store (descriptor-budget.ts):
 *   a low soft limit is raised, a low hard limit refuses to start;
 * - closed connections linger (to read their error frame) only up to a bound and lingerMs; past
 *   either they are closed at once, reset when more than the error frame is queued;
 * - hello within helloTimeoutMs, or the connection is closed ('limit'); after hello a connection is
 *   never timed out for silence (a writer may sit for minutes in a slow sync): TCP keepalive finds dead
 *   peers instead;
 * - replies queued to sockets stay within maxQueuedReplyBytes, counting the kernel's send buffers
 *   (each bounded by SO_SNDBUF, served-socket.ts) with user space: before a query reply is queued,
 *   connections whose peer took nothing of a query reply for replyStallMs are dropped, then, while
 *   the reply would not fit, lingering closed ones, writers that stopped reading their 'recorded'
 *   frames as long, and the query connection holding the most bytes; dropped ones are reset;
 * - with --token, wrong tokens from one address slow that address's hellos (token-backoff.ts);
 * - a connection whose replies are not being read is not read either (pause on a full socket buffer,
 *   resume on 'drain'), nor while one of its messages waits for the disk;
 * - fairness: after each chunk a connection is paused until the next event-loop turn, so a flood of
 *   acks from a few writers cannot make one turn (and every fs callback, every other connection's
 *   announcement) wait behind megabytes of their data;
 * - per connection: maxRunsPerConnection announcements, one end per run, maxQueriesPerConnection
 *   queries, lists and campaign queries together, maxVerdictsPerConnection verdicts; a list reply
 *   holds at most maxListedRuns runs and listReplyBudgetBytes (truncated says when more are on record);
 * - new runs: bounds on runs and bytes on record per peer and in total and a free-space reserve
 *   (quotas.ts; 'limit'), and at most maxWriterEnvBytes of writer environment ('bad-frame'); a live
 *   run is never refused anything for them.
 *
 * Protocol 3 adds steady (a writer, its own run, the first one stored), verdict (a verifier, a run on
 * record, stored durably before verdict-ok; without --token only from the address the run was
 * announced from, so a stranger cannot put a verdict on your run), list and campaign-query. Protocol 2
 * clients (which never send these) are still served.
 *
 * Protocol 4: a runs reply carries a run's spans only up to inlineSpansMax; a longer run's come page
 * by page (spans -> span-page, each page within the reply budget), so a week of acks is read in
 * bounded memory on both sides. A protocol 2 or 3 verifier still gets every span in one reply, up to
 * legacyReplySpansMax in all; beyond, it is refused (protocol-version) with the reason, never sent
 * a reply it cannot take or a partial one. A hello may name the client's machine (endRunsOfEarlierBoot).
 *
 * Events (events.ts) are emitted on `events` for every connection, run announced, steady, end,
 * vanished writer and verdict, and for warnings; the campaign engine emits through emit() too.
 *
 * Ownership: a run belongs to the connection that announced it. While that connection is open and
 * no end came, the run is live: another connection may not announce a run for the same host and
 * path ('path-busy'). When the connection closes without an end, a 'vanished' end is logged. One
 * exception: a new announcement from a writer whose boot id differs from the live run's writer's
 * (both known) means that machine rebooted, though its dead connection may linger for many minutes
 * of keepalive probes: the old connection's runs end as 'vanished', it is closed and the new run taken.
 */
import { RateLimitedLog } from './rate-limited-log.js'
import { randomBytes, timingSafeEqual } from 'node:crypto'
import { EventEmitter } from 'node:events'
import { performance } from 'node:perf_hooks'
import { createServer, isIPv4, type AddressInfo, type Server, type Socket } from 'node:net'
import { FrameDecoder, FrameError, encodeFrame, frameHeaderBytes, maxClientFrameBytes } from '../../protocol/framing.js'
import { ackFastDecoder } from '../../protocol/ack-frame.js'
import {
  clientMessageSchema,
  groupRunsMax,
  inlineSpansMax,
  maxListedRuns,
  maxPlausibleSeq,
  maxSpansPerPage,
  maxStoredSpans,
  maxWriterEnvBytes,
  protocolVersion,
  type CampaignState,
  type Claim,
  type ClientMessage,
  type ErrorCode,
  type Machine,
  type RunSummary,
  type ServerMessage,
  type StoredRun,
} from '../../protocol/messages.js'
import { verdictDisagreement } from '../../protocol/verdict-rules.js'
import { AckStore } from '../../store/ack-store.js'
import { legacyRunsReply, Turns } from './legacy-reply.js'
import { describeSystemError } from '../../base/errors.js'
import { nativePort } from '../../native/index.js'
import { formatEndpoint } from '../../protocol/endpoint.js'
import { shellQuote } from '../../base/shell-quote.js'
import { printable, type ListenerEvent } from './events.js'
import { fitDescriptorLimit } from './descriptor-budget.js'
import { ServedSockets, defaultSendBufferBytes, unsentBytes } from './served-socket.js'
import { TokenBackoff, defaultMaxBackoffMs } from './token-backoff.js'
import { defaultMaxRuns, defaultMaxRunsPerPeer, quotaRefusal, ReserveCheck, type QuotaLimits, type Reserve } from './quotas.js'
import { messageRules, refusalOf, refusalText, type Budget, type MessageFacts } from './message-rules.js'

export const defaultMaxConnections = 1024
export const defaultHelloTimeoutMs = 10_000
/**
 * Connections still waiting for their hello; beyond this the oldest is evicted. As many as may be
 * served: a fleet whose writers all connect at once (after a cut) must not evict its own members,
 * whose hellos sit unread behind the burst of connections.
 */
export const defaultMaxPendingHandshakes = 1024
/** Closed connections kept open to read their error frame; beyond this they are closed at once. */
export const maxLingering = 256
/** Bytes of replies queued for all peers together, in user space and in the kernel's send buffers. */
export const defaultMaxQueuedReplyBytes = 256 * 1024 * 1024
/** A peer that took none of the bytes queued for it this long, while another reply is to be queued, is dropped. */
export const defaultReplyStallMs = 30_000
/** A write announces its whole group (jobs x methods runs) on one connection; no writer sends more. Runs hold no descriptor between commits, so the cap bounds memory only. */
export const maxRunsPerConnection = groupRunsMax
export const maxQueriesPerConnection = 100
/** An agent reports one verdict per method of a run group; no verifier comes near this. */
export const maxVerdictsPerConnection = 1024
/** The oldest protocol still served: versions 3 and 4 only added messages and fields. */
export const minProtocolVersion = 2
/** The first protocol whose verifiers read a long run's spans page by page. */
const pagedSpansProtocol = 4
/** A protocol 2 or 3 verifier gets every span of the group in one reply, up to this many (~30 MB, a day of acks). */
export const legacyReplySpansMax = 1_000_000
/** Spans inline in one protocol 4 runs reply, over all its runs (a group of groupRunsMax runs each under inlineSpansMax would be ~500,000); the other runs' spans are paged. */
export const inlineSpansPerReplyMax = inlineSpansMax
/** Protocol 2 and 3 replies built at once (each holds its ~30 MB while built); later ones wait their turn. */
export const legacyRepliesAtOnce = 2
/** Span pages per connection: every page of every run of a group (groupRunsMax runs of maxStoredSpans spans each). */
export const maxSpanPagesPerConnection = Math.ceil(maxStoredSpans / maxSpansPerPage) * groupRunsMax
/** Each budget of a connection (message-rules.ts), at most. */
const budgetMaxes: Readonly<Record<Budget, number>> = {
  runs: maxRunsPerConnection,
  queries: maxQueriesPerConnection,
  verdicts: maxVerdictsPerConnection,
  'span-pages': maxSpanPagesPerConnection,
}
/** A list reply stays under this many bytes (verdicts carry fingerprints); older runs beyond are left out. */
export const listReplyBudgetBytes = 16 * 1024 * 1024
/** Keepalive probes start after this much silence; dead peers are found, silent writers are not cut off. */
const keepAliveDelayMs = 10_000
/**
 * A live run's connection silent this long may be a machine that lost power: only then may the same
 * host's new boot end its runs. A writer sends an ack after every sync, so a live writer is never
 * silent this long, and no machine reboots faster (firmware, kernel, network, then node): a machine
 * sharing the host name (a clone) cannot end a writer that is still writing.
 */
export const rebootSilenceMs = 2_000
/** A refused connection gets this long to read its error frame before it is reset. */
const lingerMs = 5_000
/** An error frame and little else: closed plainly (the kernel delivers it), where more would be reset. */
const smallQueueBytes = 4096
/** Connection log lines (refusals, bad peers) per window; the rest are counted and summarised. */
const logLinesPerWindow = 20
const logWindowMs = 10_000

export interface ListenerOptions {
  readonly host: string
  readonly port: number
  readonly dir: string
  readonly token?: string
  readonly log?: (line: string) => void
  readonly maxConnections?: number
  readonly helloTimeoutMs?: number
  readonly maxPendingHandshakes?: number
  readonly maxQueuedReplyBytes?: number
  readonly replyStallMs?: number
  /** SO_SNDBUF of every served socket (default defaultSendBufferBytes). */
  readonly sendBufferBytes?: number
  /** The longest wait before a hello from an address that sent wrong tokens is answered (default 5 s). */
  readonly maxTokenBackoffMs?: number
  /** How long a live run's connection must have been silent before a rebooted machine may end it (default rebootSilenceMs); 0 in tests of the takeover itself. */
  readonly rebootSilenceMs?: number
  /** Spans kept per run (default maxStoredSpans); lower for tests of span merging. */
  readonly maxStoredSpans?: number
  /** The campaign, if the listener runs one: the answer to campaign-query. */
  readonly campaignState?: () => CampaignState | null
  /** Subscribed to events before the listener starts, so that the warnings at start reach it. */
  readonly onEvent?: (event: ListenerEvent) => void
  /** Bounds on runs and bytes on record (quotas.ts); absent fields take the defaults. */
  readonly quotas?: Partial<QuotaLimits>
  /** Free space of --dir below which new runs are refused (default: 1 GiB or 5 %, the smaller). */
  readonly reserve?: Reserve
}

/** Run ids by a key (a host, or a host and path); empty sets are dropped, so memory follows the live runs. */
class RunIndex {
  private readonly byKey = new Map<string, Set<string>>()
  private static readonly none: ReadonlySet<string> = new Set()

  of(key: string): ReadonlySet<string> {
    return this.byKey.get(key) ?? RunIndex.none
  }

  add(key: string, runId: string): void {
    const runIds = this.byKey.get(key)
    if (runIds === undefined) this.byKey.set(key, new Set([runId]))
    else runIds.add(runId)
  }

  delete(key: string, runId: string): void {
    const runIds = this.byKey.get(key)
    if (runIds === undefined) return
    runIds.delete(runId)
    if (runIds.size === 0) this.byKey.delete(key)
  }
}

/** A host and path as one key (a NUL appears in neither). */
function pathKey(host: string, requestedPath: string): string {
  return `${host}\0${requestedPath}`
}

class ProtocolViolation extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message)
  }
}

export class Listener {
  private readonly connections = new Set<Connection>()
  /** Connections that have not completed hello, oldest first (a Set iterates in insertion order). */
  readonly pending = new Set<Connection>()
  /** Connections past hello and not closed: these count against maxConnections. */
  readonly authenticated = new Set<Connection>()
  /** Closed connections still waiting for their peer to read the error frame and close. */
  lingering = 0
  /** Runs whose writer connection is open, by run id (including announcements still being stored). */
  private readonly owners = new Map<string, Connection>()
  /** The run ids of owners by host and path, and by host: an announcement or a hello looks at its own few, not at every live run. */
  private readonly ownedOnPath = new RunIndex()
  private readonly ownedOnHost = new RunIndex()
  /** Where each owned run writes (the store may forget a run whose announcement failed before it is released). */
  private readonly ownedWhere = new Map<string, { readonly host: string; readonly requestedPath: string }>()
  readonly listenerId = randomBytes(6).toString('hex')
  readonly maxConnections: number
  readonly helloTimeoutMs: number
  readonly maxPendingHandshakes: number
  readonly maxQueuedReplyBytes: number
  readonly replyStallMs: number
  readonly served: ServedSockets
  readonly tokenBackoff: TokenBackoff
  readonly connectionLog: RateLimitedLog
  readonly quotaLimits: QuotaLimits
  readonly reserveCheck: ReserveCheck
  readonly events = new EventEmitter<{ event: [ListenerEvent] }>()
  readonly legacyReplies = new Turns(legacyRepliesAtOnce)
  /** Set by close(): writers cut off by the shutdown are not reported as vanished. */
  private closing = false
  /**
   * Samples the connections with bytes waiting for their peer, so that a peer's progress is seen
   * when it happens, not only at the next reply (which would restart its stall clock late).
   */
  private readonly stallSampler: NodeJS.Timeout
  private readonly stallSampleMs: number
  /** When the stall clocks were last brought up to date (creditOwnBlocking). */
  private stallCheckedMs = performance.now()

  private constructor(
    readonly store: AckStore,
    private readonly server: Server,
    readonly options: ListenerOptions,
  ) {
    this.maxConnections = options.maxConnections ?? defaultMaxConnections
    this.helloTimeoutMs = options.helloTimeoutMs ?? defaultHelloTimeoutMs
    this.maxPendingHandshakes = options.maxPendingHandshakes ?? defaultMaxPendingHandshakes
    this.maxQueuedReplyBytes = options.maxQueuedReplyBytes ?? defaultMaxQueuedReplyBytes
    this.replyStallMs = options.replyStallMs ?? defaultReplyStallMs
    this.served = new ServedSockets(nativePort().servedSockets, options.sendBufferBytes ?? defaultSendBufferBytes)
    this.tokenBackoff = new TokenBackoff(options.maxTokenBackoffMs ?? defaultMaxBackoffMs)
    this.stallSampleMs = Math.max(10, Math.min(1000, this.replyStallMs / 8))
    this.stallSampler = setInterval(() => this.sampleStalls(), this.stallSampleMs)
    this.stallSampler.unref()
    this.quotaLimits = {
      maxRuns: defaultMaxRuns,
      maxRunsPerPeer: defaultMaxRunsPerPeer,
      maxStoreBytes: null,
      maxStoreBytesPerPeer: null,
      ...options.quotas,
    }
    this.reserveCheck = new ReserveCheck(options.dir, options.reserve)
    this.connectionLog = new RateLimitedLog(
      options.log,
      logLinesPerWindow,
      logWindowMs,
      (n, windowS) => `plugcheck: ${n} more connection messages in the last ${windowS} s were not shown`,
    )
    if (options.onEvent !== undefined) this.events.on('event', options.onEvent)
  }

  /** Tells every subscriber (listen's log, the events file, the campaign engine). */
  emit(event: ListenerEvent): void {
    this.events.emit('event', event)
  }

  static async start(options: ListenerOptions): Promise<Listener> {
    // Before anything is opened: a limit the bounds do not fit is raised, or the listener refuses to start.
    fitDescriptorLimit(
      {
        maxConnections: options.maxConnections ?? defaultMaxConnections,
        maxPendingHandshakes: options.maxPendingHandshakes ?? defaultMaxPendingHandshakes,
        maxLingering,
      },
      options.log,
    )
    const store = await AckStore.open(options.dir, options.maxStoredSpans === undefined ? {} : { maxSpans: options.maxStoredSpans })
    const server = createServer()
    const listener = new Listener(store, server, options)
    await listener.reserveCheck.refresh() // the first announcement is judged against a real answer
    listener.reserveCheck.watch()
    const refusesAll = listener.reserveCheck.refusesAll()
    if (refusesAll !== undefined) listener.emit({ kind: 'warning', message: `${refusesAll} (lower --reserve)`, atMs: Date.now() })
    // What replay found (torn tails, damaged verdicts, skipped announcements) is said at start.
    for (const message of store.warnings) listener.emit({ kind: 'warning', message, atMs: Date.now() })
    // Nothing on tmpfs or ramfs survives a power cut of the listener's machine: every ack it stores is lost with it.
    if (nativePort().fileSystemOf(options.dir)?.inMemory === true) {
      listener.emit({
        kind: 'warning',
        message: `the ack directory ${options.dir} is on a file system in memory (tmpfs or ramfs): the listener's acks do not survive its own restart after a power loss; give it a --dir on a disk`,
        atMs: Date.now(),
      })
    }
    server.on('connection', (socket) => listener.accept(socket))
    store.on('recorded', (runId, throughSeq) => listener.owners.get(runId)?.recorded(runId, throughSeq))
    // Damage the background check of catalogued runs finds after start, named as it is found.
    store.on('warning', (message) => listener.emit({ kind: 'warning', message, atMs: Date.now() }))
    void store.startScrub()
    store.on('failed', (runId, error) => {
      options.log?.(`plugcheck: could not record acks of run ${runId}: ${error.message}`)
      listener.owners.get(runId)?.storageFailed(runId, error)
    })
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(options.port, options.host, () => {
        server.off('error', reject)
        resolve()
      })
    })
    // accept() can fail (EMFILE, ENFILE): say so and go on serving; an unhandled 'error' would end the listener.
    server.on('error', (error) => listener.connectionLog.line(`plugcheck: could not accept a connection: ${describeSystemError(error)}`))
    return listener
  }

  address(): AddressInfo {
    return this.server.address() as AddressInfo
  }

  connectionCount(): number {
    return this.connections.size
  }

  /** Reply bytes queued for peers that have not taken them yet, in user space and in the kernel (for tests of backpressure). */
  queuedReplyBytes(): number {
    let bytes = 0
    for (const c of this.connections) bytes += c.queuedBytes()
    return bytes
  }

  private accept(socket: Socket): void {
    socket.on('error', () => socket.destroy())
    if (this.pending.size >= this.maxPendingHandshakes) {
      // Evict the oldest handshake, not the newcomer: a peer that connects and never says hello then
      // cannot keep an honest client out, whose hello arrives before many more connections do.
      const oldest = this.pending.values().next().value!
      oldest.reject('limit', `${this.maxPendingHandshakes} connections are waiting to say hello; the oldest was closed to make room`)
    }
    const connection = new Connection(this, socket)
    this.connections.add(connection)
    this.pending.add(connection)
    socket.on('close', () => {
      this.connections.delete(connection)
      this.pending.delete(connection)
      this.authenticated.delete(connection)
      for (const runId of connection.ownedRuns) this.releaseRun(runId, connection)
    })
  }

  /**
   * Makes room for a query reply of replyBytes before it is queued, so that the bytes queued for
   * peers (in user space and in the kernel's send buffers) stay within maxQueuedReplyBytes:
   * 1. a connection that was sent a query reply and whose peer took none of its queued bytes for
   *    replyStallMs is dropped (also when the reply fitted in the kernel's buffers);
   * 2. while the reply would not fit: closed connections still lingering with bytes (refused ones
   *    waiting for their peer to read the error frame), then writers stalled as long (their small
   *    'recorded' frames are exempt only while they read them), then connections that were sent a
   *    query reply, the one holding the most bytes first.
   * Dropped connections are reset, so the kernel frees their queues at once. False if the reply does
   * not fit even so.
   */
  makeRoomForReply(reply: number, requester: Connection): boolean {
    const nowMs = performance.now() // monotonic: a clock step must not drop a reader
    this.creditOwnBlocking(nowMs)
    const replyBytes = requester.replyCostBytes(reply)
    let queuedBytes = 0
    const holders: Connection[] = []
    for (const c of this.connections) {
      const bytes = c.sampleQueued(nowMs)
      queuedBytes += bytes
      if (c !== requester && bytes > 0 && !c.socket.destroyed) holders.push(c)
    }
    const drop = (c: Connection, why: string | undefined): void => {
      queuedBytes -= c.lastQueuedBytes
      if (why !== undefined) this.connectionLog.line(`plugcheck: dropped a connection from ${c.peer}: ${why}`)
      c.abort()
    }
    const stalled = (c: Connection): boolean => c.stalledSinceMs !== undefined && nowMs - c.stalledSinceMs > this.replyStallMs
    const stalledWhy = (c: Connection): string =>
      `it left a reply unread for over ${this.replyStallMs / 1000} s while others waited (${c.lastQueuedBytes} bytes queued)`
    for (const c of holders) if (!c.isClosed() && c.sentQueryReply && stalled(c)) drop(c, stalledWhy(c))
    const byBytes = (a: Connection, b: Connection): number => b.lastQueuedBytes - a.lastQueuedBytes
    const candidates: [Connection, string | undefined][] = [
      ...holders
        .filter((c) => c.isClosed())
        .sort(byBytes)
        .map((c): [Connection, undefined] => [c, undefined]),
      ...holders.filter((c) => !c.isClosed() && !c.sentQueryReply && stalled(c)).map((c): [Connection, string] => [c, stalledWhy(c)]),
      ...holders
        .filter((c) => !c.isClosed() && c.sentQueryReply)
        .sort(byBytes)
        .map((c): [Connection, string] => [
          c,
          `it does not read its replies and holds the most queued bytes (${c.lastQueuedBytes}) of the ${this.maxQueuedReplyBytes}-byte budget`,
        ]),
    ]
    for (const [c, why] of candidates) {
      if (queuedBytes + replyBytes <= this.maxQueuedReplyBytes) break
      if (c.socket.destroyed) continue
      drop(c, why)
    }
    return queuedBytes + replyBytes <= this.maxQueuedReplyBytes
  }

  private sampleStalls(): void {
    const nowMs = performance.now()
    this.creditOwnBlocking(nowMs)
    for (const c of this.connections) if (c.stalledSinceMs !== undefined) c.sampleQueued(nowMs)
  }

  /**
   * The sampler runs every stallSampleMs: a longer gap is the listener's own thread held up (a long
   * synchronous step), when it could neither feed its peers nor see them take anything. That time is
   * not held against a reader: every running stall clock moves forward by it.
   */
  private creditOwnBlocking(nowMs: number): void {
    const blockedMs = nowMs - this.stallCheckedMs - this.stallSampleMs
    this.stallCheckedMs = nowMs
    if (blockedMs <= 0) return
    for (const c of this.connections) if (c.stalledSinceMs !== undefined) c.stalledSinceMs = Math.min(nowMs, c.stalledSinceMs + blockedMs)
  }

  tokenAccepted(offered: string | undefined): boolean {
    const expected = this.options.token
    if (expected === undefined) return true
    if (offered === undefined) return false
    const a = Buffer.from(offered)
    const b = Buffer.from(expected)
    return a.length === b.length && timingSafeEqual(a, b)
  }

  /** The live run of another connection for this host and path, if any. */
  /** The run's writer is connected to this listener now. */
  isLive(runId: string): boolean {
    return this.owners.has(runId)
  }

  /** A live run on this path from another connection, not of the group being announced (whose other jobs may be live). */
  liveRunOn(host: string, requestedPath: string, except: Connection, groupId: string): string | undefined {
    for (const runId of this.ownedOnPath.of(pathKey(host, requestedPath))) {
      const owner = this.owners.get(runId)
      if (owner === undefined || owner === except) continue
      const info = this.store.runInfo(runId)
      if (
        info !== undefined &&
        !info.ended &&
        info.meta.host === host &&
        info.meta.requestedPath === requestedPath &&
        info.meta.groupId !== groupId
      )
        return runId
    }
    return undefined
  }

  /**
   * `write --jobs N` announces one group on N connections: a connection may join a group another live
   * connection announced only with that group's key and, without --token, from that connection's address.
   */
  mayJoinGroup(groupId: string, groupKey: string | undefined, peer: string): boolean {
    if (groupKey === undefined) return false
    for (const owner of new Set(this.owners.values())) {
      const key = owner.groupKeys.get(groupId)
      if (key === undefined || (this.options.token === undefined && owner.peer !== peer)) continue
      if (timingSafeEqual(Buffer.from(key), Buffer.from(groupKey))) return true // both 32 hex digits (groupKeySchema)
    }
    return false
  }

  /**
   * A new announcement for the path of a live run, from a writer whose machine has another boot id
   * than the live run's writer (both known): that machine rebooted, so the old writer is gone even if
   * its connection lingers (after a power cut TCP keepalive takes many minutes to notice). Its runs
   * are ended as vanished and its connection closed; true if so. Same or unknown boot ids: false; and
   * without --token only a writer from the live run's own address may take over.
   */
  takeOverFromRebooted(runId: string, newBootId: string | null | undefined, newPeer: string): boolean {
    const owner = this.owners.get(runId)
    const oldBootId = this.store.runInfo(runId)?.origin.writer?.bootId
    if (owner === undefined || !this.mayEndAsRebooted(owner, oldBootId, newBootId, newPeer)) return false
    this.endRebootedWriter(
      owner,
      `its writer's machine rebooted: a new run came from ${newPeer} with boot id ${newBootId}, the run's writer had ${oldBootId}`,
    )
    return true
  }

  /**
   * A client said which machine it runs on (hello's host and boot id): every live run of that host
   * whose writer had another boot id is over, whatever its connection still looks like (a machine that
   * loses power sends no FIN). So the rebooted machine's agent, or a plain verify there, finds its
   * runs ended as vanished and can report their verdicts. The same rules as a takeover by a new run.
   */
  endRunsOfEarlierBoot(machine: Machine, peer: string): string[] {
    const rebooted = new Map<Connection, string>()
    for (const runId of this.ownedOnHost.of(machine.host)) {
      const owner = this.owners.get(runId)
      if (owner === undefined) continue
      const info = this.store.runInfo(runId)
      if (info === undefined || info.ended || info.meta.host !== machine.host) continue
      const oldBootId = info.origin.writer?.bootId
      if (this.mayEndAsRebooted(owner, oldBootId, machine.bootId, peer)) rebooted.set(owner, oldBootId!)
    }
    const ended: string[] = []
    for (const [owner, oldBootId] of rebooted) {
      ended.push(
        ...this.endRebootedWriter(
          owner,
          `its writer's machine rebooted: ${machine.host} connected from ${peer} with boot id ${machine.bootId}, the run's writer had ${oldBootId}`,
        ),
      )
    }
    return ended
  }

  /**
   * Both boot ids known and different. A boot id is whatever the client says: only a holder of the
   * token, or the live run's own address, may end another connection's runs with it. Without a
   * token, a stranger must not stop a test.
   */
  private mayEndAsRebooted(
    owner: Connection,
    oldBootId: string | null | undefined,
    newBootId: string | null | undefined,
    newPeer: string,
  ): boolean {
    if (newBootId == null || oldBootId == null || newBootId === oldBootId) return false
    if (performance.now() - owner.lastDataPerfMs < (this.options.rebootSilenceMs ?? rebootSilenceMs)) return false // still writing: not the rebooted machine's
    return this.options.token !== undefined || newPeer === owner.peer
  }

  /** Ends every run of the rebooted writer's connection as vanished (detail says why) and closes it; the runs ended. */
  private endRebootedWriter(owner: Connection, rawDetail: string): string[] {
    // Host names and boot ids are whatever a client said: escaped before they reach a log line or the run's end.
    const detail = printable(rawDetail)
    const nowMs = Date.now()
    // Its runs, and announcements of it still being stored (owned, not in ownedRuns yet).
    const runIds = new Set(owner.ownedRuns)
    for (const [runId, o] of this.owners) if (o === owner) runIds.add(runId)
    const ended: string[] = []
    for (const runId of runIds) {
      const info = this.store.runInfo(runId)
      if (info !== undefined && !info.ended && this.store.isWritable(runId)) {
        this.store.endRun(runId, 'vanished', detail, nowMs)
        this.emitVanished(runId, owner, nowMs)
        ended.push(runId)
      }
      if (owner.ownedRuns.has(runId)) this.releaseRun(runId, owner)
      else this.disown(runId)
    }
    this.options.log?.(
      `plugcheck: run ${ended.join(', ') || [...runIds].join(', ')} from ${owner.peer} ended as vanished: ${detail}; closed its connection`,
    )
    owner.abort()
    return ended
  }

  /**
   * Refuses a new run over a bound ('limit': quotas.ts, naming the bound and its flag) or with a
   * writer environment over maxWriterEnvBytes ('bad-frame'). Live runs are never affected.
   */
  admitRun(peer: string, writer: object | undefined): void {
    const envBytes = writer === undefined ? 0 : encodeFrame(writer).length - frameHeaderBytes
    if (envBytes > maxWriterEnvBytes) {
      throw new ProtocolViolation(
        'bad-frame',
        `the run's writer environment (fingerprint) is ${envBytes} bytes, over the bound of ${maxWriterEnvBytes} bytes a run's announcement may carry`,
      )
    }
    const refusal = quotaRefusal(this.store.usage(), peer, this.quotaLimits) ?? this.reserveCheck.refusal()
    if (refusal === undefined) return
    this.connectionLog.line(`plugcheck: refused a run from ${peer}: ${refusal}`)
    throw new ProtocolViolation('limit', refusal)
  }

  claimRun(meta: { runId: string; host: string; requestedPath: string }, owner: Connection): void {
    this.owners.set(meta.runId, owner)
    this.ownedWhere.set(meta.runId, { host: meta.host, requestedPath: meta.requestedPath })
    this.ownedOnPath.add(pathKey(meta.host, meta.requestedPath), meta.runId)
    this.ownedOnHost.add(meta.host, meta.runId)
  }

  /** The run is no longer owned by a connection (the indexes follow owners). */
  private disown(runId: string): void {
    this.owners.delete(runId)
    const where = this.ownedWhere.get(runId)
    if (where === undefined) return
    this.ownedWhere.delete(runId)
    this.ownedOnPath.delete(pathKey(where.host, where.requestedPath), runId)
    this.ownedOnHost.delete(where.host, runId)
  }

  /** The run's writer is gone (or its announcement failed): it is no longer live. */
  releaseRun(runId: string, owner: Connection): void {
    if (this.owners.get(runId) === owner) this.disown(runId)
    const before = this.store.runInfo(runId)
    const nowMs = Date.now()
    this.store.release(runId, nowMs)
    // A run that was stored and had not ended: its writer vanished (a crash, a power cut, a lost network).
    if (before !== undefined && !before.ended && !before.creating && this.store.runInfo(runId)?.ended === true && !this.closing)
      this.emitVanished(runId, owner, nowMs)
  }

  /**
   * The event naming the verify command to run on the writer's machine after the reboot: the
   * listener's address as that writer reached it (its connection's local address), the path it wrote.
   */
  private emitVanished(runId: string, owner: Connection, atMs: number): void {
    const info = this.store.runInfo(runId)
    if (info === undefined) return
    const platform = info.origin.writer?.fingerprint?.os.platform
    const shell = platform === undefined ? nativePort().shell : platform === 'win32' ? 'windows' : 'posix'
    const server = formatEndpoint({ host: owner.localHost, port: owner.localPort })
    const token = this.options.token === undefined ? '' : " --token 'YOUR-TOKEN'"
    const verifyCommand = `plugcheck verify --server ${shellQuote(server, shell)} --file ${shellQuote(info.meta.requestedPath, shell)}${token}`
    const { meta } = info
    this.emit({
      kind: 'vanished',
      runId,
      groupId: meta.groupId,
      host: meta.host,
      path: meta.requestedPath,
      acked: this.store.lastAckedSeq(runId),
      atMs,
      verifyCommand,
    })
  }

  /** Every run on record (newest first, at most maxListedRuns and listReplyBudgetBytes), live marked. */
  listRuns(campaign: string | undefined): { runs: RunSummary[]; truncated: boolean } {
    const all = this.store.summaries(campaign)
    const runs: RunSummary[] = []
    let bytes = 0
    for (const summary of all) {
      if (runs.length >= maxListedRuns) break
      // Live: being written now (its writer connected and no end yet), as `runs` shows it.
      const listed = { ...summary, live: summary.end === undefined && (summary.live || this.owners.has(summary.runId)) }
      bytes += encodeFrame(listed).length
      if (bytes > listReplyBudgetBytes) break
      runs.push(listed)
    }
    return { runs, truncated: runs.length < all.length }
  }

  /** Every run on record for the path, with live = its writer's connection is open now. */
  claims(host: string, requestedPath: string): Claim[] {
    // Live too: a run whose end is not recorded yet (answered as ended only once it is).
    return this.store.claims(host, requestedPath).map((c) => ({ ...c, live: c.live || this.owners.has(c.runId) }))
  }

  /** Stops serving; every run whose writer was connected gets its 'vanished' end logged before the store closes. */
  async close(): Promise<void> {
    this.closing = true
    clearInterval(this.stallSampler)
    this.reserveCheck.stop()
    for (const c of this.connections) {
      c.destroy()
      for (const runId of c.ownedRuns) this.releaseRun(runId, c)
    }
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
    await this.store.close()
  }
}

class Connection {
  /** Ack frames in the writer's exact encoding take the fast path; everything else msgpack and zod. */
  private readonly decoder = new FrameDecoder(clientMessageSchema, maxClientFrameBytes, ackFastDecoder())
  private role: 'writer' | 'verifier' | undefined
  /** The protocol the peer said hello with (replies follow what it understands). */
  private protocol = minProtocolVersion
  /** Runs this connection announced and the store accepted. */
  readonly ownedRuns = new Set<string>()
  /** Groups this connection announced runs of: a group's runs all come from one `write`, on one connection. */
  private readonly ownedGroups = new Set<string>()
  /** The key each owned group was announced with (write --jobs), for the group's other jobs to prove. */
  readonly groupKeys = new Map<string, string>()
  /** What this connection spent of each budget (message-rules.ts). */
  private readonly spent: Record<Budget, number> = { runs: 0, queries: 0, verdicts: 0, 'span-pages': 0 }
  /** Messages are handled strictly in arrival order; while one waits for disk I/O the rest wait here. */
  private waiting: ClientMessage[] = []
  private waitingHead = 0
  private busy = false
  /** Paused until the next event-loop turn after a chunk (fairness). */
  private yielding = false
  /** The socket's write buffer is full: the peer is not reading our replies. */
  private writeBlocked = false
  private closed = false
  /** When (performance.now()) the peer last sent anything: a rebooted machine's hello ends only a silent writer's runs. */
  lastDataPerfMs = performance.now()
  /** What the kernel holds at most for this peer (its send buffer); 0 where unknown. */
  private readonly kernelBufferBytes: number
  /** Bytes ever queued to the socket: minus those still queued, what the peer has taken. */
  private sentBytes = 0
  /** What the peer had taken when last sampled. */
  private takenBytes = 0
  /** Queued bytes (user space and kernel) when last sampled. */
  lastQueuedBytes = 0
  /** Since when (performance.now()) the peer has taken none of the bytes queued for it; undefined while none are queued. */
  stalledSinceMs: number | undefined
  /** A query reply was queued on this connection: it may be dropped to keep replies within budget. */
  sentQueryReply = false
  readonly peer: string
  /** The listener's address and port as this peer reached it (for the verify command a vanished writer's operator runs). */
  readonly localHost: string
  readonly localPort: number
  private helloTimer: NodeJS.Timeout | undefined
  private lingerTimer: NodeJS.Timeout | undefined
  /** A hello from an address that sent wrong tokens, waiting for its turn (token-backoff.ts). */
  private backoffTimer: NodeJS.Timeout | undefined

  constructor(
    private readonly listener: Listener,
    readonly socket: Socket,
  ) {
    this.peer = socket.remoteAddress ?? 'unknown'
    // A dual-stack socket reports an IPv4 peer's connection as ::ffff:a.b.c.d: shown as the IPv4 address it is.
    const local = socket.localAddress ?? listener.options.host
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(local)
    this.localHost = mapped !== null && isIPv4(mapped[1]!) ? mapped[1]! : local
    this.localPort = socket.localPort ?? listener.options.port
    socket.setNoDelay(true)
    socket.setKeepAlive(true, keepAliveDelayMs)
    // A peer that does not read holds at most this much of the kernel's memory (the autotuned default grows to megabytes).
    this.kernelBufferBytes = listener.served.bound(socket)
    this.helloTimer = setTimeout(() => this.reject('limit', `no hello within ${listener.helloTimeoutMs / 1000} s`), listener.helloTimeoutMs)
    socket.on('data', (chunk) => this.receive(chunk))
    socket.on('drain', () => {
      this.writeBlocked = false
      this.drain()
    })
    socket.on('close', () => {
      this.closed = true
      clearTimeout(this.helloTimer)
      clearTimeout(this.lingerTimer)
      clearTimeout(this.backoffTimer)
    })
  }

  private receive(chunk: Buffer): void {
    if (this.closed) return
    this.lastDataPerfMs = performance.now()
    let messages: ClientMessage[]
    try {
      messages = this.decoder.push(chunk)
    } catch (error) {
      if (error instanceof FrameError) return this.reject(error.code, error.message)
      throw error
    }
    for (const message of messages) this.waiting.push(message)
    this.yielding = true
    this.drain()
    setImmediate(() => {
      this.yielding = false
      this.updateFlow()
    })
  }

  /** Acks, the bulk of traffic, are handled synchronously; only a run announcement waits for the disk. */
  private drain(): void {
    // A full socket buffer stops message handling too: messages already decoded wait with the socket.
    while (!this.busy && !this.writeBlocked && !this.closed && this.waitingHead < this.waiting.length) {
      const message = this.waiting[this.waitingHead++]!
      try {
        const pending = this.handle(message)
        if (pending !== undefined) {
          this.busy = true
          pending.then(
            () => {
              this.busy = false
              this.drain()
            },
            (error: unknown) => this.failed(error),
          )
        }
      } catch (error) {
        this.failed(error)
      }
    }
    if (this.waitingHead === this.waiting.length) {
      this.waiting = []
      this.waitingHead = 0
    }
    this.updateFlow()
  }

  /** Reads from the peer only while its replies are being read and no message waits for the disk. */
  private updateFlow(): void {
    if (this.closed) return
    if (this.busy || this.writeBlocked || this.yielding) this.socket.pause()
    else this.socket.resume()
  }

  private failed(error: unknown): void {
    if (error instanceof ProtocolViolation) this.reject(error.code, error.message)
    else this.reject('storage', (error as Error).message)
  }

  /**
   * An ack and the acks of the same run queued right behind it, as one batch: each is checked as if
   * alone (the run's state cannot change in between: nothing else runs), the valid ones are stored
   * as one range, and the first invalid one is refused after the ones before it are stored.
   */
  private handleAcks(first: Extract<ClientMessage, { type: 'ack' }>): undefined {
    const store = this.listener.store
    const runId = first.runId
    const info = store.runInfo(runId)! // admit(): a run this connection announced, not ended
    if (!store.isWritable(runId)) throw new ProtocolViolation('storage', `acks of run ${runId} can no longer be recorded`)
    const fromSeq = store.lastAckedSeq(runId) + 1
    const nowMs = store.ackStampMs(runId, Date.now())
    const maxSeq = maxPlausibleSeq(info.announcedMs, nowMs)
    let expected = fromSeq
    let message = first
    for (;;) {
      let violation: ProtocolViolation | undefined
      if (message.fromSeq !== expected) {
        violation = new ProtocolViolation(
          'out-of-order',
          `ack ${message.fromSeq}-${message.toSeq} of run ${runId} out of order: expected seq ${expected} next`,
        )
      } else if (message.toSeq > maxSeq) {
        violation = new ProtocolViolation(
          'bad-frame',
          `ack of seq ${message.toSeq} for run ${runId}: more records than a writer can have written since the run was announced`,
        )
      }
      if (violation !== undefined) {
        if (expected > fromSeq) store.appendAck(runId, fromSeq, expected - 1, nowMs)
        throw violation
      }
      expected = message.toSeq + 1
      const next = this.waiting[this.waitingHead]
      if (next?.type !== 'ack' || next.runId !== runId) break
      message = next
      this.waitingHead++
    }
    store.appendAck(runId, fromSeq, expected - 1, nowMs)
    return undefined
  }

  /** Returns a promise only when the message needs I/O before the next one may be handled. */
  private handle(message: ClientMessage): Promise<void> | undefined {
    const listener = this.listener
    this.admit(message)
    if (message.type === 'hello') {
      if (message.protocol < minProtocolVersion || message.protocol > protocolVersion) {
        throw new ProtocolViolation(
          'protocol-version',
          `protocol ${message.protocol} is not supported (this listener speaks ${minProtocolVersion} to ${protocolVersion})`,
        )
      }
      if (listener.options.token === undefined) return this.hello(message)
      clearTimeout(this.helloTimer) // it came; a wait for its turn is bounded by maxTokenBackoffMs
      const turn = listener.tokenBackoff.turn(this.peer, performance.now())
      if (turn.kind === 'refuse') {
        throw new ProtocolViolation(
          'limit',
          `too many wrong tokens from ${this.peer}; the next hello from this address is answered in ${Math.ceil(turn.retryAfterMs / 1000)} s at the earliest`,
        )
      }
      const checked = (): Promise<void> | undefined => {
        listener.tokenBackoff.answered(this.peer, turn, listener.tokenAccepted(message.token), performance.now())
        return this.hello(message)
      }
      if (turn.kind === 'now') return checked()
      // Busy until its turn: nothing else from this connection is read meanwhile.
      return new Promise<void>((resolve) => (this.backoffTimer = setTimeout(resolve, turn.waitMs))).then(() =>
        this.closed ? undefined : checked(),
      )
    }
    return this.handleServed(message)
  }

  /** Refuses a message the rules do not take (message-rules.ts), and charges its budget. */
  private admit(message: ClientMessage): void {
    const rule = messageRules[message.type]
    const runId = rule.run !== undefined && 'runId' in message ? message.runId : undefined
    const info = runId === undefined ? undefined : this.listener.store.runInfo(runId)
    const budget = rule.budget
    const facts: MessageFacts = {
      overBudget: budget !== undefined && this.spent[budget] >= budgetMaxes[budget],
      announcedHere: runId !== undefined && this.ownedRuns.has(runId),
      ended: info?.ended === true,
      held: info !== undefined && !info.creating,
    }
    const refusal = refusalOf(this.role ?? 'awaiting-hello', message.type, facts)
    if (refusal !== undefined) {
      throw new ProtocolViolation(
        refusal.code,
        refusalText(message.type, refusal.kind, runId ?? '', budget === undefined ? 0 : budgetMaxes[budget]),
      )
    }
    if (budget !== undefined) this.spent[budget]++
  }

  /** The token (if any) is checked here, in this hello's turn. */
  private hello(message: Extract<ClientMessage, { type: 'hello' }>): Promise<void> | undefined {
    const listener = this.listener
    if (!listener.tokenAccepted(message.token)) throw new ProtocolViolation('unauthorized', 'wrong or missing token (--token)')
    clearTimeout(this.helloTimer)
    listener.pending.delete(this)
    // First: a rebooted machine's earlier boot may hold the slot it needs (its dead connection lingers
    // for many minutes of keepalive probes after a power cut); ending those runs closes that connection.
    const ended = message.machine === undefined ? [] : listener.endRunsOfEarlierBoot(message.machine, this.peer)
    if (listener.authenticated.size >= listener.maxConnections) {
      listener.connectionLog.line(
        `plugcheck: refused a connection from ${this.peer}: ${listener.maxConnections} connections open (--max-connections)`,
      )
      this.reject(
        'limit',
        `the listener has ${listener.maxConnections} connections open, its limit (--max-connections); try again later`,
        false,
      )
      return
    }
    listener.authenticated.add(this)
    this.role = message.role
    this.protocol = message.protocol
    this.send({ type: 'welcome', protocol: protocolVersion, listenerId: listener.listenerId, nowMs: Date.now() })
    listener.emit({ kind: 'connection', peer: this.peer, atMs: Date.now() })
    // Its next message (the query of the rebooted machine's verify) waits for those ends to be
    // recorded: a run is answered as ended only then, and it must find them ended.
    return ended.length === 0 ? undefined : listener.store.endsRecorded(ended)
  }

  /** Every message after hello. */
  private handleServed(message: Exclude<ClientMessage, { type: 'hello' }>): Promise<void> | undefined {
    const listener = this.listener
    const store = listener.store
    switch (message.type) {
      case 'run': {
        const { meta } = message
        if (store.hasRun(meta.runId)) throw new ProtocolViolation('out-of-order', `run ${meta.runId} was already announced`)
        listener.admitRun(this.peer, message.writer)
        // A run joining another connection's group would be judged with that group by verify: only
        // another job of the same `write --jobs` may, with the group's key.
        if (
          !this.ownedGroups.has(meta.groupId) &&
          store.hasGroup(meta.groupId) &&
          !listener.mayJoinGroup(meta.groupId, message.groupKey, this.peer)
        ) {
          throw new ProtocolViolation('out-of-order', `group ${meta.groupId} belongs to runs announced on another connection`)
        }
        this.ownedGroups.add(meta.groupId)
        if (message.groupKey !== undefined && !this.groupKeys.has(meta.groupId)) this.groupKeys.set(meta.groupId, message.groupKey)
        let busyRunId = listener.liveRunOn(meta.host, meta.requestedPath, this, meta.groupId)
        if (busyRunId !== undefined && listener.takeOverFromRebooted(busyRunId, message.writer?.bootId, this.peer)) {
          busyRunId = listener.liveRunOn(meta.host, meta.requestedPath, this, meta.groupId)
        }
        if (busyRunId !== undefined) {
          const busy = store.runInfo(busyRunId)!
          throw new ProtocolViolation(
            'path-busy',
            `${meta.host}:${meta.requestedPath} is being written by run ${busyRunId} (${busy.meta.method}, from ${busy.origin.peer ?? 'an unknown peer'}, announced ${new Date(busy.announcedMs).toISOString()}); wait for it to end or stop it`,
          )
        }
        const runId = meta.runId
        listener.claimRun(meta, this)
        const origin = {
          peer: this.peer,
          ...(message.writer === undefined ? {} : { writer: message.writer }),
          // Only a listener with --token can vouch for who announced a run.
          authenticated: listener.options.token !== undefined,
          ...(message.campaign === undefined ? {} : { campaign: message.campaign }),
        }
        const announcedMs = Date.now()
        return store.createRun(meta, announcedMs, origin).then(
          () => {
            this.ownedRuns.add(runId)
            listener.emit({
              kind: 'run',
              runId,
              groupId: meta.groupId,
              host: meta.host,
              path: meta.requestedPath,
              method: meta.method,
              peer: this.peer,
              campaign: message.campaign ?? null,
              atMs: announcedMs,
            })
            if (this.closed) return listener.releaseRun(runId, this)
            this.send({ type: 'run-ok', runId })
          },
          (error: unknown) => {
            listener.releaseRun(runId, this)
            throw error
          },
        )
      }
      case 'ack':
        return this.handleAcks(message)
      case 'end': {
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
      case 'steady': {
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
      case 'verdict': {
        const { runId, result } = message
        const info = store.runInfo(runId)! // admit(): held and created
        // Without a token anyone can connect: only the machine that announced the run may judge it.
        if (listener.options.token === undefined && info.origin.peer !== this.peer) {
          throw new ProtocolViolation(
            'unauthorized',
            `verdict for run ${runId} from ${this.peer}, but the run was announced from ${info.origin.peer ?? 'an unknown address'}; only that address may report its verdict (start the listener with --token to accept verdicts from any holder of the token)`,
          )
        }
        // An end accepted and not recorded yet is recorded first (one round): the verdict is held
        // against the run as recorded (what a query answers), never acks not durable yet.
        return store.endsRecorded([runId]).then(() => {
          // A verdict is what verify found after the cut: a run whose writer is still connected and has
          // not ended was not cut, and a verdict now would end a campaign cycle that never happened.
          const recorded = store.recorded(runId)
          if (recorded === undefined)
            throw new ProtocolViolation('unknown-run', `verdict for run ${runId}, which the listener no longer holds`)
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
            if (!this.closed) this.send({ type: 'verdict-ok', runId })
          })
        })
      }
      case 'list': {
        const { runs, truncated } = listener.listRuns(message.campaign)
        this.sendQueryReply(encodeFrame({ type: 'run-list', runs, truncated } satisfies ServerMessage))
        return
      }
      case 'campaign-query': {
        this.send({ type: 'campaign-state', campaign: listener.options.campaignState?.() ?? null })
        return
      }
      case 'query': {
        // Async: an ended run's spans are read back from its log (ack-store.ts), a chunk at a time.
        if (this.protocol < pagedSpansProtocol) return this.legacyQuery(message)
        return this.runsToJudge(message).then((runs) => {
          const reply = encodeFrame({
            type: 'runs',
            runs,
            claims: listener.claims(message.host, message.requestedPath),
          } satisfies ServerMessage)
          this.sendQueryReply(reply)
        })
      }
      case 'spans': {
        return store.spanPageAsync(message.runId, message.afterSeq, message.throughSeq, maxSpansPerPage).then((page) => {
          if (page === undefined)
            throw new ProtocolViolation(
              'bad-frame',
              `spans of run ${message.runId} through seq ${message.throughSeq}, but its acks go to seq ${store.lastAckedSeq(message.runId)}`,
            )
          this.sendQueryReply(
            encodeFrame({ type: 'span-page', runId: message.runId, afterSeq: message.afterSeq, spans: page } satisfies ServerMessage),
          )
        })
      }
    }
  }

  /** The runs a query of protocol 4 asks for: a long run's spans are read page by page. */
  private async runsToJudge(query: Extract<ClientMessage, { type: 'query' }>): Promise<StoredRun[]> {
    return this.listener.store.queryAsync(query.host, query.requestedPath, query.runId, {
      inlineSpansMax,
      inlineSpansTotalMax: inlineSpansPerReplyMax,
    })
  }

  /**
   * A query of protocol 2 or 3: every span in one reply, which is refused past legacyReplySpansMax
   * rather than built (a week of two methods is ~400 MB) or cut short. Built a page at a time
   * (legacy-reply.ts), legacyRepliesAtOnce at once.
   */
  private async legacyQuery(query: Extract<ClientMessage, { type: 'query' }>): Promise<void> {
    const listener = this.listener
    const store = listener.store
    const heads = await store.queryAsync(query.host, query.requestedPath, query.runId, { inlineSpansMax: 0 })
    const spans = heads.reduce((sum, run) => sum + store.spanCount(run.meta.runId), 0)
    if (spans > legacyReplySpansMax) {
      throw new ProtocolViolation(
        'protocol-version',
        `the acks of ${query.host}:${query.requestedPath} are ${spans} spans, more than one reply of protocol ${this.protocol} carries (${legacyReplySpansMax}); this verifier is older than the listener: run the same plugcheck version here, whose verify reads them page by page`,
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
        () => this.closed,
      )
      if (pieces !== undefined && !this.closed) this.sendQueryReply(pieces)
    } finally {
      giveBack()
    }
  }

  /** A reply that may be large: queued only if it fits the budget for replies queued to all peers. */
  private sendQueryReply(reply: Buffer | readonly Buffer[]): void {
    const pieces = Buffer.isBuffer(reply) ? [reply] : reply
    const replyBytes = pieces.reduce((sum, piece) => sum + piece.length, 0)
    if (!this.listener.makeRoomForReply(replyBytes, this)) {
      throw new ProtocolViolation(
        'limit',
        `the reply (${replyBytes} bytes) does not fit the listener's budget for queued replies now; try again later`,
      )
    }
    this.sentQueryReply = true
    for (const piece of pieces) this.sendFrame(piece)
  }

  recorded(runId: string, throughSeq: number): void {
    if (this.ownedRuns.has(runId) && !this.closed) this.send({ type: 'recorded', runId, throughSeq })
  }

  storageFailed(runId: string, error: Error): void {
    if (this.ownedRuns.has(runId)) this.reject('storage', `the listener could not record acks of run ${runId}: ${error.message}`)
  }

  private send(message: ServerMessage): void {
    this.sendFrame(encodeFrame(message))
  }

  private sendFrame(frame: Buffer): void {
    this.sentBytes += frame.length
    if (!this.socket.write(frame)) {
      this.writeBlocked = true
      this.updateFlow()
    }
    // The stall clock starts when bytes stay queued after a send; progress is sampled when room is needed.
    if (this.stalledSinceMs === undefined) this.sampleQueued(performance.now())
  }

  /**
   * Bytes held for the peer, in user space and in the kernel's send buffer. A buffer being written
   * stays whole in user space until the kernel has taken all of it, so while some of it waits, the
   * kernel's buffer is counted full: it refills as the peer reads. The most this connection holds
   * without another reply.
   */
  queuedBytes(): number {
    return this.sampleQueued(performance.now())
  }

  /** What a reply of replyBytes adds to queuedBytes() at most: itself, and its copy in the kernel. */
  replyCostBytes(replyBytes: number): number {
    return replyBytes + (this.socket.writableLength > 0 ? 0 : Math.min(replyBytes, this.kernelBoundBytes()))
  }

  /** The kernel's send buffer, and the one segment it may take past it (at most 64 KiB). */
  private kernelBoundBytes(): number {
    return this.kernelBufferBytes === 0 ? 0 : this.kernelBufferBytes + 64 * 1024
  }

  /**
   * Samples the queued bytes and whether the peer took any since the last sample: the stall clock
   * restarts on any progress and stops when nothing is queued. So stalledSinceMs always means "the
   * peer has taken nothing since then, and bytes were waiting for it all along".
   */
  sampleQueued(nowMs: number): number {
    if (this.socket.destroyed) {
      this.stalledSinceMs = undefined
      this.lastQueuedBytes = 0
      return 0
    }
    const served = this.listener.served
    const kernelBytes = served.kernelQueuedBytes(this.socket, this.kernelBufferBytes)
    const taken = this.sentBytes - unsentBytes(this.socket) - kernelBytes
    const queued =
      this.socket.writableLength + (this.socket.writableLength > 0 ? Math.max(kernelBytes, this.kernelBoundBytes()) : kernelBytes)
    if (queued === 0) this.stalledSinceMs = undefined
    else if (this.stalledSinceMs === undefined || taken > this.takenBytes) this.stalledSinceMs = nowMs
    this.takenBytes = Math.max(this.takenBytes, taken)
    this.lastQueuedBytes = queued
    return queued
  }

  isClosed(): boolean {
    return this.closed
  }

  /** Sends an error frame and closes; the connection no longer counts as pending or served. */
  reject(code: ErrorCode, message: string, logged = true): void {
    if (this.closed) return
    if (logged) this.listener.connectionLog.line(`plugcheck: closed a connection from ${this.peer}: ${message}`)
    this.closed = true
    clearTimeout(this.helloTimer)
    this.listener.pending.delete(this)
    this.listener.authenticated.delete(this)
    this.socket.end(encodeFrame({ type: 'error', code, message }))
    if (this.listener.lingering >= maxLingering) {
      // A flood of closes must not hold descriptors: past the bound, no waiting for the peer. A plain
      // close still delivers the error frame; one with more queued (a reply never read) is reset.
      setImmediate(() => (this.queuedBytes() > smallQueueBytes ? this.abort() : this.destroy()))
      return
    }
    // Keep reading (and dropping) until the peer closes, so it sees our error frame and a FIN, not a reset.
    this.socket.resume()
    this.listener.lingering++
    this.socket.once('close', () => this.listener.lingering--)
    // Reset, not closed: a peer that never reads would leave the kernel holding its queue for minutes.
    this.lingerTimer = setTimeout(() => this.abort(), lingerMs)
  }

  destroy(): void {
    this.closed = true
    clearTimeout(this.helloTimer)
    clearTimeout(this.lingerTimer)
    clearTimeout(this.backoffTimer)
    this.listener.pending.delete(this)
    this.listener.authenticated.delete(this)
    this.socket.destroy()
  }

  /** destroy(), discarding whatever is still queued for the peer (a reset): for connections the listener gives up on. */
  abort(): void {
    this.closed = true
    this.listener.served.abort(this.socket)
    this.destroy()
  }
}
