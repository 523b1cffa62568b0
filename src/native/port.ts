/**
 * The one interface between plugcheck and the operating system. Two ports implement it, chosen in
 * src/native/index.ts by platform family: posix/ (Linux, macOS, FreeBSD, OpenBSD, through libc) and
 * windows/ (kernel32, ntdll, ws2_32). Nothing outside src/native/ imports koffi or names a platform;
 * everything the rest of the code needs from the OS, and nothing more, is here.
 *
 * Every failing call throws a NativeError (errors.ts) whose `code` is the POSIX name Node would use
 * (ENOENT, EACCES, EINVAL, ENOSPC, ...), so callers test one set of codes on every platform.
 */
import type { MethodName } from './methods.js'

/** One row of a platform's method table, as `plugcheck methods` prints it. */
export interface MethodRow {
  readonly name: MethodName
  readonly available: boolean
  /** Why not, when unavailable: names the missing call or flag. */
  readonly reason?: string
  /** The calls one durable write makes, e.g. "WriteFile, FlushFileBuffers". */
  readonly calls: string
  /** What the method promises on this platform, when it is less than the name suggests. */
  readonly caveat?: string
  /** False for the methods that never ask for durability (none) or only for part of it (flush_data_only). */
  readonly durable: boolean
}

export type DirectSupport = { readonly applies: true; readonly how: string } | { readonly applies: false; readonly reason: string }

export interface PlatformTable {
  /** process.platform */
  readonly platform: string
  /** "Linux", "macOS", "FreeBSD", "OpenBSD", "Windows" */
  readonly name: string
  readonly family: 'posix' | 'windows'
  readonly methods: readonly MethodRow[]
  /** What --direct does here. */
  readonly direct: DirectSupport
  /** Said once under the table, e.g. that Wine ignores write-through. */
  readonly notes: readonly string[]
}

/** A data file opened for one method. write + sync is one durable write. */
export interface DataFile {
  /**
   * The method's positioned write of all of buf at offsetBytes (short writes are finished). For the
   * methods that sync at open (open_sync, open_datasync) or per write (pwritev2_dsync), durable when
   * it returns. With --direct, buf, its length and offsetBytes must be aligned (alignedBuffer).
   */
  write(buf: Buffer, offsetBytes: number): void
  /** The method's sync call after the writes (fsync, fdatasync, F_FULLFSYNC, FlushFileBuffers, ...); a no-op where write was durable or for none. */
  sync(): void
  close(): void
}

/**
 * The directory of a `--pattern files` run (record/files-layout.ts), held open for the run: its record
 * files are made, published and deleted by name inside it, and its entries made durable with the
 * method's directory sync (methods.ts directorySyncs). Every failing call throws a NativeError.
 */
export interface RecordDirectory {
  /**
   * Creates the file name (which must not exist: O_EXCL, CREATE_NEW) with the method's open flags
   * (and --direct's), for the method's write and sync; the caller closes it.
   */
  create(name: string): DataFile
  /** rename(from, to), replacing to; on Windows MoveFileExW(MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH). */
  rename(from: string, to: string): void
  /** A second name for the file from (link(2); Windows CreateHardLinkW). */
  link(from: string, to: string): void
  /** Deletes name (unlink(2); Windows DeleteFileW). */
  unlink(name: string): void
  /** The method's directory sync; nothing for none, and nothing where the OS cannot flush a directory (Windows). */
  sync(): void
  close(): void
}

export interface OpenOptions {
  readonly direct: boolean
}

export type DirectorySync = { readonly supported: true } | { readonly supported: false; readonly reason: string }

/** An exclusive lock held on a file until release() (or the process's exit, even SIGKILL). */
export interface FileLock {
  /** The locked file's identity, as Node's fs.statSync reports it (st_dev/st_ino; on Windows the volume serial and file index). */
  readonly dev: number
  readonly ino: number
  release(): void
}

/** An address from the OS resolver, ready to connect to. */
export interface SocketAddress {
  readonly address: string
  readonly family: 4 | 6
  readonly port: number
  /** IPv6 scope (interface index) of a link-local address such as fe80::1%eth0; 0 otherwise. */
  readonly scopeId: number
}

/**
 * A blocking TCP connection for the writer's synchronous loop. Every blocking call is bounded by the
 * timeout given to connect.
 */
export interface AckSocket {
  /** Sends all of buf; a dead peer is an error (never a signal), a peer that stopped reading is ETIMEDOUT. */
  sendAll(buf: Buffer): void
  /** Non-blocking receive: bytes read, 0 when nothing is waiting, -1 when the peer closed. */
  recvNow(buf: Buffer): number
  /** Blocking receive bounded by the timeout: bytes read, 0 on time-out, -1 when the peer closed. */
  recvWait(buf: Buffer): number
  /** Waits at most timeoutMs for data (or close, or error); true when there is some. */
  waitReadable(timeoutMs: number): boolean
  close(): void
}

export interface NativePort {
  readonly family: 'posix' | 'windows'
  /** This platform's method table; the same table decides for write, bench, verify and `methods`. */
  table(): PlatformTable
  /** Opens an existing file read-write for method (its open flags, and --direct). Throws NativeError. */
  openData(path: string, method: MethodName, options: OpenOptions): DataFile
  /** Opens the directory at path for a files run of method (throws NativeError, ENOTDIR when it is no directory). */
  openRecordDirectory(path: string, method: MethodName, options: OpenOptions): RecordDirectory
  /**
   * Creates path (which must not exist) with the --direct flags and closes it; throws NativeError
   * EINVAL where the file system refuses direct I/O. The caller removes the file.
   */
  probeDirect(path: string): void
  /**
   * Whether a directory can be fsynced to make its entries durable after a rename (callers then use
   * Node's fsync on the directory); not where the OS has no such call, with the reason.
   */
  readonly directorySync: DirectorySync
  /**
   * Whether rename may replace a file that another handle of ours holds open (POSIX: yes; Windows:
   * not without POSIX rename semantics, so the old file's lock is released just before the rename).
   */
  readonly renameReplacesOpenFiles: boolean
  /**
   * Why a file plugcheck would create at path cannot be a plain file here (Windows: a reserved device
   * name such as NUL or COM1.dat, a trailing dot or space); null when it can.
   */
  unsafeFileName(path: string): string | null
  /** How a path is quoted in a command the user pastes into this platform's shell. */
  readonly shell: 'posix' | 'windows'
  /**
   * Takes an exclusive lock on the file at path, creating it when create is set. 'missing' when there
   * is no file (and create is not set), 'busy' when another process holds the lock. The lock follows
   * the file through a rename. Throws NativeError for anything else.
   */
  lockExclusive(path: string, create: boolean): FileLock | 'busy' | 'missing'
  /** Connects a blocking TCP socket; timeoutMs bounds the connect and every later blocking call. */
  connect(address: SocketAddress, timeoutMs: number, description: string): AckSocket
  /** A zero-filled buffer whose address is a multiple of alignmentBytes (for direct I/O). */
  alignedBuffer(sizeBytes: number, alignmentBytes: number): Buffer
  /** Asks the OS to drop path's cached pages (bench's cold start); false where it cannot. */
  dropCache(path: string): boolean
  /**
   * The file system holding path: its type name ("ext4", "tmpfs", "apfs", "NTFS", ...), and whether it
   * lives in memory. null when the OS will not say.
   */
  fileSystemOf(path: string): { readonly type: string; readonly magic: number | null; readonly inMemory: boolean } | null
  /** An id that changes at every boot (Linux boot_id, macOS kern.bootsessionuuid, ...); null where there is none. */
  bootId(): string | null
  /**
   * The limit on this process's open descriptors (RLIMIT_NOFILE), soft and hard; Infinity for
   * RLIM_INFINITY. null where there is no such limit (Windows: a process's handles are bounded by
   * memory, and Node's sockets are not CRT descriptors).
   */
  descriptorLimit(): DescriptorLimit | null
  /** Sets the soft descriptor limit (at most the hard one). Throws NativeError (EINVAL, EPERM). */
  setDescriptorSoftLimit(soft: number): void
  /**
   * What the listener can do to a served TCP socket by its descriptor (Node's socket._handle.fd);
   * null where Node's sockets have no descriptor to give (Windows).
   */
  readonly servedSockets: ServedSocketCalls | null
}

export interface DescriptorLimit {
  readonly soft: number
  readonly hard: number
}

export interface ServedSocketCalls {
  /**
   * Sets SO_SNDBUF to sizeBytes and returns what the kernel then holds at most (Linux doubles the
   * value for its bookkeeping). Throws NativeError.
   */
  boundSendBuffer(fd: number, sizeBytes: number): number
  /** Bytes in the kernel's send queue not yet taken by the peer; null where the system cannot say. */
  queuedSendBytes(fd: number): number | null
  /**
   * SO_LINGER with a zero time-out: the next close discards what is queued and sends a reset, so a
   * dropped peer that never reads holds no kernel memory. Throws NativeError.
   */
  abortOnClose(fd: number): void
}
