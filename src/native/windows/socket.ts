/**
 * The writer's blocking ack socket over Winsock (ws2_32).
 *
 * Every blocking step is bounded by the connect timeout:
 * - connect: SO_SNDTIMEO does not bound connect on Windows, so the socket connects non-blocking
 *   (ioctlsocket FIONBIO) and select() waits, with the failure in exceptfds (Microsoft Learn
 *   "connect": "the exceptfds parameter ... if processing a connect call (nonblocking), connection
 *   attempt failed"). select rather than WSAPoll, which before Windows 10 2004 does not report a refused
 *   connect at all (Microsoft Learn "WSAPoll" remarks).
 * - send: SO_SNDTIMEO (a DWORD in milliseconds on Windows, not a timeval); a time-out is ETIMEDOUT and
 *   the socket is given up (Microsoft Learn "setsockopt": after a send or receive time-out the socket
 *   state is indeterminate).
 * - receive: WSAPoll first, then recv only when data (or the close) is there, so a receive never times
 *   out inside recv and the socket stays usable after a quiet wait.
 */
import type { AckSocket, SocketAddress } from '../port.js'
import { WSA } from './error-codes.js'
import { winSockaddr } from './sockaddr.js'
import {
  api,
  FD_SET_BYTES,
  FIONBIO,
  INVALID_SOCKET,
  IPPROTO_TCP,
  POLLRDNORM,
  SO_ERROR,
  SO_RCVTIMEO,
  SO_SNDTIMEO,
  SOCK_STREAM,
  SOCKET_ERROR,
  SOL_SOCKET,
  startWinsock,
  TCP_NODELAY,
  TIMEVAL_BYTES,
  WSAPOLLFD_BYTES,
  win32Failure,
} from './win32.js'

type Socket = bigint

/** send and recv take an int length: parts of at most 1 GiB. */
const maxIoChunkBytes = 1 << 30

function lastWsa(): number {
  return Number(api().WSAGetLastError())
}

function setNonBlocking(s: Socket, on: boolean, description: string): void {
  const arg = Buffer.alloc(4) // u_long *argp, 32 bits (Microsoft Learn "ioctlsocket": nonzero enables non-blocking mode)
  arg.writeUInt32LE(on ? 1 : 0, 0)
  if (Number(api().ioctlsocket(s, FIONBIO, arg)) === SOCKET_ERROR) throw win32Failure('ioctlsocket', lastWsa(), description)
}

function setInt(s: Socket, level: number, option: number, value: number, description: string): void {
  const buf = Buffer.alloc(4) // DWORD (SO_SNDTIMEO/SO_RCVTIMEO, milliseconds) or BOOL (TCP_NODELAY): 4 bytes (Microsoft Learn "SOL_SOCKET Socket Options", "IPPROTO_TCP Socket Options")
  buf.writeUInt32LE(value >>> 0, 0)
  if (Number(api().setsockopt(s, level, option, buf, 4)) === SOCKET_ERROR) {
    throw win32Failure('setsockopt', lastWsa(), description)
  }
}

function pendingError(s: Socket): number {
  const value = Buffer.alloc(4) // SO_ERROR is an int (Microsoft Learn "SOL_SOCKET Socket Options")
  const length = Buffer.alloc(4) // int *optlen, in and out (Microsoft Learn "getsockopt")
  length.writeInt32LE(4, 0)
  if (Number(api().getsockopt(s, SOL_SOCKET, SO_ERROR, value, length)) === SOCKET_ERROR) return lastWsa()
  return value.readInt32LE(0)
}

function fdSetOf(s: Socket): Buffer {
  const set = Buffer.alloc(FD_SET_BYTES)
  set.writeUInt32LE(1, 0) // u_int fd_count (win32.ts FD_SET_BYTES: 64-bit layout)
  set.writeBigUInt64LE(s, 8) // SOCKET fd_array[0], after 4 bytes of padding
  return set
}

/** Connects within timeoutMs; the socket is blocking afterwards, with SO_SNDTIMEO/SO_RCVTIMEO = timeoutMs. */
function connectBounded(s: Socket, address: SocketAddress, timeoutMs: number, description: string): void {
  const w = api()
  const { bytes } = winSockaddr(address)
  setNonBlocking(s, true, description)
  if (Number(w.connect(s, bytes, bytes.length)) === SOCKET_ERROR) {
    const error = lastWsa()
    if (error !== WSA.EWOULDBLOCK) throw win32Failure('connect', error, description)
    const writable = fdSetOf(s)
    const failed = fdSetOf(s)
    const timeout = Buffer.alloc(TIMEVAL_BYTES)
    const ms = Math.max(0, Math.ceil(timeoutMs))
    timeout.writeInt32LE(Math.floor(ms / 1000), 0) // long tv_sec (32 bits on Windows)
    timeout.writeInt32LE((ms % 1000) * 1000, 4) // long tv_usec
    const ready = Number(w.select(0, null, writable, failed, timeout)) // nfds is ignored by Winsock
    if (ready === SOCKET_ERROR) throw win32Failure('select', lastWsa(), description)
    if (ready === 0) throw win32Failure('connect', WSA.ETIMEDOUT, description)
    if (failed.readUInt32LE(0) > 0 || writable.readUInt32LE(0) === 0) {
      const pending = pendingError(s)
      throw win32Failure('connect', pending === 0 ? WSA.ECONNREFUSED : pending, description)
    }
    const pending = pendingError(s)
    if (pending !== 0) throw win32Failure('connect', pending, description)
  }
  setNonBlocking(s, false, description)
  const timeoutOption = Math.max(1, Math.ceil(timeoutMs)) // 0 would mean "no time-out"
  setInt(s, SOL_SOCKET, SO_SNDTIMEO, timeoutOption, description)
  setInt(s, SOL_SOCKET, SO_RCVTIMEO, timeoutOption, description)
  // Acks must leave at once, not wait for Nagle to batch them.
  setInt(s, IPPROTO_TCP, TCP_NODELAY, 1, description)
}

export function connect(address: SocketAddress, timeoutMs: number, description: string): AckSocket {
  startWinsock()
  const w = api()
  const family = winSockaddr(address).family
  const raw = w.socket(family, SOCK_STREAM, IPPROTO_TCP)
  const s = BigInt(raw as bigint)
  if (s === INVALID_SOCKET) throw win32Failure('socket', lastWsa(), description)
  try {
    connectBounded(s, address, timeoutMs, description)
  } catch (error) {
    w.closesocket(s)
    throw error
  }
  const pollFd = Buffer.alloc(WSAPOLLFD_BYTES)
  let open = true

  const waitReadable = (ms: number): boolean => {
    pollFd.fill(0)
    pollFd.writeBigUInt64LE(s, 0) // SOCKET fd
    pollFd.writeInt16LE(POLLRDNORM, 8) // SHORT events; revents at 10 is left 0
    const n = Number(w.WSAPoll(pollFd, 1, Math.max(0, Math.ceil(ms))))
    if (n === SOCKET_ERROR) throw win32Failure('WSAPoll', lastWsa(), description)
    return n > 0 // POLLRDNORM, or POLLHUP/POLLERR, which WSAPoll reports unasked
  }

  const receive = (buf: Buffer): number => {
    const n = Number(w.recv(s, buf, Math.min(buf.length, maxIoChunkBytes), 0))
    if (n > 0) return n
    if (n === 0) return -1
    const error = lastWsa()
    if (error === WSA.EWOULDBLOCK) return 0
    throw win32Failure('recv', error, description)
  }

  return {
    sendAll(buf) {
      let done = 0
      while (done < buf.length) {
        const part = buf.subarray(done, done + Math.min(buf.length - done, maxIoChunkBytes))
        const n = Number(w.send(s, part, part.length, 0))
        if (n === SOCKET_ERROR) throw win32Failure('send', lastWsa(), description)
        done += n
      }
    },
    recvNow(buf) {
      return waitReadable(0) ? receive(buf) : 0
    },
    recvWait(buf) {
      // Bounded by the same timeout as every other blocking call.
      return waitReadable(timeoutMs) ? receive(buf) : 0
    },
    waitReadable,
    close() {
      if (!open) return
      open = false
      w.closesocket(s)
    },
  }
}
