/**
 * The POSIX port: Linux, macOS, FreeBSD and OpenBSD through their C library. Everything that differs
 * between them is data (constants.ts, table.ts) or a call looked up at run time (libc.ts).
 */
import koffi from 'koffi'
import { constants as nodeFsConstants, fstatSync, readFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import { NativeError } from '../errors.js'
import type { MethodName } from '../methods.js'
import type { AckSocket, DataFile, FileLock, NativePort, OpenOptions, PlatformTable, ServedSocketCalls, SocketAddress } from '../port.js'
import { sockaddrBytes, sockaddrLayouts } from '../sockaddr.js'
import { alignedBuffer } from '../aligned.js'
import {
  FD_CLOEXEC,
  F_GETFL,
  F_SETFD,
  F_SETFL,
  LOCK_EX,
  LOCK_NB,
  POLLIN,
  POLLOUT,
  POSIX_FADV_DONTNEED,
  RWF_DSYNC,
  mismatchesWithNode,
  posixConstants,
  type PosixOs,
} from './constants.js'
import { errnoError, fail, loadLibc, openFile, pwriteAll, type Libc } from './libc.js'
import { posixTable } from './table.js'
import { descriptorLimit, servedSocketCalls, setDescriptorSoftLimit } from './served-sockets.js'

/** File systems that live in memory, by the names the BSDs and Linux give them. */
const memoryFileSystems: ReadonlySet<string> = new Set(['tmpfs', 'ramfs', 'mfs'])
const memoryMagics: ReadonlySet<number> = new Set([0x01021994 /* TMPFS_MAGIC */, 0x858458f6 /* RAMFS_MAGIC */])

export function createPosixPort(os: PosixOs): NativePort {
  const k = posixConstants(os, process.arch)
  const mismatches = mismatchesWithNode(os, k, nodeFsConstants as unknown as Record<string, number>)
  if (mismatches.length > 0) {
    // Node was compiled against this system's headers; a disagreement means our table is wrong here.
    throw new Error(
      `plugcheck's open flags for ${os} disagree with this system's (${mismatches.join('; ')}): refusing to run with wrong flags`,
    )
  }
  let loaded: Libc | undefined
  const c = (): Libc => (loaded ??= loadLibc(k))
  let table: PlatformTable | undefined

  const methodTable = (): PlatformTable => (table ??= posixTable(os, { fdatasync: c().fdatasync !== null }))

  const requireAvailable = (method: MethodName): void => {
    const row = methodTable().methods.find((m) => m.name === method)
    if (row === undefined || !row.available) throw new Error(`openData(${method}) on an unavailable method: ${row?.reason ?? 'unknown'}`)
  }

  const fcntlOrFail = (fd: number, cmd: number, arg: number, syscall: string): void => {
    for (;;) {
      if ((c().fcntl(fd, cmd, 'int', arg) as number) !== -1) return
      const e = koffi.errno()
      if (e !== k.EINTR) throw errnoError(c(), syscall, e)
    }
  }

  /** The sync that follows the writes, per method. A failed sync is never retried: the kernel may have dropped the pages. */
  const syncOf = (method: MethodName, fd: number): (() => void) => {
    const lib = c()
    switch (method) {
      case 'fsync':
        return () => {
          if ((lib.fsync(fd) as number) !== 0) fail(lib, 'fsync')
        }
      case 'fdatasync': {
        const call = lib.fdatasync!
        return () => {
          if ((call(fd) as number) !== 0) fail(lib, 'fdatasync')
        }
      }
      case 'fsync_writethrough':
        return () => {
          if ((lib.fcntl(fd, k.F_FULLFSYNC!, 'int', 0) as number) === -1) fail(lib, 'fcntl(F_FULLFSYNC)')
        }
      case 'barrier_fsync':
        return () => {
          if ((lib.fcntl(fd, k.F_BARRIERFSYNC!, 'int', 0) as number) === -1) fail(lib, 'fcntl(F_BARRIERFSYNC)')
        }
      default:
        return () => {}
    }
  }

  const writeOf = (method: MethodName, fd: number): ((buf: Buffer, offsetBytes: number) => void) => {
    const lib = c()
    if (method !== 'pwritev2_dsync') return (buf, offsetBytes) => pwriteAll(lib, fd, buf, offsetBytes)
    const pwritev2 = lib.pwritev2!
    const iovec = Buffer.alloc(16)
    return (buf, offsetBytes) => {
      iovec.writeBigUInt64LE(koffi.address(buf), 0)
      iovec.writeBigUInt64LE(BigInt(buf.length), 8)
      for (;;) {
        const n = Number(pwritev2(fd, iovec, 1, offsetBytes, RWF_DSYNC))
        if (n === buf.length) return
        if (n < 0) {
          const e = koffi.errno()
          if (e === k.EINTR) continue
          throw errnoError(lib, 'pwritev2', e)
        }
        // Short write: finish the rest and cover it with a data sync, so the promise still holds.
        pwriteAll(lib, fd, buf.subarray(n), offsetBytes + n)
        if ((lib.fsync(fd) as number) !== 0) fail(lib, 'fsync')
        return
      }
    }
  }

  const openFlags = (method: MethodName, direct: boolean): number => {
    let flags = k.O_RDWR
    if (method === 'open_sync') flags |= k.O_SYNC
    if (method === 'open_datasync') flags |= k.O_DSYNC ?? k.O_SYNC
    if (direct && k.O_DIRECT !== null) flags |= k.O_DIRECT
    return flags
  }

  /** Direct I/O where it is a descriptor flag set after open (macOS F_NOCACHE). */
  const afterOpen = (fd: number, direct: boolean): void => {
    if (direct && k.F_NOCACHE !== null) fcntlOrFail(fd, k.F_NOCACHE, 1, 'fcntl(F_NOCACHE)')
  }

  const checkDirect = (): void => {
    const d = methodTable().direct
    if (!d.applies) throw errnoError(c(), 'open', 22 /* EINVAL */)
  }

  const port: NativePort = {
    family: 'posix',
    table: methodTable,

    openData(path: string, method: MethodName, options: OpenOptions): DataFile {
      requireAvailable(method)
      if (options.direct) checkDirect()
      const lib = c()
      const fd = openFile(lib, path, openFlags(method, options.direct))
      try {
        afterOpen(fd, options.direct)
      } catch (error) {
        lib.close(fd)
        throw error
      }
      const write = writeOf(method, fd)
      const sync = syncOf(method, fd)
      let open = true
      return {
        write,
        sync,
        close() {
          if (!open) return
          open = false
          // A failed close is reported but never retried: the descriptor is gone either way.
          if ((lib.close(fd) as number) !== 0) fail(lib, 'close')
        },
      }
    },

    probeDirect(path: string): void {
      checkDirect()
      const lib = c()
      const fd = openFile(lib, path, k.O_WRONLY | k.O_CREAT | k.O_EXCL | (k.O_DIRECT ?? 0))
      try {
        afterOpen(fd, true)
      } finally {
        lib.close(fd)
      }
    },

    directorySync: { supported: true },
    renameReplacesOpenFiles: true,
    shell: 'posix',
    unsafeFileName: () => null, // every name but "." and ".." is a plain file name

    lockExclusive(path: string, create: boolean): FileLock | 'busy' | 'missing' {
      const lib = c()
      let fd: number
      try {
        // O_NONBLOCK: an open must never hang on a FIFO someone put at the path.
        fd = openFile(lib, path, (create ? k.O_RDWR | k.O_CREAT : k.O_RDONLY) | k.O_NONBLOCK)
      } catch (error) {
        if (!create && error instanceof NativeError && error.code === 'ENOENT') return 'missing'
        throw error
      }
      let stats
      try {
        stats = fstatSync(fd)
        if (!stats.isFile()) throw new NativeError('flock', 'EINVAL', -22, 'not a regular file', path)
        for (;;) {
          if ((lib.flock(fd, LOCK_EX | LOCK_NB) as number) === 0) break
          const e = koffi.errno()
          if (e === k.EAGAIN) {
            lib.close(fd)
            return 'busy'
          }
          if (e !== k.EINTR) throw errnoError(lib, 'flock', e, path)
        }
      } catch (error) {
        lib.close(fd)
        throw error
      }
      let held = true
      return {
        dev: stats.dev,
        ino: stats.ino,
        release() {
          if (held) lib.close(fd)
          held = false
        },
      }
    },

    connect(address: SocketAddress, timeoutMs: number, description: string): AckSocket {
      return connectSocket(c(), os, address, timeoutMs, description)
    },

    alignedBuffer,

    dropCache(path: string): boolean {
      const lib = c()
      if (lib.posixFadvise === null) return false
      const fd = openFile(lib, path, k.O_RDONLY)
      try {
        // posix_fadvise returns the error number instead of setting errno.
        const e = lib.posixFadvise(fd, 0, 0, POSIX_FADV_DONTNEED) as number
        if (e !== 0) throw errnoError(lib, 'posix_fadvise', e, path)
        return true
      } finally {
        lib.close(fd)
      }
    },

    fileSystemOf(path: string) {
      const lib = c()
      const layout = k.statfs
      if (layout === null || lib.fstatfs === null) return null
      let fd: number
      try {
        fd = openFile(lib, path, k.O_RDONLY | k.O_NONBLOCK)
      } catch {
        return null
      }
      try {
        const buf = Buffer.alloc(layout.bytes + 64)
        if ((lib.fstatfs(fd, buf) as number) !== 0) return null
        if (layout.kind === 'magic') {
          const magic = Number(buf.readBigInt64LE(layout.magicOffset))
          return { type: `0x${magic.toString(16)}`, magic, inMemory: memoryMagics.has(magic) }
        }
        const raw = buf.subarray(layout.nameOffset, layout.nameOffset + layout.nameBytes)
        const end = raw.indexOf(0)
        const type = raw.subarray(0, end < 0 ? raw.length : end).toString('latin1')
        if (!/^[A-Za-z0-9_.-]{1,15}$/.test(type)) return null
        return { type, magic: null, inMemory: memoryFileSystems.has(type) }
      } finally {
        lib.close(fd)
      }
    },

    bootId(): string | null {
      if (os === 'linux') {
        try {
          return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || null
        } catch {
          return null // no /proc: verify then cannot tell whether a reboot happened, and says so
        }
      }
      // macOS: kern.bootsessionuuid, a UUID made at each boot. The BSDs offer only kern.boottime,
      // which moves when the clock is stepped: no id rather than one that may change without a boot.
      const lib = c()
      if (os !== 'darwin' || lib.sysctlbyname === null) return null
      const out = Buffer.alloc(64)
      const length = Buffer.alloc(8)
      length.writeBigUInt64LE(BigInt(out.length))
      if ((lib.sysctlbyname('kern.bootsessionuuid', out, length, null, 0) as number) !== 0) return null
      const text = out.subarray(0, Number(length.readBigUInt64LE())).toString('latin1').replace(/\0+$/, '')
      return /^[0-9A-Fa-f-]{32,40}$/.test(text) ? text.toLowerCase() : null
    },

    descriptorLimit: () => descriptorLimit(c(), os),
    setDescriptorSoftLimit: (soft: number) => setDescriptorSoftLimit(c(), os, soft),
    get servedSockets() {
      return (served ??= servedSocketCalls(c(), os))
    },
  }
  let served: ServedSocketCalls | undefined
  return port
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
