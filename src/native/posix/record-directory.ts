/**
 * A files run's directory on a POSIX system (record/files-layout.ts): one descriptor of the directory
 * held open for the run, every record file made, published and deleted relative to it (openat,
 * renameat, linkat, unlinkat), so no path is resolved again while the run goes, and its entries made
 * durable with the method's directory sync (methods.ts directorySyncs: fsync, fdatasync, F_FULLFSYNC,
 * F_BARRIERFSYNC on the directory's descriptor). A failed sync is never retried.
 */
import { directorySyncs, type MethodName } from '../methods.js'
import type { NativePort, OpenOptions, PlatformTable, RecordDirectory } from '../port.js'
import type { PosixConstants } from './constants.js'
import { checkDirect, openedDataFile, openFlags, requireAvailable } from './data-files.js'
import { errnoError, fail, openFile, type Libc } from './libc.js'
import koffi from 'koffi'

/** The port's openRecordDirectory, on the C library loaded on first use (c) and the system's constants (k). */
export function recordDirectoryCalls(
  c: () => Libc,
  k: PosixConstants,
  methodTable: () => PlatformTable,
): Pick<NativePort, 'openRecordDirectory'> {
  return {
    openRecordDirectory(path: string, method: MethodName, options: OpenOptions): RecordDirectory {
      requireAvailable(methodTable, method)
      if (options.direct) checkDirect(c, methodTable)
      const lib = c()
      const dirFd = openFile(lib, path, k.O_RDONLY)
      const syncDirectory = directorySyncOf(lib, k, method, dirFd, path)
      const createFlags = openFlags(k, method, options.direct) | k.O_CREAT | k.O_EXCL
      let open = true
      return {
        create(name) {
          return openedDataFile(c, k, method, openAt(lib, dirFd, name, createFlags), options.direct)
        },
        rename(from, to) {
          if ((lib.renameat(dirFd, from, dirFd, to) as number) !== 0) fail(lib, 'renameat', `${path}/${from}`)
        },
        link(from, to) {
          if ((lib.linkat(dirFd, from, dirFd, to, 0) as number) !== 0) fail(lib, 'linkat', `${path}/${to}`)
        },
        unlink(name) {
          if ((lib.unlinkat(dirFd, name, 0) as number) !== 0) fail(lib, 'unlinkat', `${path}/${name}`)
        },
        sync: syncDirectory,
        close() {
          if (!open) return
          open = false
          if ((lib.close(dirFd) as number) !== 0) fail(lib, 'close', path)
        },
      }
    },
  }
}

/** openat, retried when a signal interrupts it (as open is, libc.ts openFile). */
function openAt(lib: Libc, dirFd: number, name: string, flags: number): number {
  for (;;) {
    const fd = lib.openat(dirFd, name, flags | lib.k.O_CLOEXEC, 'uint32_t', 0o644) as number
    if (fd >= 0) return fd
    const e = koffi.errno()
    if (e !== lib.k.EINTR) throw errnoError(lib, 'openat', e, name)
  }
}

/** The method's directory sync (methods.ts directorySyncs.posix), as a call on the directory's descriptor. */
function directorySyncOf(lib: Libc, k: PosixConstants, method: MethodName, dirFd: number, path: string): () => void {
  const call = directorySyncs.posix[method]
  switch (call) {
    case 'fsync':
      return () => {
        if ((lib.fsync(dirFd) as number) !== 0) fail(lib, 'fsync', path)
      }
    case 'fdatasync': {
      const fdatasync = lib.fdatasync
      if (fdatasync === null) throw new Error(`${method} on a C library without fdatasync (the table says n/a)`)
      return () => {
        if ((fdatasync(dirFd) as number) !== 0) fail(lib, 'fdatasync', path)
      }
    }
    case 'fullfsync':
    case 'barrier': {
      const cmd = call === 'fullfsync' ? k.F_FULLFSYNC : k.F_BARRIERFSYNC
      const name = call === 'fullfsync' ? 'fcntl(F_FULLFSYNC)' : 'fcntl(F_BARRIERFSYNC)'
      if (cmd === null) throw new Error(`${method} on a system without ${name} (the table says n/a)`)
      return () => {
        if ((lib.fcntl(dirFd, cmd, 'int', 0) as number) === -1) fail(lib, name, path)
      }
    }
    case 'none':
    case 'cannot':
      return () => {}
  }
}
