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
 * Protocol 4: a runs reply carries a run's spans only up to maxInlineSpans; a longer run's come page
 * by page (spans -> span-page, each page within the reply budget), so a week of acks is read in
 * bounded memory on both sides. A protocol 2 or 3 verifier still gets every span in one reply, up to
 * maxLegacyReplySpans in all; beyond, it is refused (protocol-version) with the reason, never sent
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
 *
 * Apart: the options and bounds (listener-options.ts); each connection (connection.ts) and what it
 * does with each message after hello (served-messages.ts), once message-rules.ts admits it; which
 * connection owns each live run (run-owners.ts); the budget of queued replies (reply-budget.ts).
 */
import { RateLimitedLog } from './rate-limited-log.js'
import { randomBytes, timingSafeEqual } from 'node:crypto'
import { EventEmitter } from 'node:events'
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net'
import { encodeFrame, frameHeaderBytes } from '../../protocol/framing.js'
import { maxListedRuns, maxWriterEnvBytes, type Claim, type Machine, type RunSummary } from '../../protocol/messages.js'
import { AckStore } from '../../store/ack-store.js'
import { Turns } from './legacy-reply.js'
import { describeSystemError } from '../../base/errors.js'
import { nativePort } from '../../native/index.js'
import type { ListenerEvent } from './events.js'
import { fitDescriptorLimit } from './descriptor-budget.js'
import { ServedSockets, defaultSendBufferBytes } from './served-socket.js'
import { TokenBackoff, defaultMaxBackoffMs } from './token-backoff.js'
import { defaultMaxRuns, defaultMaxRunsPerPeer, quotaRefusal, ReserveCheck, type QuotaLimits } from './quotas.js'
import { Connection } from './connection.js'
import type { ConnectionListener } from './connection-contracts.js'
import { ProtocolViolation } from './protocol-violation.js'
import { RunOwners } from './run-owners.js'
import { ReplyBudget } from './reply-budget.js'
import {
  defaultHelloTimeoutMs,
  defaultMaxConnections,
  defaultMaxPendingHandshakes,
  defaultMaxQueuedReplyBytes,
  defaultReplyStallMs,
  legacyRepliesAtOnce,
  listReplyBudgetBytes,
  maxLingering,
  type ListenerOptions,
} from './listener-options.js'

/** The listener could not bind its port (error: the system's, EADDRINUSE and the like); its store was opened and is closed again. */
export class BindError extends Error {
  readonly code: string | undefined
  constructor(readonly error: unknown) {
    // "listen EADDRINUSE: address already in use 0.0.0.0:5400" -> "EADDRINUSE: address already in use"
    super(
      String((error as Error).message)
        .replace(/^[a-z]+ /, '')
        .replace(/ \S+:\d+$/, ''),
    )
    this.code = (error as NodeJS.ErrnoException).code
  }
}

/** Connection log lines (refusals, bad peers) per window; the rest are counted and summarised. */
const logLinesPerWindow = 20
const logWindowMs = 10_000

export class Listener implements ConnectionListener {
  private readonly connections = new Set<Connection>()
  /** Connections that have not completed hello, oldest first (a Set iterates in insertion order). */
  readonly pending = new Set<Connection>()
  /** Connections past hello and not closed: these count against maxConnections. */
  readonly authenticated = new Set<Connection>()
  /** Closed connections still waiting for their peer to read the error frame and close. */
  lingering = 0
  /** Replies queued to all peers within maxQueuedReplyBytes (ReplyBudget). */
  private readonly replyBudget: ReplyBudget
  /** Which connection owns each live run (RunOwners). */
  private readonly runOwners: RunOwners
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
    this.replyBudget = new ReplyBudget(this.connections, this.maxQueuedReplyBytes, this.replyStallMs, this.connectionLog)
    this.runOwners = new RunOwners(
      store,
      options,
      (event) => this.emit(event),
      () => this.closing,
    )
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
    store.on('recorded', (runId, throughSeq) => listener.runOwners.ownerOf(runId)?.recorded(runId, throughSeq))
    // Damage the background check of catalogued runs finds after start, named as it is found.
    store.on('warning', (message) => listener.emit({ kind: 'warning', message, atMs: Date.now() }))
    void store.startScrub()
    store.on('failed', (runId, error) => {
      options.log?.(`plugcheck: could not record acks of run ${runId}: ${error.message}`)
      listener.runOwners.ownerOf(runId)?.storageFailed(runId, error)
    })
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject)
        server.listen(options.port, options.host, () => {
          server.off('error', reject)
          resolve()
        })
      })
    } catch (error) {
      // The port is not ours (EADDRINUSE, EACCES): what was opened is closed, the directory's lock released.
      await listener.close()
      throw new BindError(error)
    }
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

  /** Makes room for a query reply before it is queued (ReplyBudget.makeRoomForReply); false if it does not fit. */
  makeRoomForReply(reply: number, requester: Connection): boolean {
    return this.replyBudget.makeRoomForReply(reply, requester)
  }

  tokenAccepted(offered: string | undefined): boolean {
    const expected = this.options.token
    if (expected === undefined) return true
    if (offered === undefined) return false
    const a = Buffer.from(offered)
    const b = Buffer.from(expected)
    return a.length === b.length && timingSafeEqual(a, b)
  }

  // What connections ask about live runs (ConnectionListener), answered by runOwners (run-owners.ts).

  /** The run's writer is connected to this listener now. */
  isLive(runId: string): boolean {
    return this.runOwners.isLive(runId)
  }

  liveRunOn(host: string, requestedPath: string, except: Connection, groupId: string): string | undefined {
    return this.runOwners.liveRunOn(host, requestedPath, except, groupId)
  }

  mayJoinGroup(groupId: string, groupKey: string | undefined, peer: string): boolean {
    return this.runOwners.mayJoinGroup(groupId, groupKey, peer)
  }

  takeOverFromRebooted(runId: string, newBootId: string | null | undefined, newPeer: string): boolean {
    return this.runOwners.takeOverFromRebooted(runId, newBootId, newPeer)
  }

  endRunsOfEarlierBoot(machine: Machine, peer: string): string[] {
    return this.runOwners.endRunsOfEarlierBoot(machine, peer)
  }

  claimRun(meta: { runId: string; host: string; requestedPath: string }, owner: Connection): void {
    this.runOwners.claimRun(meta, owner)
  }

  releaseRun(runId: string, owner: Connection): void {
    this.runOwners.releaseRun(runId, owner)
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

  /** Every run on record (newest first, at most maxListedRuns and listReplyBudgetBytes), live marked. */
  listRuns(campaign: string | undefined): { runs: RunSummary[]; truncated: boolean } {
    const all = this.store.summaries(campaign)
    const runs: RunSummary[] = []
    let bytes = 0
    for (const summary of all) {
      if (runs.length >= maxListedRuns) break
      // Live: being written now (its writer connected and no end yet), as `runs` shows it.
      const listed = { ...summary, live: summary.end === undefined && (summary.live || this.runOwners.isLive(summary.runId)) }
      bytes += encodeFrame(listed).length
      if (bytes > listReplyBudgetBytes) break
      runs.push(listed)
    }
    return { runs, truncated: runs.length < all.length }
  }

  /** Every run on record for the path, with live = its writer's connection is open now. */
  claims(host: string, requestedPath: string): Claim[] {
    // Live too: a run whose end is not recorded yet (answered as ended only once it is).
    return this.store.claims(host, requestedPath).map((c) => ({ ...c, live: c.live || this.runOwners.isLive(c.runId) }))
  }

  /** Stops serving; every run whose writer was connected gets its 'vanished' end logged before the store closes. */
  async close(): Promise<void> {
    this.closing = true
    this.replyBudget.stop()
    this.reserveCheck.stop()
    for (const c of this.connections) {
      c.destroy()
      for (const runId of c.ownedRuns) this.releaseRun(runId, c)
    }
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
    await this.store.close()
  }
}
