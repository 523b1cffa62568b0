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
  /** libc exports fdatasync (FreeBSD 11.1+, newer OpenBSD; always on Linux and macOS). */
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

const missing = (name: MethodName, calls: string, reason: string): MethodRow => ({ name, available: false, reason, calls, durable: name !== 'none' })

const macOsDriveCache = 'on macOS this writes the data to the drive but does not ask the drive to flush its cache: a power cut can still lose it (fsync_writethrough does)'

function rows(os: PosixOs, probe: PosixProbe): MethodRow[] {
  const osName = osNames[os]
  const fdatasync = probe.fdatasync
    ? available('fdatasync', 'pwrite, fdatasync', os === 'darwin' ? { caveat: macOsDriveCache } : {})
    : missing('fdatasync', 'pwrite, fdatasync', `this ${osName} C library does not export fdatasync`)
  const fsync = available('fsync', 'pwrite, fsync', os === 'darwin' ? { caveat: macOsDriveCache } : {})
  const openSync = available('open_sync', 'open(O_SYNC), pwrite', os === 'darwin' ? { caveat: macOsDriveCache } : {})
  const openDatasync =
    os === 'openbsd'
      ? available('open_datasync', 'open(O_DSYNC), pwrite', { caveat: 'OpenBSD defines O_DSYNC as O_SYNC: this is open_sync' })
      : available('open_datasync', 'open(O_DSYNC), pwrite', os === 'darwin' ? { caveat: macOsDriveCache } : {})
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
          caveat: 'an ordering barrier, not a flush: the latest writes may be lost at a cut, but what survives must be a prefix in write order',
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
  const none = available('none', 'pwrite', { durable: false, caveat: 'never synced: the control, which a real power cut must make lose records' })
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
