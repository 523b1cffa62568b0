/**
 * Synthetic writers for the fleet benchmarks: one TCP connection speaking the real wire protocol
 * (hello -> welcome, run -> run-ok, ack* -> recorded*, end), with every wait bounded. Latency of an
 * ack is measured on this side, one clock: from the socket write that carried it to the 'recorded'
 * reply that covers it (what a writer learns through AckChannel.recordedThrough).
 *
 * Assumes nothing about the listener's store: only what the protocol promises.
 */
import { randomBytes } from 'node:crypto'
import { connect, type Socket } from 'node:net'
import { AckFrameEncoder, FrameDecoder, encodeFrame, maxServerFrameBytes } from '../src/protocol/framing.js'
import { protocolVersion, serverMessageSchema, type ServerMessage } from '../src/protocol/messages.js'
import type { RunMeta } from '../src/record/format.js'

/** Runs one connection may announce (the listener's maxRunsPerConnection at 52d2547). */
export const runsPerConnection = 64

interface RunState {
  readonly encoder: AckFrameEncoder
  sentSeq: number
  recordedSeq: number
  /** [seq, send time in ns] of acks not yet covered by a 'recorded', oldest first. */
  readonly pending: Array<[number, number]>
  runOk: (() => void) | undefined
}

/** Where per-ack latencies go (microseconds); shared by the connections of one phase. */
export class LatencySink {
  readonly samplesUs: number[] = []
  add(us: number): void {
    this.samplesUs.push(us)
  }
}

export class FleetConnection {
  private readonly decoder = new FrameDecoder(serverMessageSchema, maxServerFrameBytes)
  private readonly runs = new Map<string, RunState>()
  private welcome: (() => void) | undefined
  private recordedWaiters: Array<() => void> = []
  error: string | undefined

  private constructor(
    readonly socket: Socket,
    private readonly sink: LatencySink,
  ) {
    socket.setNoDelay(true)
    socket.on('data', (chunk) => {
      let messages: ServerMessage[]
      try {
        messages = this.decoder.push(chunk)
      } catch (error) {
        return this.fail(`bad frame from the listener: ${(error as Error).message}`)
      }
      for (const m of messages) this.take(m)
    })
    socket.on('close', () => this.fail('the listener closed the connection'))
    socket.on('error', (error) => this.fail(error.message))
  }

  /** Connects and says hello; throws when no welcome comes within timeoutMs. */
  static async open(port: number, sink: LatencySink, timeoutMs: number): Promise<FleetConnection> {
    const socket = connect({ host: '127.0.0.1', port })
    const connection = new FleetConnection(socket, sink)
    const welcomed = new Promise<void>((resolve) => (connection.welcome = resolve))
    socket.write(encodeFrame({ type: 'hello', protocol: protocolVersion, role: 'writer' }))
    await bounded(welcomed, timeoutMs, 'no welcome')
    if (connection.error !== undefined) throw new Error(connection.error)
    return connection
  }

  /** Announces a run (the same metadata a real append-pattern writer sends); resolves at run-ok. */
  async announce(path: string, timeoutMs: number): Promise<string> {
    const runId = randomBytes(8).toString('hex')
    const state: RunState = { encoder: new AckFrameEncoder(runId), sentSeq: 0, recordedSeq: 0, pending: [], runOk: undefined }
    this.runs.set(runId, state)
    const ok = new Promise<void>((resolve) => (state.runOk = resolve))
    const meta: RunMeta = {
      runId,
      groupId: runId,
      method: 'fdatasync',
      direct: false,
      pattern: 'append',
      recordSizeBytes: 8192,
      slotCount: 1 << 30,
      host: 'fleet',
      path,
      requestedPath: path,
      createdMs: Date.now(),
    }
    this.socket.write(encodeFrame({ type: 'run', meta, writer: { bootId: null, fingerprint: null } }))
    await bounded(ok, timeoutMs, `no run-ok for ${path}`)
    if (this.error !== undefined) throw new Error(this.error)
    return runId
  }

  /** Sends the run's next seq as one ack frame (one socket write, as a real writer does per record). */
  ack(runId: string): void {
    const run = this.runs.get(runId)!
    const seq = ++run.sentSeq
    run.pending.push([seq, Number(process.hrtime.bigint())])
    this.socket.write(Buffer.from(run.encoder.encode(seq, seq)))
  }

  /** The last seq sent for the run. */
  sentSeq(runId: string): number {
    return this.runs.get(runId)!.sentSeq
  }

  end(runId: string): void {
    this.socket.write(encodeFrame({ type: 'end', runId, reason: 'duration' }))
  }

  /** Acks sent and not yet reported recorded, over every run of this connection. */
  unrecorded(): number {
    let n = 0
    for (const run of this.runs.values()) n += run.sentSeq - run.recordedSeq
    return n
  }

  /** Resolves once every sent ack is recorded, or the connection failed, or timeoutMs passed. */
  async drain(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs
    while (this.error === undefined && this.unrecorded() > 0 && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(1, deadline - Date.now()))
        this.recordedWaiters.push(() => {
          clearTimeout(timer)
          resolve()
        })
      })
    }
  }

  close(): void {
    this.socket.removeAllListeners('close')
    this.socket.destroy()
  }

  private take(m: ServerMessage): void {
    if (m.type === 'error') {
      this.fail(`${m.code}: ${m.message}`)
      return
    }
    if (m.type === 'welcome') {
      this.welcome?.()
      return
    }
    if (m.type === 'run-ok') {
      this.runs.get(m.runId)?.runOk?.()
      return
    }
    if (m.type !== 'recorded') return
    const run = this.runs.get(m.runId)
    if (run === undefined) return
    const nowNs = Number(process.hrtime.bigint())
    run.recordedSeq = Math.max(run.recordedSeq, m.throughSeq)
    while (run.pending.length > 0 && run.pending[0]![0] <= run.recordedSeq) this.sink.add((nowNs - run.pending.shift()![1]) / 1000)
    this.wakeRecorded()
  }

  private wakeRecorded(): void {
    const waiters = this.recordedWaiters
    this.recordedWaiters = []
    for (const wake of waiters) wake()
  }

  private fail(why: string): void {
    this.error ??= why
    this.welcome?.()
    for (const run of this.runs.values()) run.runOk?.()
    this.wakeRecorded()
  }
}

/** Resolves with promise, or rejects with `why` after timeoutMs. */
export function bounded<T>(promise: Promise<T>, timeoutMs: number, why: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${why} within ${timeoutMs / 1000} s`)), timeoutMs)
    promise.then(
      (value) => {
        clearTimeout(timer)
        resolve(value)
      },
      (error: unknown) => {
        clearTimeout(timer)
        reject(error as Error)
      },
    )
  })
}

/** Runs fn over items with at most `width` at once (announcing from thousands of connections in a bounded crowd). */
export async function inParallel<T, R>(items: readonly T[], width: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length)
  let next = 0
  const lane = async (): Promise<void> => {
    while (next < items.length) {
      const index = next++
      results[index] = await fn(items[index]!, index)
    }
  }
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, lane))
  return results
}

/**
 * The spans the listener holds for a run through seq throughSeq, read as verify reads them (a verifier
 * connection, spans -> span-page, page by page): how many acks became a span of their own.
 */
export async function countSpans(port: number, runId: string, throughSeq: number, timeoutMs: number): Promise<number> {
  const socket = connect({ host: '127.0.0.1', port })
  const decoder = new FrameDecoder(serverMessageSchema, maxServerFrameBytes)
  let next: ((m: ServerMessage | Error) => void) | undefined
  const inbox: Array<ServerMessage | Error> = []
  const deliver = (m: ServerMessage | Error): void => (next === undefined ? void inbox.push(m) : next(m))
  socket.on('data', (chunk) => {
    try {
      for (const m of decoder.push(chunk)) deliver(m)
    } catch (error) {
      deliver(error as Error)
    }
  })
  socket.on('error', (error) => deliver(error))
  socket.on('close', () => deliver(new Error('the listener closed the connection')))
  const receive = (): Promise<ServerMessage> =>
    bounded(
      new Promise<ServerMessage>((resolve, reject) => {
        const take = (m: ServerMessage | Error): void => {
          next = undefined
          if (m instanceof Error) reject(m)
          else if (m.type === 'error') reject(new Error(`${m.code}: ${m.message}`))
          else resolve(m)
        }
        if (inbox.length > 0) take(inbox.shift()!)
        else next = take
      }),
      timeoutMs,
      'no answer to a span page',
    )
  try {
    socket.write(encodeFrame({ type: 'hello', protocol: protocolVersion, role: 'verifier' }))
    await receive() // welcome
    let spans = 0
    for (let afterSeq = 0; afterSeq < throughSeq; ) {
      socket.write(encodeFrame({ type: 'spans', runId, afterSeq, throughSeq }))
      const page = await receive()
      if (page.type !== 'span-page' || page.spans.length === 0) throw new Error(`no spans after seq ${afterSeq}`)
      const count = page.spans.length / 24
      spans += count
      afterSeq = Buffer.from(page.spans.buffer, page.spans.byteOffset, page.spans.length).readDoubleLE((count - 1) * 24)
    }
    return spans
  } finally {
    socket.destroy()
  }
}
