export const methodNames = [
  'fsync',
  'fdatasync',
  'open_sync',
  'open_datasync',
  'fsync_writethrough',
  'pwritev2_dsync',
  'none',
] as const
export type MethodName = (typeof methodNames)[number]

export interface SyncMethodImpl {
  readonly name: MethodName
  /** Flags the method needs at open() (fcntl cannot add O_SYNC/O_DSYNC later). */
  readonly openFlags: number
  /** Writes buf at offsetBytes and, when this returns, the method's durability promise covers it. Throws NativeError. */
  writeDurable(fd: number, buf: Buffer, offsetBytes: number): void
}
