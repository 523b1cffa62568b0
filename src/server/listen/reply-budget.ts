/**
 * The budget of reply bytes queued to all of a listener's peers together (maxQueuedReplyBytes), in
 * user space and in the kernel's send buffers: before a query reply is queued, room is made by
 * dropping the connections whose peers stopped reading (makeRoomForReply, whose comment says in
 * which order). Each connection's stall clock is sampled every stallSampleMs, and time the
 * listener's own thread was held up is not held against a reader (creditOwnBlocking).
 */
import { performance } from 'node:perf_hooks'
import type { Connection } from './connection.js'
import type { RateLimitedLog } from './rate-limited-log.js'

export class ReplyBudget {
  /**
   * Samples the connections with bytes waiting for their peer, so that a peer's progress is seen
   * when it happens, not only at the next reply (which would restart its stall clock late).
   */
  private readonly stallSampler: NodeJS.Timeout
  private readonly stallSampleMs: number
  /** When the stall clocks were last brought up to date (creditOwnBlocking). */
  private stallCheckedMs = performance.now()

  constructor(
    private readonly connections: ReadonlySet<Connection>,
    private readonly maxQueuedReplyBytes: number,
    private readonly replyStallMs: number,
    private readonly connectionLog: RateLimitedLog,
  ) {
    this.stallSampleMs = Math.max(10, Math.min(1000, this.replyStallMs / 8))
    this.stallSampler = setInterval(() => this.sampleStalls(), this.stallSampleMs)
    this.stallSampler.unref()
  }

  /** Stops sampling: the listener is closing. */
  stop(): void {
    clearInterval(this.stallSampler)
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
}
