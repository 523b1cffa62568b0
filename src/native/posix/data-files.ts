/**
 * The POSIX port's data files: opened with each method's flags (open_sync, open_datasync, direct I/O),
 * written, and synced by each method's call after its writes (fsync, fdatasync, F_FULLFSYNC,
 * F_BARRIERFSYNC, pwritev2 with RWF_DSYNC); and a file's pages dropped from the cache.
 * A failed sync is never retried.
 */
import koffi from 'koffi'
import type { MethodName } from '../methods.js'
import type { DataFile, NativePort, OpenOptions, PlatformTable } from '../port.js'
import { POSIX_FADV_DONTNEED, RWF_DSYNC, type PosixConstants } from './constants.js'
import { errnoError, fail, openFile, pwriteAll, type Libc } from './libc.js'

/** The port's openData, probeDirect and dropCache, on the C library loaded on first use (c) and the system's constants (k). */
export function dataFileCalls(
  c: () => Libc,
  k: PosixConstants,
  methodTable: () => PlatformTable,
): Pick<NativePort, 'openData' | 'probeDirect' | 'dropCache'> {
  return {
    openData(path: string, method: MethodName, options: OpenOptions): DataFile {
      requireAvailable(methodTable, method)
      if (options.direct) checkDirect(c, methodTable)
      const lib = c()
      return openedDataFile(c, k, method, openFile(lib, path, openFlags(k, method, options.direct)), options.direct)
    },

    probeDirect(path: string): void {
      checkDirect(c, methodTable)
      const lib = c()
      const fd = openFile(lib, path, k.O_WRONLY | k.O_CREAT | k.O_EXCL | (k.O_DIRECT ?? 0))
      try {
        afterOpen(c, k, fd, true)
      } finally {
        lib.close(fd)
      }
    },

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
  }
}

/** A descriptor just opened for method made a DataFile (--direct's flags set first); closed if that fails. */
export function openedDataFile(c: () => Libc, k: PosixConstants, method: MethodName, fd: number, direct: boolean): DataFile {
  try {
    afterOpen(c, k, fd, direct)
  } catch (error) {
    c().close(fd)
    throw error
  }
  return dataFileOf(c, k, method, fd)
}

/** The method's write, sync and close on an open descriptor (a data file, or a files run's record file). */
export function dataFileOf(c: () => Libc, k: PosixConstants, method: MethodName, fd: number): DataFile {
  const lib = c()
  const write = writeOf(c, k, method, fd)
  const sync = syncOf(c, k, method, fd)
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
}

/** Opening a method this system lacks is a programmer error: callers check its availability first (registry.ts). */
export function requireAvailable(methodTable: () => PlatformTable, method: MethodName): void {
  const row = methodTable().methods.find((m) => m.name === method)
  if (row === undefined || !row.available) throw new Error(`openData(${method}) on an unavailable method: ${row?.reason ?? 'unknown'}`)
}

/** fcntl, retried when a signal interrupts it; any other failure is thrown. */
function fcntlOrFail(c: () => Libc, k: PosixConstants, fd: number, cmd: number, arg: number, syscall: string): void {
  for (;;) {
    if ((c().fcntl(fd, cmd, 'int', arg) as number) !== -1) return
    const e = koffi.errno()
    if (e !== k.EINTR) throw errnoError(c(), syscall, e)
  }
}

/** The sync that follows the writes, per method. A failed sync is never retried: the kernel may have dropped the pages. */
function syncOf(c: () => Libc, k: PosixConstants, method: MethodName, fd: number): () => void {
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

/** The write per method: pwrite looped over short writes, or for pwritev2_dsync one pwritev2 that syncs its own data (RWF_DSYNC). */
function writeOf(c: () => Libc, k: PosixConstants, method: MethodName, fd: number): (buf: Buffer, offsetBytes: number) => void {
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

/** The open flags per method: O_SYNC, O_DSYNC (O_SYNC where a system has none), and O_DIRECT where direct I/O is an open flag. */
export function openFlags(k: PosixConstants, method: MethodName, direct: boolean): number {
  let flags = k.O_RDWR
  if (method === 'open_sync') flags |= k.O_SYNC
  if (method === 'open_datasync') flags |= k.O_DSYNC ?? k.O_SYNC
  if (direct && k.O_DIRECT !== null) flags |= k.O_DIRECT
  return flags
}

/** Direct I/O where it is a descriptor flag set after open (macOS F_NOCACHE). */
export function afterOpen(c: () => Libc, k: PosixConstants, fd: number, direct: boolean): void {
  if (direct && k.F_NOCACHE !== null) fcntlOrFail(c, k, fd, k.F_NOCACHE, 1, 'fcntl(F_NOCACHE)')
}

/** Direct I/O asked for where this system has none: EINVAL, as open itself would answer. */
export function checkDirect(c: () => Libc, methodTable: () => PlatformTable): void {
  const d = methodTable().direct
  if (!d.applies) throw errnoError(c(), 'open', 22 /* EINVAL */)
}
