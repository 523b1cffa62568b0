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
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net'
import { encodeFrame, frameHeaderBytes } from '../../protocol/framing.js'
import { maxListedRuns, maxWriterEnvBytes, type Claim, type Machine, type RunSummary } from '../../protocol/messages.js'
import { AckStore } from '../../store/ack-store.js'
import { Turns } from './legacy-reply.js'
import { describeSystemError } from '../../base/errors.js'
import { nativePort } from '../../native/index.js'
import { formatEndpoint } from '../../protocol/endpoint.js'
import { shellQuote } from '../../base/shell-quote.js'
import { printable, type ListenerEvent } from './events.js'
import { fitDescriptorLimit } from './descriptor-budget.js'
import { ServedSockets, defaultSendBufferBytes } from './served-socket.js'
import { TokenBackoff, defaultMaxBackoffMs } from './token-backoff.js'
import { defaultMaxRuns, defaultMaxRunsPerPeer, quotaRefusal, ReserveCheck, type QuotaLimits } from './quotas.js'
import { Connection } from './connection.js'
import type { ConnectionListener } from './connection-contracts.js'
import { ProtocolViolation } from './protocol-violation.js'
import { RunIndex, pathKey } from './run-index.js'
import {
  defaultHelloTimeoutMs,
  defaultMaxConnections,
  defaultMaxPendingHandshakes,
  defaultMaxQueuedReplyBytes,
  defaultReplyStallMs,
  legacyRepliesAtOnce,
  listReplyBudgetBytes,
  maxLingering,
  rebootSilenceMs,
  type ListenerOptions,
} from './listener-options.js'

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
