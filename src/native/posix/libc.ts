/**
 * The bindings to the C library of a POSIX system (Linux glibc, macOS libSystem, FreeBSD and OpenBSD
 * libc), loaded when the posix port is first used. Calls that a system may lack (fdatasync, pwritev2,
 * posix_fadvise, sysctlbyname) are looked up at run time and are null where missing.
 *
 * Every failing call becomes a NativeError built from errno, read immediately after the call (any
 * other FFI call in between may overwrite it). Assumes 64-bit off_t and size_t (64-bit systems only).
 */
import koffi from 'koffi'
import { getSystemErrorName } from 'node:util'
import { NativeError } from '../errors.js'
import type { PosixConstants } from './constants.js'

koffi.alias('ssize_t', 'intptr_t')
koffi.alias('off_t', 'int64_t')

type Fn = ReturnType<ReturnType<typeof koffi.load>['func']>

export interface Libc {
  readonly k: PosixConstants
  open: Fn
  openat: Fn
  renameat: Fn
  linkat: Fn
  unlinkat: Fn
  close: Fn
  pwrite: Fn
  fsync: Fn
  fcntl: Fn
  flock: Fn
  strerror: Fn
  socket: Fn
  connect: Fn
  setsockopt: Fn
  getsockopt: Fn
  send: Fn
  recv: Fn
  poll: Fn
  getrlimit: Fn
  setrlimit: Fn
  ioctl: Fn
  fstatfs: Fn | null
  fdatasync: Fn | null
  pwritev2: Fn | null
  posixFadvise: Fn | null
  sysctlbyname: Fn | null
}

function loadFirst(names: readonly string[]): ReturnType<typeof koffi.load> {
  let last: unknown
  for (const name of names) {
    try {
      return koffi.load(name)
    } catch (error) {
      last = error
    }
  }
  throw new Error(`could not load the C library (${names.join(', ')}): ${(last as Error).message}`)
}

export function loadLibc(k: PosixConstants): Libc {
  const lib = loadFirst(k.libc)
  /** A prototype string, or [name, result, parameters] for symbol names a prototype cannot spell (fstatfs$INODE64). */
  const optional = (signature: string | readonly [string, string, string[]]): Fn | null => {
    try {
      return typeof signature === 'string' ? lib.func(signature) : lib.func(signature[0], signature[1], signature[2])
    } catch {
      return null // "Cannot find function": this system's C library lacks it
    }
  }
  return {
    k,
    // open(2) and fcntl(2) are variadic: declared so, the extra argument goes where the ABI wants it
    // (on the stack on Apple arm64, in a register elsewhere).
    open: lib.func('int open(const char *path, int flags, ...)'),
    openat: lib.func('int openat(int dirfd, const char *path, int flags, ...)'),
    renameat: lib.func('int renameat(int fromdirfd, const char *from, int todirfd, const char *to)'),
    linkat: lib.func('int linkat(int fromdirfd, const char *from, int todirfd, const char *to, int flags)'),
    unlinkat: lib.func('int unlinkat(int dirfd, const char *path, int flags)'),
    close: lib.func('int close(int fd)'),
    pwrite: lib.func('ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset)'),
    fsync: lib.func('int fsync(int fd)'),
    fcntl: lib.func('int fcntl(int fd, int cmd, ...)'),
    flock: lib.func('int flock(int fd, int operation)'),
    strerror: lib.func('const char *strerror(int errnum)'),
    socket: lib.func('int socket(int domain, int type, int protocol)'),
    connect: lib.func('int connect(int fd, const void *addr, uint32_t addrlen)'),
    setsockopt: lib.func('int setsockopt(int fd, int level, int name, const void *value, uint32_t len)'),
    getsockopt: lib.func('int getsockopt(int fd, int level, int name, void *value, void *len)'),
    send: lib.func('ssize_t send(int fd, const void *buf, size_t len, int flags)'),
    recv: lib.func('ssize_t recv(int fd, void *buf, size_t len, int flags)'),
    poll: lib.func(`int poll(void *fds, ${k.nfdsType} nfds, int timeout)`),
    getrlimit: lib.func('int getrlimit(int resource, void *rlim)'),
    setrlimit: lib.func('int setrlimit(int resource, const void *rlim)'),
    // Variadic in every C library (request is an unsigned long): the pointer goes where the ABI wants it.
    ioctl: lib.func('int ioctl(int fd, unsigned long request, ...)'),
    fstatfs: k.statfs === null ? null : optional([k.statfs.symbol, 'int', ['int', 'void *']]),
    fdatasync: optional('int fdatasync(int fd)'),
    pwritev2: optional('ssize_t pwritev2(int fd, const void *iov, int iovcnt, off_t offset, int flags)'),
    posixFadvise: optional('int posix_fadvise(int fd, off_t offset, off_t len, int advice)'),
    sysctlbyname: optional('int sysctlbyname(const char *name, void *oldp, size_t *oldlenp, const void *newp, size_t newlen)'),
  }
}

/** Linux errnos (their numbers are Linux's own) getSystemErrorName calls "Unknown system error -N". */
const unnamedErrnos: Readonly<Record<number, string>> = { 74: 'EBADMSG', 117: 'EUCLEAN' }

/** "permission denied": the C library's text, lower case as Node prints it. */
export function errnoError(c: Libc, syscall: string, errnoValue: number, path?: string): NativeError {
  let code: string
  try {
    code = getSystemErrorName(-errnoValue)
  } catch {
    code = `E${errnoValue}`
  }
  // libuv names neither EBADMSG (ext4's failed checksum) nor EUCLEAN (a corrupted file system).
  if (code.startsWith('Unknown system error'))
    code = (process.platform === 'linux' ? unnamedErrnos[errnoValue] : undefined) ?? `errno ${errnoValue}`
  const text = String(c.strerror(errnoValue) ?? `errno ${errnoValue}`)
  return new NativeError(syscall, code, -errnoValue, text.charAt(0).toLowerCase() + text.slice(1), path)
}

/** Throws the error of the call that just failed. */
export function fail(c: Libc, syscall: string, path?: string): never {
  throw errnoError(c, syscall, koffi.errno(), path)
}

export function openFile(c: Libc, path: string, flags: number, mode = 0o644): number {
  for (;;) {
    const fd = c.open(path, flags | c.k.O_CLOEXEC, 'uint32_t', mode) as number
    if (fd >= 0) return fd
    const e = koffi.errno()
    if (e !== c.k.EINTR) throw errnoError(c, 'open', e, path)
  }
}

/** Writes all of buf at offset, looping over short writes. */
export function pwriteAll(c: Libc, fd: number, buf: Buffer, offset: number): void {
  let done = 0
  while (done < buf.length) {
    const part = done === 0 ? buf : buf.subarray(done)
    const n = Number(c.pwrite(fd, part, part.length, offset + done))
    if (n < 0) {
      const e = koffi.errno()
      if (e === c.k.EINTR) continue
      throw errnoError(c, 'pwrite', e)
    }
    if (n === 0) throw errnoError(c, 'pwrite', c.k.ENOSPC) // no progress
    done += n
  }
}
