/**
 * Sync method names, as PostgreSQL's wal_sync_method names them, plus plugcheck's own: pwritev2_dsync
 * (Linux's per-write RWF_DSYNC), barrier_fsync (macOS F_BARRIERFSYNC), flush_data_only (Windows
 * NtFlushBuffersFileEx with FLUSH_FLAGS_FILE_DATA_ONLY) and none (the control). Which of them a
 * platform has, and how each is done there, is that platform's table (posix/table.ts, windows/table.ts).
 */
export const methodNames = [
  'fsync',
  'fdatasync',
  'open_sync',
  'open_datasync',
  'fsync_writethrough',
  'barrier_fsync',
  'flush_data_only',
  'pwritev2_dsync',
  'none',
] as const
export type MethodName = (typeof methodNames)[number]

export function isMethodName(name: string): name is MethodName {
  return (methodNames as readonly string[]).includes(name)
}

/**
 * How `write --pattern files` makes a directory's entries durable (a create, a rename, an unlink),
 * per family and method: the call on the directory (a descriptor held open for the run) after the
 * record file's own sync. The directory gets the same kind of sync as the file (a data sync where the
 * method syncs data only), and nothing for none. `plugcheck methods` prints it and the ports do it:
 *   fsync     fsync(dirfd)
 *   fdatasync fdatasync(dirfd)
 *   fullfsync fcntl(dirfd, F_FULLFSYNC) (macOS: also asks the drive to flush its cache)
 *   barrier   fcntl(dirfd, F_BARRIERFSYNC) (macOS: an ordering barrier)
 *   none      no directory sync (the control)
 *   cannot    Windows: no call flushes a directory (FlushFileBuffers on a directory handle fails);
 *             the publish is MoveFileExW(MOVEFILE_WRITE_THROUGH), which returns once the move is on the disk
 */
export type DirectorySyncCall = 'fsync' | 'fdatasync' | 'fullfsync' | 'barrier' | 'none' | 'cannot'

export const directorySyncs: Readonly<Record<'posix' | 'windows', Readonly<Record<MethodName, DirectorySyncCall>>>> = {
  posix: {
    fsync: 'fsync',
    fdatasync: 'fdatasync',
    open_sync: 'fsync',
    open_datasync: 'fdatasync',
    fsync_writethrough: 'fullfsync',
    barrier_fsync: 'barrier',
    flush_data_only: 'fdatasync', // Windows only: never reached on a POSIX system
    pwritev2_dsync: 'fsync',
    none: 'none',
  },
  windows: {
    fsync: 'cannot',
    fdatasync: 'cannot',
    open_sync: 'cannot',
    open_datasync: 'cannot',
    fsync_writethrough: 'cannot',
    barrier_fsync: 'cannot',
    flush_data_only: 'cannot',
    pwritev2_dsync: 'cannot',
    none: 'none',
  },
}

/** The directory sync as `plugcheck methods` names it. */
export const directorySyncText: Readonly<Record<DirectorySyncCall, string>> = {
  fsync: 'fsync(directory)',
  fdatasync: 'fdatasync(directory)',
  fullfsync: 'fcntl(directory, F_FULLFSYNC)',
  barrier: 'fcntl(directory, F_BARRIERFSYNC)',
  none: 'none (the control)',
  cannot: 'none: Windows cannot flush a directory (MoveFileExW with MOVEFILE_WRITE_THROUGH instead)',
}
