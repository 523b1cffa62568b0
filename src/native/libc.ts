/**
 * The only bindings to libc (Linux, glibc). Every call that can fail is wrapped so that a failure
 * becomes a NativeError shaped like Node's own fs errors, built from errno read immediately after
 * the failed call (any other FFI call in between may overwrite it).
 *
 * Assumptions: Linux x86_64/aarch64 with glibc; 64-bit off_t.
 */
import koffi from 'koffi'
import { getSystemErrorName } from 'node:util'

koffi.alias('ssize_t', 'intptr_t')
koffi.alias('off_t', 'int64_t')
koffi.alias('mode_t', 'uint32_t')

// Loaded on Linux only; elsewhere every call throws (the method registry refuses methods there first).
const lib = process.platform === 'linux' ? koffi.load('libc.so.6') : null
type Bound = ReturnType<NonNullable<typeof lib>['func']>
const bind = (signature: string): Bound =>
  lib === null
    ? ((() => {
        throw new Error(`libc call on ${process.platform}: plugcheck's native layer supports Linux only`)
      }) as unknown as Bound)
    : lib.func(signature)

// open is variadic in C; a fixed three-argument prototype is ABI-compatible on the 64-bit targets we support.
const c = {
  open: bind('int open(const char *path, int flags, mode_t mode)'),
  close: bind('int close(int fd)'),
  pwrite: bind('ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset)'),
  pwritev2: bind('ssize_t pwritev2(int fd, const void *iov, int iovcnt, off_t offset, int flags)'),
  fsync: bind('int fsync(int fd)'),
  fdatasync: bind('int fdatasync(int fd)'),
  posix_fadvise: bind('int posix_fadvise(int fd, off_t offset, off_t len, int advice)'),
  fstatfs: bind('int fstatfs(int fd, void *buf)'),
  strerror: bind('const char *strerror(int errnum)'),
  socket: bind('int socket(int domain, int type, int protocol)'),
  connect: bind('int connect(int fd, const void *addr, uint32_t addrlen)'),
  setsockopt: bind('int setsockopt(int fd, int level, int name, const void *value, uint32_t len)'),
  send: bind('ssize_t send(int fd, const void *buf, size_t len, int flags)'),
  recv: bind('ssize_t recv(int fd, void *buf, size_t len, int flags)'),
  flock: bind('int flock(int fd, int operation)'),
  poll: bind('int poll(void *fds, uint64_t nfds, int timeout)'),
}

/** Linux x86_64/aarch64 (asm-generic differs only in O_DIRECT on aarch64). */
const isArm64 = process.arch === 'arm64'
export const O = {
  RDONLY: 0,
  WRONLY: 0x1,
  RDWR: 0x2,
  CREAT: 0x40,
  EXCL: 0x80,
  TRUNC: 0x200,
  NONBLOCK: 0x800,
  DSYNC: 0x1000,
  SYNC: 0x101000,
  DIRECT: isArm64 ? 0x10000 : 0x4000,
  CLOEXEC: 0x80000,
} as const

export const RWF_DSYNC = 0x2
export const EINTR = 4
export const EAGAIN = 11

/** An operating error from a system call, shaped like Node's fs errors. */
export class NativeError extends Error {
  readonly code: string
  readonly errno: number
  readonly syscall: string
  readonly path?: string
  constructor(syscall: string, errnoValue: number, path?: string) {
    const code = errnoName(errnoValue)
    const description = errnoDescription(errnoValue)
    super(`${code}: ${description}, ${syscall}${path === undefined ? '' : ` '${path}'`}`)
    this.name = 'NativeError'
    this.code = code
    this.errno = -errnoValue // negative, as in Node's fs errors
    this.syscall = syscall
    if (path !== undefined) this.path = path
  }
}

export function errnoName(errnoValue: number): string {
  try {
    return getSystemErrorName(-errnoValue)
  } catch {
    return `E${errnoValue}`
  }
}

/** "permission denied": libc's text, lower case as Node prints it. */
export function errnoDescription(errnoValue: number): string {
  const text = String(c.strerror(errnoValue) ?? `errno ${errnoValue}`)
  return text.charAt(0).toLowerCase() + text.slice(1)
}

function fail(syscall: string, path?: string): never {
  // errno must be read before any other FFI call.
  throw new NativeError(syscall, koffi.errno(), path)
}

export function open(path: string, flags: number, mode = 0o644): number {
  for (;;) {
    const fd = c.open(path, flags | O.CLOEXEC, mode) as number
    if (fd >= 0) return fd
    const e = koffi.errno()
    if (e !== EINTR) throw new NativeError('open', e, path)
  }
}

export function close(fd: number): void {
  // A failed close is reported but never retried: on Linux the descriptor is gone either way.
  if ((c.close(fd) as number) !== 0) fail('close')
}

/** Writes all of buf at offset, looping over short writes. */
export function pwriteAll(fd: number, buf: Buffer, offset: number): void {
  let done = 0
  while (done < buf.length) {
    const part = done === 0 ? buf : buf.subarray(done)
    const n = Number(c.pwrite(fd, part, part.length, offset + done))
    if (n < 0) {
      const e = koffi.errno()
      if (e === EINTR) continue
      throw new NativeError('pwrite', e)
    }
    if (n === 0) throw new NativeError('pwrite', 28 /* ENOSPC: no progress */)
    done += n
  }
}

const iovecScratch = Buffer.alloc(16)
/** One pwritev2 call with flags (RWF_DSYNC); short writes are finished with a plain pwrite + fdatasync. */
export function pwritev2Sync(fd: number, buf: Buffer, offset: number, flags: number): void {
  iovecScratch.writeBigUInt64LE(koffi.address(buf), 0)
  iovecScratch.writeBigUInt64LE(BigInt(buf.length), 8)
  for (;;) {
    const n = Number(c.pwritev2(fd, iovecScratch, 1, offset, flags))
    if (n === buf.length) return
    if (n < 0) {
      const e = koffi.errno()
      if (e === EINTR) continue
      throw new NativeError('pwritev2', e)
    }
    // Short write: finish the rest and cover it with a data sync, so the promise still holds.
    pwriteAll(fd, buf.subarray(n), offset + n)
    fdatasync(fd)
    return
  }
}

/** A failed fsync is never retried: after a failure the kernel may have dropped the dirty pages. */
export function fsync(fd: number): void {
  if ((c.fsync(fd) as number) !== 0) fail('fsync')
}

export function fdatasync(fd: number): void {
  if ((c.fdatasync(fd) as number) !== 0) fail('fdatasync')
}

const LOCK_EX = 2
const LOCK_NB = 4
const EWOULDBLOCK = EAGAIN

/**
 * flock(LOCK_EX|LOCK_NB): true when this descriptor now holds the exclusive lock, false when another
 * open file description holds it. The lock lives as long as the descriptor (and follows the inode
 * through a rename), so a writer keeps it by keeping the descriptor open.
 */
export function tryLockExclusive(fd: number, path?: string): boolean {
  for (;;) {
    if ((c.flock(fd, LOCK_EX | LOCK_NB) as number) === 0) return true
    const e = koffi.errno()
    if (e === EWOULDBLOCK) return false
    if (e !== EINTR) throw new NativeError('flock', e, path)
  }
}

export const POSIX_FADV_DONTNEED = 4

/** posix_fadvise returns the error number instead of setting errno. */
export function fadvise(fd: number, offsetBytes: number, lengthBytes: number, advice: number, path?: string): void {
  const e = c.posix_fadvise(fd, offsetBytes, lengthBytes, advice) as number
  if (e !== 0) throw new NativeError('posix_fadvise', e, path)
}

/** statfs.f_type, the file system's magic number. */
export function fileSystemMagic(fd: number): number {
  const buf = Buffer.alloc(128) // struct statfs is 120 bytes on 64-bit Linux
  if ((c.fstatfs(fd, buf) as number) !== 0) fail('fstatfs')
  return Number(buf.readBigInt64LE(0))
}

// --- sockets: the writer sends acks with blocking send() from its synchronous write loop -------

export const AF_INET = 2
export const AF_INET6 = 10
const SOCK_STREAM = 1
const IPPROTO_TCP = 6
const TCP_NODELAY = 1
const MSG_DONTWAIT = 0x40
const SOL_SOCKET = 1
const SO_RCVTIMEO = 20
const SO_SNDTIMEO = 21
const MSG_NOSIGNAL = 0x4000

/**
 * A blocking TCP connection. timeoutMs bounds connect, every send and every blocking receive
 * (SO_SNDTIMEO/SO_RCVTIMEO; Linux applies SO_SNDTIMEO to connect too).
 */
export function socketConnect(address: Buffer, family: number, description: string, timeoutMs: number): number {
  const fd = c.socket(family, SOCK_STREAM | O.CLOEXEC, 0) as number
  if (fd < 0) fail('socket')
  const timeval = Buffer.alloc(16)
  timeval.writeBigInt64LE(BigInt(Math.floor(timeoutMs / 1000)), 0)
  timeval.writeBigInt64LE(BigInt((timeoutMs % 1000) * 1000), 8)
  for (const option of [SO_SNDTIMEO, SO_RCVTIMEO]) {
    if ((c.setsockopt(fd, SOL_SOCKET, option, timeval, 16) as number) !== 0) {
      const e = koffi.errno()
      c.close(fd)
      throw new NativeError('setsockopt', e)
    }
  }
  for (;;) {
    if ((c.connect(fd, address, address.length) as number) === 0) break
    const e = koffi.errno()
    if (e === EINTR) continue
    c.close(fd)
    // A connect cut short by SO_SNDTIMEO reports EINPROGRESS: to the user that is a time-out.
    throw new NativeError('connect', e === 115 ? 110 : e, description)
  }
  const one = Buffer.alloc(4)
  one.writeInt32LE(1)
  // Acks must leave at once, not wait for Nagle to batch them.
  if ((c.setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, one, 4) as number) !== 0) fail('setsockopt')
  return fd
}

/** Blocking send of the whole buffer; MSG_NOSIGNAL turns a dead peer into EPIPE instead of SIGPIPE. */
export function sendAll(fd: number, buf: Buffer): void {
  let done = 0
  while (done < buf.length) {
    const part = done === 0 ? buf : buf.subarray(done)
    const n = Number(c.send(fd, part, part.length, MSG_NOSIGNAL))
    if (n < 0) {
      const e = koffi.errno()
      if (e === EINTR) continue
      throw new NativeError('send', e === EAGAIN ? 110 /* ETIMEDOUT: the peer stopped reading */ : e)
    }
    done += n
  }
}

/** Non-blocking receive: bytes read, 0 when nothing is waiting, -1 when the peer closed. */
export function recvNow(fd: number, buf: Buffer): number {
  const n = Number(c.recv(fd, buf, buf.length, MSG_DONTWAIT))
  if (n > 0) return n
  if (n === 0) return -1
  const e = koffi.errno()
  if (e === EAGAIN || e === EINTR) return 0
  throw new NativeError('recv', e)
}

/** Blocking receive, bounded by the socket's SO_RCVTIMEO: bytes read, -1 when the peer closed, 0 on timeout. */
export function recvWait(fd: number, buf: Buffer): number {
  for (;;) {
    const n = Number(c.recv(fd, buf, buf.length, 0))
    if (n > 0) return n
    if (n === 0) return -1
    const e = koffi.errno()
    if (e === EAGAIN) return 0
    if (e !== EINTR) throw new NativeError('recv', e)
  }
}

const POLLIN = 0x1
const pollScratch = Buffer.alloc(8)
/** Waits at most timeoutMs for fd to become readable (or closed, or in error); true when it did. */
export function waitReadable(fd: number, timeoutMs: number): boolean {
  pollScratch.writeInt32LE(fd, 0)
  pollScratch.writeInt16LE(POLLIN, 4)
  pollScratch.writeInt16LE(0, 6)
  const n = c.poll(pollScratch, 1, Math.max(0, Math.ceil(timeoutMs))) as number
  if (n > 0) return true
  if (n === 0) return false
  const e = koffi.errno()
  if (e === EINTR) return false
  throw new NativeError('poll', e)
}

export function closeQuietly(fd: number): void {
  c.close(fd)
}

export function addressOf(buf: Buffer): bigint {
  return koffi.address(buf)
}
