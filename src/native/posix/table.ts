/**
 * The method tables of the POSIX systems: which methods each has, the calls each makes, and what it
 * promises there. Pure: the facts found at run time (is fdatasync exported?) come in as a probe, so
 * the tables of every system are unit-tested on any system.
 */
import type { MethodName } from '../methods.js'
import type { MethodRow, PlatformTable } from '../port.js'
import type { PosixOs } from './constants.js'

/** What only the running system can say. */
export interface PosixProbe {
  /**
   * libc exports fdatasync: always on Linux; on macOS libsystem_kernel exports the system call wrapper though the
   * SDK does not declare it (xnu bsd/kern/syscalls.master 187, libsyscall/xcodescripts/create-syscalls.pl);
   * FreeBSD 11.1+; OpenBSD 5.4+ (openbsd/src lib/libc/sys/fsync.2).
   */
  readonly fdatasync: boolean
}

const osNames: Record<PosixOs, string> = { linux: 'Linux', darwin: 'macOS', freebsd: 'FreeBSD', openbsd: 'OpenBSD' }

const available = (name: MethodName, calls: string, extra: { caveat?: string; durable?: boolean } = {}): MethodRow => ({
  name,
  available: true,
  calls,
  durable: extra.durable ?? true,
  ...(extra.caveat === undefined ? {} : { caveat: extra.caveat }),
})

const missing = (name: MethodName, calls: string, reason: string): MethodRow => ({
  name,
  available: false,
  reason,
  calls,
  durable: name !== 'none',
})

const macOsDriveCache =
  'on macOS this writes the data to the drive but does not ask the drive to flush its cache: a power cut can still lose it (fsync_writethrough does)'

/** Where a system's fdatasync first appeared, for the reason when it is missing. */
const fdatasyncSince: Record<PosixOs, string> = {
  linux: 'glibc has always exported it',
  darwin: 'macOS has the system call, number 187',
  freebsd: 'FreeBSD has it since 11.1',
  openbsd: 'OpenBSD has it since 5.4',
}

function rows(os: PosixOs, probe: PosixProbe): MethodRow[] {
  const osName = osNames[os]
  const fdatasync = probe.fdatasync
    ? available(
        'fdatasync',
        'pwrite, fdatasync',
        os === 'darwin'
          ? { caveat: macOsDriveCache }
          : os === 'openbsd'
            ? { caveat: "OpenBSD's fdatasync is fsync (fsync(2) BUGS): it syncs more than the data" }
            : {},
      )
    : missing('fdatasync', 'pwrite, fdatasync', `this ${osName} C library does not export fdatasync (${fdatasyncSince[os]})`)
  const fsync = available('fsync', 'pwrite, fsync', os === 'darwin' ? { caveat: macOsDriveCache } : {})
  const openSync = available('open_sync', 'open(O_SYNC), pwrite', os === 'darwin' ? { caveat: macOsDriveCache } : {})
  const openDatasync =
    os === 'openbsd'
      ? available('open_datasync', 'open(O_DSYNC), pwrite', { caveat: 'OpenBSD defines O_DSYNC as O_SYNC: this is open_sync' })
      : available(
          'open_datasync',
          'open(O_DSYNC), pwrite',
          // xnu bsd/vfs/vfs_vnops.c: "We treat O_DSYNC as O_FSYNC for now".
          os === 'darwin' ? { caveat: `macOS treats O_DSYNC as O_SYNC; ${macOsDriveCache}` } : {},
        )
  const fsyncWritethrough =
    os === 'darwin'
      ? available('fsync_writethrough', 'pwrite, fcntl(F_FULLFSYNC)')
      : missing(
          'fsync_writethrough',
          'pwrite, fcntl(F_FULLFSYNC) on macOS; FlushFileBuffers on Windows',
          os === 'linux'
            ? 'Linux has no write-through flush call (it is macOS F_FULLFSYNC or Windows FlushFileBuffers); on Linux fsync already asks the device to flush its cache'
            : `${osName} has no write-through flush call (it is macOS F_FULLFSYNC or Windows FlushFileBuffers); fsync already asks the device to flush its cache`,
        )
  const barrier =
    os === 'darwin'
      ? available('barrier_fsync', 'pwrite, fcntl(F_BARRIERFSYNC)', {
          // xnu bsd/kern/kern_descrip.c falls back to F_FULLFSYNC where the file system has no barrier.
          caveat:
            'an ordering barrier, not a flush: the latest writes may be lost at a cut, but what survives must be a prefix in write order (on a file system without barriers macOS does a full F_FULLFSYNC instead)',
          durable: false,
        })
      : missing('barrier_fsync', 'pwrite, fcntl(F_BARRIERFSYNC)', `F_BARRIERFSYNC is macOS only; ${osName} has no barrier-only sync`)
  const flushDataOnly = missing(
    'flush_data_only',
    'WriteFile, NtFlushBuffersFileEx(FLUSH_FLAGS_FILE_DATA_ONLY)',
    `flush_data_only is Windows only (NtFlushBuffersFileEx); ${osName} has no call that writes data without flushing the device`,
  )
  const pwritev2 =
    os === 'linux'
      ? available('pwritev2_dsync', 'pwritev2(RWF_DSYNC)')
      : missing('pwritev2_dsync', 'pwritev2(RWF_DSYNC)', `pwritev2 with RWF_DSYNC is Linux only; ${osName} has no per-write sync flag`)
  const none = available('none', 'pwrite', {
    durable: false,
    caveat: 'never synced: the control, which a real power cut must make lose records',
  })
  return [fsync, fdatasync, openSync, openDatasync, fsyncWritethrough, barrier, flushDataOnly, pwritev2, none]
}

export function posixTable(os: PosixOs, probe: PosixProbe): PlatformTable {
  const direct: PlatformTable['direct'] =
    os === 'darwin'
      ? { applies: true, how: 'fcntl(F_NOCACHE) after open: the data bypasses the unified buffer cache' }
      : os === 'openbsd'
        ? { applies: false, reason: 'OpenBSD has no O_DIRECT and no other way to bypass its buffer cache' }
        : { applies: true, how: 'open(O_DIRECT): buffer address, length and offset aligned to the logical block' }
  return { platform: os, name: osNames[os], family: 'posix', methods: rows(os, probe), direct, notes: [] }
}
