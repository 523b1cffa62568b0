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
