/** A raw TCP peer of the listener for tests: sends frames, collects the listener's replies. */
import { connect, type Socket } from 'node:net'
import { FrameDecoder, encodeFrame, maxServerFrameBytes } from '../../src/protocol/framing.js'
import { serverMessageSchema, type ServerMessage } from '../../src/protocol/messages.js'
import type { RunMeta } from '../../src/record/format.js'

export class Peer {
  readonly messages: ServerMessage[] = []
  closed = false
  error: Error | undefined
  private readonly decoder = new FrameDecoder(serverMessageSchema, maxServerFrameBytes)
  private constructor(readonly socket: Socket) {
    socket.on('data', (c) => this.messages.push(...this.decoder.push(c)))
    socket.on('error', (e) => (this.error = e))
    socket.on('close', () => (this.closed = true))
  }
  /** localAddress: another loopback address (127.0.0.2) plays a second machine. */
  static async open(port: number, localAddress?: string): Promise<Peer> {
    const socket = connect({ host: '127.0.0.1', port, ...(localAddress === undefined ? {} : { localAddress }) })
    await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject))
    return new Peer(socket)
  }
  send(message: object): void {
    this.socket.write(encodeFrame(message))
  }
  /** Waits (bounded) for a message of a type. */
  async next(type: ServerMessage['type'], timeoutMs = 5000): Promise<ServerMessage> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const index = this.messages.findIndex((m) => m.type === type)
      if (index >= 0) return this.messages.splice(index, 1)[0]!
      if (Date.now() > deadline) throw new Error(`no ${type} within ${timeoutMs} ms (closed: ${this.closed}; got ${JSON.stringify(this.messages).slice(0, 300)})`)
      await new Promise((resolve) => setTimeout(resolve, 2))
    }
  }
  async waitClosed(timeoutMs = 5000): Promise<boolean> {
    const deadline = Date.now() + timeoutMs
    while (!this.closed && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5))
    return this.closed
  }
  /** hello + run + run-ok: a writer with one announced run. */
  static async writer(port: number, runMeta: RunMeta, extra: object = {}): Promise<Peer> {
    const peer = await Peer.open(port)
    peer.send({ type: 'hello', protocol: 2, role: 'writer' })
    peer.send({ type: 'run', meta: runMeta, ...extra })
    await peer.next('run-ok')
    return peer
  }
  /** hello + run, and the listener's answer to the run: run-ok or an error (bounded wait). */
  static async announce(port: number, runMeta: object, extra: object = {}, localAddress?: string): Promise<{ peer: Peer; reply: { type: string; code?: string; message?: string } }> {
    const peer = await Peer.open(port, localAddress)
    peer.send({ type: 'hello', protocol: 3, role: 'writer' })
    peer.send({ type: 'run', meta: runMeta, ...extra })
    const deadline = Date.now() + 5000
    for (;;) {
      const reply = peer.messages.find((m) => m.type === 'run-ok' || m.type === 'error')
      if (reply !== undefined) return { peer, reply: reply as { type: string } }
      if (Date.now() > deadline) throw new Error('no reply to the announcement')
      await new Promise((resolve) => setTimeout(resolve, 2))
    }
  }
  close(): void {
    this.socket.destroy()
  }
}

export const runMeta = (runId: string, overrides: Partial<RunMeta> = {}): RunMeta => ({
  runId,
  groupId: runId,
  method: 'fdatasync',
  direct: false,
  pattern: 'append',
  recordSizeBytes: 8192,
  slotCount: 1000,
  host: 'testhost',
  path: `/data/${runId}`,
  requestedPath: `/data/${runId}`,
  createdMs: Date.now(),
  ...overrides,
})

export const runIdOf = (n: number): string => n.toString(16).padStart(16, '0')

/** ~49 KB: twelve mount options of 4,096 characters, the longest a fingerprint string may be. */
export const bulkyFingerprint = {
  os: { platform: 'linux', kernel: 'Linux', kernelVersion: '6.1', arch: 'x64', distribution: null },
  bootId: null,
  virtualMachine: true,
  target: {
    path: '/data',
    fileSystem: { type: 'ext4', magic: '0xef53', mountPoint: '/', source: null, mountOptions: Array.from({ length: 12 }, (_, i) => `option-${i}-`.padEnd(4096, 'x')), superOptions: [] },
    inMemory: false,
  },
  device: null,
}

/** ~16.5 KB: the largest writer environment a run announcement may carry (maxWriterEnvBytes). */
export const largestFingerprint = {
  ...bulkyFingerprint,
  target: { ...bulkyFingerprint.target, fileSystem: { ...bulkyFingerprint.target.fileSystem, mountOptions: Array.from({ length: 4 }, (_, i) => `option-${i}-`.padEnd(4000, 'x')) } },
}

/**
 * One group of 64 ended runs on box:/data/db, announced on one connection (a group belongs to the
 * connection that announced it), each with the largest fingerprint an announcement may carry: every
 * runs reply is ~1 MB.
 * Returns the writer's connection, still open.
 */
export async function bulkyGroup(port: number): Promise<Peer> {
  const writer = await Peer.open(port)
  writer.send({ type: 'hello', protocol: 2, role: 'writer' })
  for (let i = 0; i < 64; i++) {
    writer.send({ type: 'run', meta: runMeta(runIdOf(0x700 + i), { groupId: runIdOf(0x700), host: 'box', requestedPath: '/data/db', path: `/data/db.${i}` }), writer: { bootId: null, fingerprint: largestFingerprint } })
  }
  for (let i = 0; i < 64; i++) await writer.next('run-ok')
  // Ended; the query's reply says the ends were handled.
  for (let i = 0; i < 64; i++) writer.send({ type: 'end', runId: runIdOf(0x700 + i), reason: 'duration' })
  writer.send({ type: 'query', host: 'box', requestedPath: '/data/db' })
  await writer.next('runs')
  return writer
}
