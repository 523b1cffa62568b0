/**
 * One peer of the listener (listener.ts): a small state machine, hello first, then run/ack/end or
 * query. A frame that is garbage, oversized or out of order gets an error reply naming the problem
 * and the connection is closed; other connections and everything stored are unaffected.
 *
 * Messages are handled strictly in arrival order, each admitted first by the rules of
 * message-rules.ts (admit); acks are handled synchronously, a message that waits for the disk holds
 * the ones behind it. The peer is not read while its replies are not being read, nor while one of
 * its messages waits, nor until the next event-loop turn after each chunk (fairness). A refused
 * connection lingers to let its peer read the error frame, up to maxLingering and lingerMs.
 * The bytes queued for the peer, in user space and in the kernel, are sampled for the listener's
 * reply budget (Listener.makeRoomForReply).
 */
import { performance } from 'node:perf_hooks'
import { isIPv4, type Socket } from 'node:net'
import { FrameDecoder, FrameError, encodeFrame, maxClientFrameBytes } from '../../protocol/framing.js'
import { ackFastDecoder } from '../../protocol/ack-frame.js'
import {
  clientMessageSchema,
  maxPlausibleSeq,
  protocolVersion,
  type ClientMessage,
  type ErrorCode,
  type ServerMessage,
} from '../../protocol/messages.js'
import { unsentBytes } from './served-socket.js'
import { messageRules, refusalOf, refusalText, type Budget, type MessageFacts } from './message-rules.js'
import { ProtocolViolation } from './protocol-violation.js'
import type { ConnectionListener, ServedConnection } from './connection-contracts.js'
import { servedHandlers, type ServedMessage } from './served-messages.js'
import {
  maxLingering,
  maxQueriesPerConnection,
  maxRunsPerConnection,
  maxSpanPagesPerConnection,
  maxVerdictsPerConnection,
  minProtocolVersion,
} from './listener-options.js'

/** Each budget of a connection (message-rules.ts), at most. */
const budgetMaxes: Readonly<Record<Budget, number>> = {
  runs: maxRunsPerConnection,
  queries: maxQueriesPerConnection,
  verdicts: maxVerdictsPerConnection,
  'span-pages': maxSpanPagesPerConnection,
}
/** Keepalive probes start after this much silence; dead peers are found, silent writers are not cut off. */
const keepAliveDelayMs = 10_000
/** A refused connection gets this long to read its error frame before it is reset. */
const lingerMs = 5_000
/** An error frame and little else: closed plainly (the kernel delivers it), where more would be reset. */
const smallQueueBytes = 4096

export class Connection implements ServedConnection {
  /** Ack frames in the writer's exact encoding take the fast path; everything else msgpack and zod. */
  private readonly decoder = new FrameDecoder(clientMessageSchema, maxClientFrameBytes, ackFastDecoder())
  private role: 'writer' | 'verifier' | undefined
  /** The protocol the peer said hello with (replies follow what it understands). */
  protocol = minProtocolVersion
  /** Runs this connection announced and the store accepted. */
  readonly ownedRuns = new Set<string>()
  /** Groups this connection announced runs of: a group's runs all come from one `write`, on one connection. */
  readonly ownedGroups = new Set<string>()
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
    readonly listener: ConnectionListener,
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
      if (error instanceof FrameError) {
        this.reject(error.code, error.message)
        return
      }
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
  handleAcks(first: Extract<ClientMessage, { type: 'ack' }>): undefined {
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

  /** Every message after hello, by its handler (served-messages.ts). */
  private handleServed(message: ServedMessage): Promise<void> | undefined {
    const handler = servedHandlers[message.type] as (connection: ServedConnection, message: ServedMessage) => Promise<void> | undefined
    return handler(this, message)
  }

  /** A reply that may be large: queued only if it fits the budget for replies queued to all peers. */
  sendQueryReply(reply: Buffer | readonly Buffer[]): void {
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

  send(message: ServerMessage): void {
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
