/**
 * `plugcheck listen`: a TCP server that stores acknowledged seqs durably and answers verify's queries.
 *
 * Each connection is a small state machine (hello first, then run/ack/end or query). A frame that is
 * garbage, oversized or out of order gets an error reply naming the problem and the connection is
 * closed; other connections and everything stored are unaffected.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto'
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net'
import { FrameDecoder, FrameError, encodeFrame, maxClientFrameBytes } from '../protocol/framing.js'
import { clientMessageSchema, protocolVersion, type ClientMessage, type ErrorCode, type ServerMessage } from '../protocol/messages.js'
import { AckStore } from './ack-store.js'

export interface ListenerOptions {
  readonly host: string
  readonly port: number
  readonly dir: string
  readonly token?: string
  readonly log?: (line: string) => void
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
  readonly listenerId = randomBytes(6).toString('hex')

  private constructor(
    readonly store: AckStore,
    private readonly server: Server,
    readonly options: ListenerOptions,
  ) {}

  static async start(options: ListenerOptions): Promise<Listener> {
    const store = await AckStore.open(options.dir)
    for (const warning of store.warnings) options.log?.(`plugcheck: ${warning}`)
    const server = createServer()
    const listener = new Listener(store, server, options)
    server.on('connection', (socket) => listener.accept(socket))
    store.on('recorded', (runId, throughSeq) => {
      for (const c of listener.connections) c.recorded(runId, throughSeq)
    })
    store.on('failed', (runId, error) => {
      options.log?.(`plugcheck: could not record acks of run ${runId}: ${error.message}`)
      for (const c of listener.connections) c.storageFailed(runId, error)
    })
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(options.port, options.host, () => {
        server.off('error', reject)
        resolve()
      })
    })
    return listener
  }

  address(): AddressInfo {
    return this.server.address() as AddressInfo
  }

  private accept(socket: Socket): void {
    socket.setNoDelay(true)
    const connection = new Connection(this, socket)
    this.connections.add(connection)
    socket.on('close', () => this.connections.delete(connection))
  }

  tokenAccepted(offered: string | undefined): boolean {
    const expected = this.options.token
    if (expected === undefined) return true
    if (offered === undefined) return false
    const a = Buffer.from(offered)
    const b = Buffer.from(expected)
    return a.length === b.length && timingSafeEqual(a, b)
  }

  async close(): Promise<void> {
    for (const c of this.connections) c.socket.destroy()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
    await this.store.close()
  }
}

class Connection {
  private readonly decoder = new FrameDecoder(clientMessageSchema, maxClientFrameBytes)
  private role: 'writer' | 'verifier' | undefined
  private readonly ownedRuns = new Set<string>()
  /** Messages are handled strictly in arrival order; while one waits for disk I/O the rest wait here. */
  private readonly waiting: ClientMessage[] = []
  private busy = false
  private closed = false

  constructor(
    private readonly listener: Listener,
    readonly socket: Socket,
  ) {
    socket.on('data', (chunk) => this.receive(chunk))
    socket.on('error', () => socket.destroy())
    socket.on('close', () => {
      this.closed = true
    })
  }

  private receive(chunk: Buffer): void {
    if (this.closed) return
    let messages: ClientMessage[]
    try {
      messages = this.decoder.push(chunk)
    } catch (error) {
      if (error instanceof FrameError) return this.reject(error.code, error.message)
      throw error
    }
    this.waiting.push(...messages)
    this.drain()
  }

  /** Acks, the bulk of traffic, are handled synchronously; only a run announcement waits for the disk. */
  private drain(): void {
    while (!this.busy && !this.closed && this.waiting.length > 0) {
      const message = this.waiting.shift()!
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
  }

  private failed(error: unknown): void {
    if (error instanceof ProtocolViolation) this.reject(error.code, error.message)
    else this.reject('storage', (error as Error).message)
  }

  /** Returns a promise only when the message needs I/O before the next one may be handled. */
  private handle(message: ClientMessage): Promise<void> | undefined {
    const store = this.listener.store
    if (message.type === 'hello') {
      if (this.role !== undefined) throw new ProtocolViolation('out-of-order', 'hello sent twice')
      if (message.protocol !== protocolVersion) {
        throw new ProtocolViolation('protocol-version', `protocol ${message.protocol} is not supported (this listener speaks ${protocolVersion})`)
      }
      if (!this.listener.tokenAccepted(message.token)) throw new ProtocolViolation('unauthorized', 'wrong or missing token (--token)')
      this.role = message.role
      this.send({ type: 'welcome', protocol: protocolVersion, listenerId: this.listener.listenerId })
      return
    }
    if (this.role === undefined) throw new ProtocolViolation('out-of-order', `${message.type} before hello`)
    switch (message.type) {
      case 'run': {
        if (this.role !== 'writer') throw new ProtocolViolation('out-of-order', 'run announced on a verifier connection')
        if (store.hasRun(message.meta.runId)) throw new ProtocolViolation('out-of-order', `run ${message.meta.runId} was already announced`)
        const runId = message.meta.runId
        return store.createRun(message.meta, Date.now()).then(() => {
          this.ownedRuns.add(runId)
          this.send({ type: 'run-ok', runId })
        })
      }
      case 'ack': {
        if (!this.ownedRuns.has(message.runId)) throw new ProtocolViolation('unknown-run', `ack for run ${message.runId}, which this connection did not announce`)
        if (!store.isWritable(message.runId)) throw new ProtocolViolation('storage', `acks of run ${message.runId} can no longer be recorded`)
        const expected = store.lastAckedSeq(message.runId) + 1
        if (message.fromSeq !== expected) {
          throw new ProtocolViolation('out-of-order', `ack ${message.fromSeq}-${message.toSeq} of run ${message.runId} out of order: expected seq ${expected} next`)
        }
        store.appendAck(message.runId, message.fromSeq, message.toSeq, Date.now())
        return
      }
      case 'end': {
        if (!this.ownedRuns.has(message.runId)) throw new ProtocolViolation('unknown-run', `end for run ${message.runId}, which this connection did not announce`)
        store.endRun(message.runId, message.reason, message.detail, Date.now())
        return
      }
      case 'query': {
        this.send({ type: 'runs', runs: store.query(message.host, message.requestedPath, message.runId), claims: [] })
        return
      }
    }
  }

  recorded(runId: string, throughSeq: number): void {
    if (this.ownedRuns.has(runId) && !this.closed) this.send({ type: 'recorded', runId, throughSeq })
  }

  storageFailed(runId: string, error: Error): void {
    if (this.ownedRuns.has(runId)) this.reject('storage', `the listener could not record acks of run ${runId}: ${error.message}`)
  }

  private send(message: ServerMessage): void {
    this.socket.write(encodeFrame(message))
  }

  private reject(code: ErrorCode, message: string): void {
    if (this.closed) return
    this.listener.options.log?.(`plugcheck: closed a connection from ${this.socket.remoteAddress}: ${message}`)
    this.closed = true
    this.socket.end(encodeFrame({ type: 'error', code, message }))
  }
}
