/**
 * The POSIX port's blocking ack socket: a TCP connection with every call bounded (the connect by
 * poll, sends and receives by SO_SNDTIMEO and SO_RCVTIMEO), Nagle off, and no SIGPIPE.
 */
import koffi from 'koffi'
import { performance } from 'node:perf_hooks'
import type { AckSocket, NativePort, SocketAddress } from '../port.js'
import { sockaddrBytes, sockaddrLayouts } from '../sockaddr.js'
import { FD_CLOEXEC, F_GETFL, F_SETFD, F_SETFL, POLLIN, POLLOUT, type PosixOs } from './constants.js'
import { errnoError, fail, type Libc } from './libc.js'

/** The port's connect, on the C library loaded on first use (c). */
export function ackSocketCalls(c: () => Libc, os: PosixOs): Pick<NativePort, 'connect'> {
  return {
    connect(address: SocketAddress, timeoutMs: number, description: string): AckSocket {
      return connectSocket(c(), os, address, timeoutMs, description)
    },
  }
}

/**
 * connect(2) bounded by timeoutMs on every system: SO_SNDTIMEO bounds a blocking connect only on
 * Linux (xnu and FreeBSD wait for TCP to give up), so the connect is made non-blocking, waited for
 * with poll, its result read with SO_ERROR, and the socket made blocking again.
 */
function connectWithin(lib: Libc, fd: number, raw: Buffer, timeoutMs: number, description: string): void {
  const k = lib.k
  const flags = lib.fcntl(fd, F_GETFL, 'int', 0) as number
  if (flags === -1 || (lib.fcntl(fd, F_SETFL, 'int', flags | k.O_NONBLOCK) as number) === -1) throw errnoError(lib, 'fcntl', koffi.errno())
  if ((lib.connect(fd, raw, raw.length) as number) !== 0) {
    const e = koffi.errno()
    // EINTR on a non-blocking connect: the connection goes on in the background, like EINPROGRESS.
    if (e !== k.EINPROGRESS && e !== k.EINTR) throw errnoError(lib, 'connect', e, description)
    // Monotonic: a step of the wall clock neither cuts the connect short nor stretches it.
    const deadline = performance.now() + timeoutMs
    const pollFd = Buffer.alloc(8)
    for (;;) {
      const leftMs = deadline - performance.now()
      if (leftMs <= 0) throw errnoError(lib, 'connect', k.ETIMEDOUT, description)
      pollFd.writeInt32LE(fd, 0)
      pollFd.writeInt16LE(POLLOUT, 4)
      pollFd.writeInt16LE(0, 6)
      const n = lib.poll(pollFd, 1, Math.ceil(leftMs)) as number
      if (n > 0) break
      if (n < 0) {
        const pe = koffi.errno()
        if (pe !== k.EINTR) throw errnoError(lib, 'poll', pe)
      }
    }
    const value = Buffer.alloc(4)
    const length = Buffer.alloc(4)
    length.writeUInt32LE(4)
    if ((lib.getsockopt(fd, k.SOL_SOCKET, k.SO_ERROR, value, length) as number) !== 0) throw errnoError(lib, 'getsockopt', koffi.errno())
    const soError = value.readInt32LE(0)
    if (soError !== 0) throw errnoError(lib, 'connect', soError, description)
  }
  if ((lib.fcntl(fd, F_SETFL, 'int', flags) as number) === -1) throw errnoError(lib, 'fcntl', koffi.errno())
}

/** A blocking TCP socket with SO_SNDTIMEO/SO_RCVTIMEO bounding every call. */
function connectSocket(lib: Libc, os: PosixOs, address: SocketAddress, timeoutMs: number, description: string): AckSocket {
  const k = lib.k
  const layout = sockaddrLayouts[os]
  const raw = sockaddrBytes(address, layout)
  const family = address.family === 6 ? layout.afInet6 : layout.afInet
  const fd = lib.socket(family, k.SOCK_STREAM | (k.SOCK_CLOEXEC ?? 0), 0) as number
  if (fd < 0) fail(lib, 'socket')
  const closeWith = (error: unknown): never => {
    lib.close(fd)
    throw error
  }
  const setOption = (level: number, name: number, value: Buffer): void => {
    if ((lib.setsockopt(fd, level, name, value, value.length) as number) !== 0) closeWith(errnoError(lib, 'setsockopt', koffi.errno()))
  }
  if (k.SOCK_CLOEXEC === null && (lib.fcntl(fd, F_SETFD, 'int', FD_CLOEXEC) as number) === -1)
    closeWith(errnoError(lib, 'fcntl', koffi.errno()))
  // struct timeval: a 64-bit tv_sec, then tv_usec (64-bit on Linux and the BSDs, 32-bit and padded
  // on macOS: little-endian, the low half of a zeroed 64-bit field is the same int32). At least 1 ms:
  // a zero timeval means no time-out at all.
  const boundMs = Math.max(1, Math.floor(timeoutMs))
  const timeval = Buffer.alloc(16)
  timeval.writeBigInt64LE(BigInt(Math.floor(boundMs / 1000)), 0)
  timeval.writeBigInt64LE(BigInt((boundMs % 1000) * 1000), 8)
  setOption(k.SOL_SOCKET, k.SO_SNDTIMEO, timeval)
  setOption(k.SOL_SOCKET, k.SO_RCVTIMEO, timeval)
  const one = Buffer.alloc(4)
  one.writeInt32LE(1)
  if (k.SO_NOSIGPIPE !== null) setOption(k.SOL_SOCKET, k.SO_NOSIGPIPE, one)
  try {
    connectWithin(lib, fd, raw, boundMs, description)
  } catch (error) {
    closeWith(error)
  }
  // Acks must leave at once, not wait for Nagle to batch them.
  setOption(k.IPPROTO_TCP, k.TCP_NODELAY, one)
  return blockingSocket(lib, fd)
}

/** The connected socket's calls: sends bounded by SO_SNDTIMEO, receives without waiting or bounded by SO_RCVTIMEO. */
function blockingSocket(lib: Libc, fd: number): AckSocket {
  const k = lib.k
  const sendFlags = k.MSG_NOSIGNAL ?? 0
  const pollScratch = Buffer.alloc(8)
  let open = true
  return {
    sendAll(buf: Buffer): void {
      let done = 0
      while (done < buf.length) {
        const part = done === 0 ? buf : buf.subarray(done)
        const n = Number(lib.send(fd, part, part.length, sendFlags))
        if (n < 0) {
          const e = koffi.errno()
          if (e === k.EINTR) continue
          // EAGAIN after SO_SNDTIMEO: the peer stopped reading.
          throw errnoError(lib, 'send', e === k.EAGAIN ? k.ETIMEDOUT : e)
        }
        done += n
      }
    },
    recvNow(buf: Buffer): number {
      const n = Number(lib.recv(fd, buf, buf.length, k.MSG_DONTWAIT))
      if (n > 0) return n
      if (n === 0) return -1
      const e = koffi.errno()
      if (e === k.EAGAIN || e === k.EINTR) return 0
      throw errnoError(lib, 'recv', e)
    },
    recvWait(buf: Buffer): number {
      for (;;) {
        const n = Number(lib.recv(fd, buf, buf.length, 0))
        if (n > 0) return n
        if (n === 0) return -1
        const e = koffi.errno()
        if (e === k.EAGAIN) return 0
        if (e !== k.EINTR) throw errnoError(lib, 'recv', e)
      }
    },
    waitReadable(waitMs: number): boolean {
      pollScratch.writeInt32LE(fd, 0)
      pollScratch.writeInt16LE(POLLIN, 4)
      pollScratch.writeInt16LE(0, 6)
      const n = lib.poll(pollScratch, 1, Math.max(0, Math.ceil(waitMs))) as number
      if (n > 0) return true
      if (n === 0) return false
      const e = koffi.errno()
      if (e === k.EINTR) return false
      throw errnoError(lib, 'poll', e)
    },
    close(): void {
      if (open) lib.close(fd)
      open = false
    },
  }
}
