/**
 * The kernel's side of a served socket: its send buffer is bounded (SO_SNDBUF), the bytes it still
 * holds for the peer are counted with the user-space ones in the reply budget, and a connection the
 * listener gives up on is closed abortively (a reset), so that neither a dropped peer nor a refused
 * one that never reads keeps kernel memory: a plain close leaves an orphan socket holding its queue
 * until the peer reads it or TCP gives up, minutes later.
 *
 * Node exposes a served socket's descriptor as socket._handle.fd on POSIX (no public API sets
 * SO_SNDBUF or reads the queue). On Windows it is -1: nothing is bounded there beyond what Node and
 * Winsock do, the kernel's bytes count as none, and a close is Node's own (Socket.resetAndDestroy()
 * is not used: after end() it fails and leaves the handle open).
 */
import type { Socket } from 'node:net'
import type { ServedSocketCalls } from '../../native/index.js'

/** Each served socket's kernel send buffer; Linux holds twice this (socket(7)). Enough for a LAN's bandwidth-delay product. */
export const defaultSendBufferBytes = 256 * 1024

function descriptorOf(socket: Socket): number | undefined {
  const fd = (socket as unknown as { _handle?: { fd?: unknown } | null })._handle?.fd
  return typeof fd === 'number' && fd >= 0 ? fd : undefined
}

/**
 * Bytes written to the socket that the kernel has not taken yet. Not writableLength: Node keeps a
 * buffer being written whole in it until the kernel has taken its last byte, so a peer slowly
 * reading one large reply would look stalled throughout. libuv's write queue (the handle's
 * writeQueueSize) says what is left of the buffer in flight (_writableState.writelen).
 */
export function unsentBytes(socket: Socket): number {
  const inFlight = (socket as unknown as { _writableState?: { writelen?: unknown } })._writableState?.writelen
  const left = (socket as unknown as { _handle?: { writeQueueSize?: unknown } | null })._handle?.writeQueueSize
  if (typeof inFlight !== 'number' || typeof left !== 'number') return socket.writableLength
  return Math.max(0, socket.writableLength - inFlight) + left
}

export class ServedSockets {
  constructor(
    private readonly calls: ServedSocketCalls | null,
    readonly sendBufferBytes: number,
  ) {}

  /** Bounds the socket's kernel send buffer; what the kernel then holds at most (0 where unknown). */
  bound(socket: Socket): number {
    const fd = descriptorOf(socket)
    if (this.calls === null || fd === undefined) return 0
    try {
      return this.calls.boundSendBuffer(fd, this.sendBufferBytes)
    } catch {
      return 0 // a socket already reset by its peer: nothing to bound
    }
  }

  /**
   * Bytes the kernel holds for the peer. Where the system cannot say (OpenBSD), a socket with bytes
   * still waiting in user space has a full kernel buffer (Node writes until the kernel refuses), one
   * without is counted as empty: off by at most one buffer each, never a false stall.
   */
  kernelQueuedBytes(socket: Socket, kernelBufferBytes: number): number {
    const fd = descriptorOf(socket)
    if (this.calls === null || fd === undefined) return 0
    try {
      return this.calls.queuedSendBytes(fd) ?? (socket.writableLength > 0 ? kernelBufferBytes : 0)
    } catch {
      return 0
    }
  }

  /** Destroys the socket so that whatever is queued for the peer is discarded (a reset), not kept. */
  abort(socket: Socket): void {
    const fd = descriptorOf(socket)
    if (this.calls !== null && fd !== undefined) {
      try {
        this.calls.abortOnClose(fd)
      } catch {
        // already reset by the peer: the close below frees it all the same
      }
    }
    socket.destroy()
  }
}
