/**
 * The numbers plugcheck passes to libc, per operating system, from each system's own headers (cited
 * per value). Pure data: unit tests check every table against the headers' values, and the port
 * checks the running system's table against Node's fs.constants (compiled against the same headers)
 * before its first call, failing loudly on any mismatch.
 */

export type PosixOs = 'linux' | 'darwin' | 'freebsd' | 'openbsd'

export interface PosixConstants {
  /** How koffi loads the C library. */
  readonly libc: readonly string[]
  // open(2) flags: <fcntl.h>
  readonly O_RDONLY: number
  readonly O_WRONLY: number
  readonly O_RDWR: number
  readonly O_NONBLOCK: number
  readonly O_CREAT: number
  readonly O_TRUNC: number
  readonly O_EXCL: number
  readonly O_SYNC: number
  /** null where the system has none of its own. */
  readonly O_DSYNC: number | null
  readonly O_DIRECT: number | null
  readonly O_CLOEXEC: number
  // fcntl(2) commands (macOS only: <sys/fcntl.h>)
  readonly F_NOCACHE: number | null
  readonly F_FULLFSYNC: number | null
  readonly F_BARRIERFSYNC: number | null
  // sockets: <sys/socket.h>, <netinet/tcp.h>
  readonly SOL_SOCKET: number
  readonly SO_SNDTIMEO: number
  readonly SO_RCVTIMEO: number
  /** macOS has no MSG_NOSIGNAL; SO_NOSIGPIPE on the socket does the same. */
  readonly MSG_NOSIGNAL: number | null
  readonly SO_NOSIGPIPE: number | null
  readonly MSG_DONTWAIT: number
  /** null: set FD_CLOEXEC with fcntl after socket() (macOS). */
  readonly SOCK_CLOEXEC: number | null
  readonly SOCK_STREAM: 1
  readonly IPPROTO_TCP: 6
  readonly TCP_NODELAY: 1
  // errno values: <errno.h> (sys/errno.h on the BSDs)
  readonly EINTR: 4
  readonly EAGAIN: number
  readonly EINPROGRESS: number
  readonly ETIMEDOUT: number
  readonly ENOSPC: 28
  // struct statfs: where the file system's type is
  readonly statfs: { readonly bytes: number; readonly symbol: string } & ({ readonly kind: 'magic'; readonly magicOffset: number } | { readonly kind: 'name'; readonly nameOffset: number; readonly nameBytes: number }) | null
  /** poll(2)'s nfds_t: unsigned long on Linux, unsigned int on the BSDs and macOS (<poll.h>). */
  readonly nfdsType: 'uint64_t' | 'uint32_t'
}

// <sys/file.h> flock(2), identical everywhere.
export const LOCK_EX = 2
export const LOCK_NB = 4
// <poll.h>, identical everywhere.
export const POLLIN = 0x1
// <fcntl.h> F_SETFD / FD_CLOEXEC, identical everywhere.
export const F_SETFD = 2
export const FD_CLOEXEC = 1
// <linux/fs.h> RWF_DSYNC (pwritev2, Linux 4.7+)
export const RWF_DSYNC = 0x2
// <fcntl.h> POSIX_FADV_DONTNEED on Linux
export const POSIX_FADV_DONTNEED = 4

/**
 * Linux, glibc: asm-generic/fcntl.h, with x86_64's values; arm64 differs only in O_DIRECT and
 * O_DIRECTORY/O_NOFOLLOW (arch/arm64/include/uapi/asm/fcntl.h). Sockets: asm-generic/socket.h
 * (SO_RCVTIMEO_OLD 20, SO_SNDTIMEO_OLD 21: the 64-bit timeval ones on 64-bit), bits/socket.h (MSG_*).
 * errno: asm-generic/errno-base.h and errno.h. statfs: bits/statfs.h, f_type (long) first.
 */
function linux(arch: string): PosixConstants {
  return {
    libc: ['libc.so.6'],
    O_RDONLY: 0,
    O_WRONLY: 0x1,
    O_RDWR: 0x2,
    O_NONBLOCK: 0x800,
    O_CREAT: 0x40,
    O_TRUNC: 0x200,
    O_EXCL: 0x80,
    O_SYNC: 0x101000, // __O_SYNC | O_DSYNC
    O_DSYNC: 0x1000,
    O_DIRECT: arch === 'arm64' ? 0x10000 : 0x4000,
    O_CLOEXEC: 0x80000,
    F_NOCACHE: null,
    F_FULLFSYNC: null,
    F_BARRIERFSYNC: null,
    SOL_SOCKET: 1,
    SO_SNDTIMEO: 21,
    SO_RCVTIMEO: 20,
    MSG_NOSIGNAL: 0x4000,
    SO_NOSIGPIPE: null,
    MSG_DONTWAIT: 0x40,
    SOCK_CLOEXEC: 0x80000, // = O_CLOEXEC
    SOCK_STREAM: 1,
    IPPROTO_TCP: 6,
    TCP_NODELAY: 1,
    EINTR: 4,
    EAGAIN: 11,
    EINPROGRESS: 115,
    ETIMEDOUT: 110,
    ENOSPC: 28,
    statfs: { kind: 'magic', bytes: 120, symbol: 'fstatfs', magicOffset: 0 },
    nfdsType: 'uint64_t',
  }
}

/**
 * macOS: sys/fcntl.h (O_* and F_NOCACHE 48, F_FULLFSYNC 51, F_BARRIERFSYNC 85), sys/socket.h
 * (SOL_SOCKET 0xffff, SO_SNDTIMEO 0x1005, SO_RCVTIMEO 0x1006, SO_NOSIGPIPE 0x1022, MSG_DONTWAIT 0x80;
 * no MSG_NOSIGNAL, no SOCK_CLOEXEC), sys/errno.h (EAGAIN 35, EINPROGRESS 36, ETIMEDOUT 60).
 * struct statfs (sys/mount.h, the 64-bit-inode layout; fstatfs$INODE64 on x86_64): f_fstypename[16]
 * at byte 72 of 2168.
 */
function darwin(arch: string): PosixConstants {
  return {
    libc: ['/usr/lib/libSystem.B.dylib', 'libc.dylib'],
    O_RDONLY: 0,
    O_WRONLY: 0x1,
    O_RDWR: 0x2,
    O_NONBLOCK: 0x4,
    O_CREAT: 0x200,
    O_TRUNC: 0x400,
    O_EXCL: 0x800,
    O_SYNC: 0x80,
    O_DSYNC: 0x400000,
    O_DIRECT: null,
    O_CLOEXEC: 0x1000000,
    F_NOCACHE: 48,
    F_FULLFSYNC: 51,
    F_BARRIERFSYNC: 85,
    SOL_SOCKET: 0xffff,
    SO_SNDTIMEO: 0x1005,
    SO_RCVTIMEO: 0x1006,
    MSG_NOSIGNAL: null,
    SO_NOSIGPIPE: 0x1022,
    MSG_DONTWAIT: 0x80,
    SOCK_CLOEXEC: null,
    SOCK_STREAM: 1,
    IPPROTO_TCP: 6,
    TCP_NODELAY: 1,
    EINTR: 4,
    EAGAIN: 35,
    EINPROGRESS: 36,
    ETIMEDOUT: 60,
    ENOSPC: 28,
    statfs: { kind: 'name', bytes: 2168, symbol: arch === 'x64' ? 'fstatfs$INODE64' : 'fstatfs', nameOffset: 72, nameBytes: 16 },
    nfdsType: 'uint32_t',
  }
}

/**
 * FreeBSD 13+: sys/fcntl.h (O_SYNC = O_FSYNC 0x80, O_DIRECT 0x10000, O_CLOEXEC 0x100000, O_DSYNC
 * 0x1000000), sys/socket.h (MSG_NOSIGNAL 0x20000, SOCK_CLOEXEC 0x10000000), sys/errno.h.
 * struct statfs (sys/mount.h, STATFS_VERSION 0x20140518): f_fstypename[16] at byte 280 of 2344.
 */
function freebsd(): PosixConstants {
  return {
    libc: ['libc.so.7'],
    O_RDONLY: 0,
    O_WRONLY: 0x1,
    O_RDWR: 0x2,
    O_NONBLOCK: 0x4,
    O_CREAT: 0x200,
    O_TRUNC: 0x400,
    O_EXCL: 0x800,
    O_SYNC: 0x80,
    O_DSYNC: 0x1000000,
    O_DIRECT: 0x10000,
    O_CLOEXEC: 0x100000,
    F_NOCACHE: null,
    F_FULLFSYNC: null,
    F_BARRIERFSYNC: null,
    SOL_SOCKET: 0xffff,
    SO_SNDTIMEO: 0x1005,
    SO_RCVTIMEO: 0x1006,
    MSG_NOSIGNAL: 0x20000,
    SO_NOSIGPIPE: null,
    MSG_DONTWAIT: 0x80,
    SOCK_CLOEXEC: 0x10000000,
    SOCK_STREAM: 1,
    IPPROTO_TCP: 6,
    TCP_NODELAY: 1,
    EINTR: 4,
    EAGAIN: 35,
    EINPROGRESS: 36,
    ETIMEDOUT: 60,
    ENOSPC: 28,
    statfs: { kind: 'name', bytes: 2344, symbol: 'fstatfs', nameOffset: 280, nameBytes: 16 },
    nfdsType: 'uint32_t',
  }
}

/**
 * OpenBSD: sys/fcntl.h (O_SYNC 0x80, O_DSYNC defined as O_SYNC, O_CLOEXEC 0x10000, no O_DIRECT),
 * sys/socket.h (MSG_NOSIGNAL 0x400, SOCK_CLOEXEC 0x8000), sys/errno.h. The C library's file name
 * carries its version (libc.so.MAJOR.MINOR) and changes between releases, so the file system type is
 * not read (statfs null) and libc is found by the loader under its unversioned name.
 */
function openbsd(): PosixConstants {
  return {
    libc: ['libc.so'],
    O_RDONLY: 0,
    O_WRONLY: 0x1,
    O_RDWR: 0x2,
    O_NONBLOCK: 0x4,
    O_CREAT: 0x200,
    O_TRUNC: 0x400,
    O_EXCL: 0x800,
    O_SYNC: 0x80,
    O_DSYNC: null, // defined as O_SYNC: open_datasync is open_sync there
    O_DIRECT: null,
    O_CLOEXEC: 0x10000,
    F_NOCACHE: null,
    F_FULLFSYNC: null,
    F_BARRIERFSYNC: null,
    SOL_SOCKET: 0xffff,
    SO_SNDTIMEO: 0x1005,
    SO_RCVTIMEO: 0x1006,
    MSG_NOSIGNAL: 0x400,
    SO_NOSIGPIPE: null,
    MSG_DONTWAIT: 0x80,
    SOCK_CLOEXEC: 0x8000,
    SOCK_STREAM: 1,
    IPPROTO_TCP: 6,
    TCP_NODELAY: 1,
    EINTR: 4,
    EAGAIN: 35,
    EINPROGRESS: 36,
    ETIMEDOUT: 60,
    ENOSPC: 28,
    statfs: null,
    nfdsType: 'uint32_t',
  }
}

export function isPosixOs(platform: string): platform is PosixOs {
  return platform === 'linux' || platform === 'darwin' || platform === 'freebsd' || platform === 'openbsd'
}

export function posixConstants(os: PosixOs, arch: string): PosixConstants {
  switch (os) {
    case 'linux':
      return linux(arch)
    case 'darwin':
      return darwin(arch)
    case 'freebsd':
      return freebsd()
    case 'openbsd':
      return openbsd()
  }
}

/** The fs.constants names checked against our table, where Node has them. */
const checkedWithNode = ['O_RDONLY', 'O_WRONLY', 'O_RDWR', 'O_NONBLOCK', 'O_CREAT', 'O_TRUNC', 'O_EXCL', 'O_SYNC', 'O_DSYNC', 'O_DIRECT'] as const

/**
 * Differences between our table and Node's fs.constants (compiled against the running system's
 * headers), as sentences; empty when they agree. OpenBSD's O_DSYNC is O_SYNC in Node's view.
 */
export function mismatchesWithNode(os: PosixOs, ours: PosixConstants, node: Readonly<Record<string, number>>): string[] {
  const found: string[] = []
  for (const name of checkedWithNode) {
    const nodeValue = node[name]
    if (nodeValue === undefined) continue
    const ourValue = os === 'openbsd' && name === 'O_DSYNC' ? ours.O_SYNC : ours[name]
    if (ourValue !== nodeValue) found.push(`${name}: plugcheck has ${ourValue === null ? 'none' : `0x${ourValue.toString(16)}`}, Node has 0x${nodeValue.toString(16)}`)
  }
  return found
}
