/**
 * The Windows method table, as a pure function of what the run-time probe found (no koffi, no DLL:
 * unit-tested on Linux). PostgreSQL's names and calls are the reference: src/port/open.c maps O_DSYNC
 * to FILE_FLAG_WRITE_THROUGH and O_DIRECT to FILE_FLAG_NO_BUFFERING, src/port/win32fdatasync.c is
 * fdatasync = NtFlushBuffersFileEx(FLUSH_FLAGS_FILE_DATA_SYNC_ONLY) looked up in ntdll at run time
 * (src/port/win32ntdll.c), and fsync/fsync_writethrough are both FlushFileBuffers (_commit).
 */
import type { MethodName } from '../methods.js'
import type { MethodRow, PlatformTable } from '../port.js'

/** What the run-time lookup in ntdll found (index.ts probe()). */
export interface WindowsProbe {
  /** GetProcAddress(ntdll, "NtFlushBuffersFileEx") is not NULL (Windows 10 1709 and later; not Wine 8). */
  readonly ntFlushBuffersFileEx: boolean
  /** wine_get_version() when ntdll exports it (running under Wine), else null. */
  readonly wineVersion: string | null
}

const missingFlushEx = 'NtFlushBuffersFileEx is not exported by this ntdll.dll (it arrived in Windows 10 1709; Wine 8 lacks it)'

export function windowsTable(probe: WindowsProbe): PlatformTable {
  const flushEx = probe.ntFlushBuffersFileEx
  const rows: Record<MethodName, MethodRow> = {
    fsync: {
      name: 'fsync',
      available: true,
      calls: 'WriteFile, FlushFileBuffers',
      durable: true,
    },
    fdatasync: {
      name: 'fdatasync',
      available: flushEx,
      ...(flushEx ? {} : { reason: missingFlushEx }),
      calls: 'WriteFile, NtFlushBuffersFileEx(FLUSH_FLAGS_FILE_DATA_SYNC_ONLY)',
      caveat: 'NTFS implements the data-only sync; another file system may refuse the flag, which stops the run',
      durable: true,
    },
    open_sync: {
      name: 'open_sync',
      available: false,
      // PostgreSQL's win32_port.h defines O_DSYNC only; with O_SYNC undefined, open_sync does not exist there.
      reason: 'Windows has no O_SYNC: PostgreSQL defines only O_DSYNC there (FILE_FLAG_WRITE_THROUGH, which is open_datasync)',
      calls: 'open(O_SYNC), which Windows lacks',
      durable: true,
    },
    open_datasync: {
      name: 'open_datasync',
      available: true,
      calls: 'CreateFileW(FILE_FLAG_WRITE_THROUGH), WriteFile',
      caveat: 'NTFS sends write-through writes as FUA, which drivers and drives may ignore',
      durable: true,
    },
    fsync_writethrough: {
      name: 'fsync_writethrough',
      available: true,
      calls: 'WriteFile, FlushFileBuffers',
      caveat: 'the same calls as fsync on Windows, as in PostgreSQL',
      durable: true,
    },
    barrier_fsync: {
      name: 'barrier_fsync',
      available: false,
      reason: 'F_BARRIERFSYNC is a macOS fcntl; Windows has no ordering-only flush',
      calls: 'fcntl(F_BARRIERFSYNC), macOS only',
      durable: true,
    },
    flush_data_only: {
      name: 'flush_data_only',
      available: flushEx,
      ...(flushEx ? {} : { reason: missingFlushEx }),
      calls: 'WriteFile, NtFlushBuffersFileEx(FLUSH_FLAGS_FILE_DATA_ONLY)',
      caveat:
        "writes the data to the device without flushing the device's cache (git's batch mode): it should lose acknowledged writes on a drive with a volatile write cache",
      durable: false,
    },
    pwritev2_dsync: {
      name: 'pwritev2_dsync',
      available: false,
      reason: 'pwritev2(RWF_DSYNC) is a Linux call',
      calls: 'pwritev2(RWF_DSYNC), Linux only',
      durable: true,
    },
    none: {
      name: 'none',
      available: true,
      calls: 'WriteFile',
      durable: false,
    },
  }
  const notes: string[] = []
  if (probe.wineVersion !== null) {
    notes.push(
      `running under Wine ${probe.wineVersion}, which ignores FILE_FLAG_WRITE_THROUGH and FILE_FLAG_NO_BUFFERING and turns every flush into a Linux fsync: the calls are exercised, durability is not tested`,
    )
  }
  return {
    platform: 'win32',
    name: 'Windows',
    family: 'windows',
    methods: Object.values(rows),
    direct: {
      applies: true,
      how: "CreateFileW(FILE_FLAG_NO_BUFFERING): buffer address, length and offset are multiples of the volume's sector size",
    },
    notes,
  }
}
