/**
 * The writer's connection to the listener, fully synchronous: the write loop never yields to the
 * event loop for acks (that would delay them by milliseconds), so acks leave through a blocking
 * send() on a socket of our own, right after the sync call returns.
 *
 * Fault model: the peer may not be a plugcheck listener at all (an HTTP server on the port), may
 * refuse us (token, a path another run is writing, its connection limit) or may vanish. Each case
 * ends in one sentence naming the cause, with the exit code of its kind: a refusal the operator can
 * fix by changing the command is a usage error (2), everything else a runtime failure (3).
 */
import { performance } from 'node:perf_hooks'
import { AckFrameEncoder, FrameDecoder, encodeFrame, maxServerFrameBytes } from '../../protocol/framing.js'
import {
  protocolVersion,
  serverMessageSchema,
  type CampaignTag,
  type EndReason,
  type ServerMessage,
  type WriterEnv,
} from '../../protocol/messages.js'
import type { RunMeta } from '../../record/format.js'
import { nativePort, type AckSocket } from '../../native/index.js'
import { PlugcheckError, describeSystemError, runtimeError } from '../../base/errors.js'
import { formatEndpoint, resolveEndpoint, type Endpoint } from '../../protocol/endpoint.js'
import {
  firstBytesKept,
  firstFrameAbsurd,
  listenerRefusal,
  noAnswer,
  notAListener,
  startsWithListenerFrame,
} from '../../protocol/listener-errors.js'
import { listenerClockOf, type TimeBase } from '../run-clock.js'
import { listenerTimeoutMs } from '../../protocol/endpoint.js'

export class AckChannel {
  private readonly decoder = new FrameDecoder(serverMessageSchema, maxServerFrameBytes)
  private readonly receiveBuffer = Buffer.alloc(64 * 1024)
  /** Until the welcome arrives we do not know the peer is a listener: keep its first bytes to quote. */
  private welcomed = false
  private firstBytes = Buffer.alloc(0)
  private readonly inbox: ServerMessage[] = []
  /** Per run: its ack frame's encoder, and the highest seq acknowledged to the listener (what it can have recorded at most). */
  private readonly acking = new Map<string, { readonly encoder: AckFrameEncoder; ackedThrough: number }>()
  /** Highest seq the listener has reported durable, per run: never beyond the run's ackedThrough (take refuses a report that is). */
  readonly recordedThrough = new Map<string, number>()
  private socket: AckSocket | undefined
  /**
   * The listener's clock from its welcome, with the monotonic time it arrived (performance.now()),
   * when it sent one that is a real time: the writer's run times are based on it (run-clock.ts).
   */
  listenerClock: TimeBase | undefined
  /** The listener sent its clock in the welcome, so it knows the end reason 'storage-lost' too (messages.ts). */
  knowsStorageLost = false

  private constructor(
    socket: AckSocket,
    readonly endpointText: string,
    readonly timeoutMs: number,
  ) {
    this.socket = socket
  }

  static async open(endpoint: Endpoint, token: string | undefined, timeoutMs = listenerTimeoutMs): Promise<AckChannel> {
    const endpointText = formatEndpoint(endpoint)
    let resolved
    try {
      resolved = await resolveEndpoint(endpoint)
    } catch (error) {
      if (error instanceof PlugcheckError) throw error // a usage error in --server (an unknown interface)
      throw runtimeError(`could not resolve listener ${endpointText}: ${describeSystemError(error)}`)
    }
    let socket: AckSocket
    try {
      socket = nativePort().connect(resolved, timeoutMs, endpointText)
    } catch (error) {
      throw runtimeError(
        `could not reach the listener at ${endpointText}: ${describeSystemError(error)}`,
        'start `plugcheck listen` on a machine that keeps power, and check host, port and firewall',
      )
    }
    const channel = new AckChannel(socket, endpointText, timeoutMs)
    try {
      channel.send({ type: 'hello', protocol: protocolVersion, role: 'writer', ...(token === undefined ? {} : { token }) })
      const welcome = channel.waitFor('welcome')
      channel.knowsStorageLost = welcome.nowMs !== undefined
      channel.listenerClock = listenerClockOf(welcome.nowMs, performance.now())
    } catch (error) {
      channel.close()
      throw error
    }
    channel.welcomed = true
    return channel
  }

  /** Announces a run (tagged with its campaign cycle, if the agent started it); returns once the listener has stored its metadata durably. */
  announce(meta: RunMeta, writer?: WriterEnv, campaign?: CampaignTag, groupKey?: string): void {
    this.send({
      type: 'run',
      meta,
      ...(writer === undefined ? {} : { writer }),
      ...(campaign === undefined ? {} : { campaign }),
      ...(groupKey === undefined ? {} : { groupKey }),
    })
    this.waitFor('run-ok')
    this.acking.set(meta.runId, { encoder: new AckFrameEncoder(meta.runId), ackedThrough: 0 })
  }

  /** Reports seqs fromSeq..toSeq as covered by a sync that returned success. Call only then. */
  ack(runId: string, fromSeq: number, toSeq: number): void {
    const run = this.acking.get(runId)!
    this.sendFrame(run.encoder.encode(fromSeq, toSeq))
    run.ackedThrough = toSeq // acks go in order: toSeq only grows
  }

  /** Tells the listener the run is steady: it has acked for a while and the listener records its acks (no answer expected). */
  steady(runId: string): void {
    this.send({ type: 'steady', runId })
  }

  end(runId: string, reason: EndReason, detail?: string): void {
    this.send({ type: 'end', runId, reason, ...(detail === undefined ? {} : { detail }) })
  }

  /** Takes in whatever the listener sent, without blocking. Throws on an error frame or a closed connection. */
  poll(): void {
    for (;;) {
      let n: number
      try {
        n = this.live().recvNow(this.receiveBuffer)
      } catch (error) {
        throw runtimeError(`lost the connection to the listener at ${this.endpointText}: ${describeSystemError(error)}`)
      }
      if (n === 0) break
      if (n < 0) throw this.closedError()
      this.take(this.receiveBuffer.subarray(0, n))
    }
  }

  /** Waits until the listener reports every given run durable through its seq; false on time-out. */
  waitRecorded(throughSeqs: ReadonlyMap<string, number>, timeoutMs: number): boolean {
    // Monotonic: a step of the wall clock neither cuts a wait short nor stretches it.
    const deadline = performance.now() + timeoutMs
    const done = (): boolean => [...throughSeqs].every(([runId, seq]) => (this.recordedThrough.get(runId) ?? 0) >= seq)
    while (!done()) {
      const leftMs = deadline - performance.now()
      if (leftMs <= 0) return false
      this.receiveFor(leftMs)
    }
    return true
  }

  /** Waits at most waitMs for the listener to say something, and takes in what it said. */
  receiveFor(waitMs: number): void {
    if (this.live().waitReadable(waitMs)) this.poll()
  }

  close(): void {
    this.socket?.close()
    this.socket = undefined
  }

  private live(): AckSocket {
    if (this.socket === undefined) throw runtimeError(`the connection to the listener at ${this.endpointText} is closed`)
    return this.socket
  }

  private send(message: object): void {
    this.sendFrame(encodeFrame(message))
  }

  private sendFrame(frame: Buffer): void {
    try {
      this.live().sendAll(frame)
    } catch (error) {
      this.poll() // the listener may have said why before closing
      throw runtimeError(`lost the connection to the listener at ${this.endpointText}: ${describeSystemError(error)}`)
    }
  }

  private waitFor<T extends ServerMessage['type']>(type: T): Extract<ServerMessage, { type: T }> {
    const deadline = performance.now() + this.timeoutMs
    for (;;) {
      const index = this.inbox.findIndex((m) => m.type === type)
      if (index >= 0) return this.inbox.splice(index, 1)[0] as Extract<ServerMessage, { type: T }>
      if (performance.now() > deadline) throw noAnswer(this.endpointText, this.timeoutMs, this.welcomed)
      this.receiveBlocking()
    }
  }

  private receiveBlocking(): void {
    let n: number
    try {
      n = this.live().recvWait(this.receiveBuffer)
    } catch (error) {
      throw runtimeError(`lost the connection to the listener at ${this.endpointText}: ${describeSystemError(error)}`)
    }
    if (n < 0) throw this.closedError()
    if (n > 0) this.take(this.receiveBuffer.subarray(0, n))
  }

  private closedError(): Error {
    if (!this.welcomed && this.firstBytes.length > 0) return this.notListener()
    return runtimeError(`the listener at ${this.endpointText} closed the connection`)
  }

  private notListener(): Error {
    return notAListener(this.endpointText, this.firstBytes)
  }

  private take(bytes: Buffer): void {
    if (!this.welcomed) {
      // Before the welcome, bytes that do not frame like a listener's answer are from a stranger:
      // say so instead of "frame of 1213486160 bytes exceeds the limit" ("HTTP" read as a length).
      if (this.firstBytes.length < firstBytesKept)
        this.firstBytes = Buffer.concat([this.firstBytes, bytes.subarray(0, firstBytesKept - this.firstBytes.length)])
      if (firstFrameAbsurd(this.firstBytes)) throw this.notListener()
    }
    let messages: ServerMessage[]
    try {
      messages = this.decoder.push(Buffer.from(bytes))
    } catch (error) {
      if (!this.welcomed && !startsWithListenerFrame(this.firstBytes)) throw this.notListener()
      throw runtimeError(`the listener at ${this.endpointText} sent a bad frame: ${(error as Error).message}`)
    }
    for (const message of messages) {
      if (!this.welcomed && message.type !== 'welcome' && message.type !== 'error') throw this.notListener()
      if (message.type === 'welcome') this.welcomed = true
      if (message.type === 'error') throw listenerRefusal(this.endpointText, message.code, message.message)
      if (message.type === 'recorded') {
        // A listener cannot have recorded a seq never sent: such a report is broken or a lie, and
        // taking it would have the summary claim records nobody acknowledged. The write fails (exit 3).
        const acked = this.acking.get(message.runId)?.ackedThrough ?? 0
        if (message.throughSeq > acked)
          throw runtimeError(
            `the listener at ${this.endpointText} reported run ${message.runId} recorded through seq ${message.throughSeq}, beyond the last seq acknowledged (${acked}): a protocol violation`,
            'the listener is broken or not plugcheck: what it holds cannot be trusted; use another listener',
          )
        this.recordedThrough.set(message.runId, Math.max(this.recordedThrough.get(message.runId) ?? 0, message.throughSeq))
      } else {
        this.inbox.push(message)
      }
    }
  }
}
