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
  readonly SO_ERROR: number
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
  readonly statfs:
    | ({ readonly bytes: number; readonly symbol: string } & (
        | { readonly kind: 'magic'; readonly magicOffset: number }
        | { readonly kind: 'name'; readonly nameOffset: number; readonly nameBytes: number }
      ))
    | null
  /** poll(2)'s nfds_t: unsigned long on Linux, unsigned int on the BSDs and macOS (<poll.h>). */
  readonly nfdsType: 'uint64_t' | 'uint32_t'
}

// flock(2): LOCK_EX 2, LOCK_NB 4 in Linux include/uapi/asm-generic/fcntl.h, xnu bsd/sys/fcntl.h,
// FreeBSD and OpenBSD sys/sys/fcntl.h.
export const LOCK_EX = 2
export const LOCK_NB = 4
// poll(2): POLLIN 0x0001 in Linux include/uapi/asm-generic/poll.h, xnu bsd/sys/poll.h, FreeBSD and
// OpenBSD sys/sys/poll.h; struct pollfd is { int fd; short events; short revents; } (8 bytes) in all.
export const POLLIN = 0x1
export const POLLOUT = 0x4
// F_SETFD 2 and FD_CLOEXEC 1: asm-generic/fcntl.h, xnu bsd/sys/fcntl.h, FreeBSD and OpenBSD sys/sys/fcntl.h.
export const F_SETFD = 2
// <fcntl.h> F_GETFL / F_SETFL, identical everywhere (asm-generic/fcntl.h, BSD sys/fcntl.h).
export const F_GETFL = 3
export const F_SETFL = 4
export const FD_CLOEXEC = 1
// Linux include/uapi/linux/fs.h RWF_DSYNC 0x00000002 (pwritev2, Linux 4.7+)
export const RWF_DSYNC = 0x2
// POSIX_FADV_DONTNEED: 4 in glibc bits/fcntl-linux.h (x86_64, arm64) and FreeBSD sys/sys/fcntl.h;
// macOS and OpenBSD have no posix_fadvise (libc.ts finds none and the port says so).
export const POSIX_FADV_DONTNEED = 4

/*
 * Sources. Each value below names the header it comes from, as a path in the system's own source
 * repository: Linux torvalds/linux (include/uapi/...) and glibc's installed headers; macOS
 * apple-oss-distributions/xnu (bsd/sys/...); FreeBSD freebsd/freebsd-src (sys/sys/...); OpenBSD
 * openbsd/src (sys/sys/...). test/unit/native/posix-constants.test.ts holds the same values, written again
 * from those headers, and fails on any difference.
 */

/**
 * Linux, glibc. open flags: include/uapi/asm-generic/fcntl.h, which x86_64 uses unchanged; arm64
 * overrides only O_DIRECTORY, O_NOFOLLOW, O_DIRECT and O_LARGEFILE (arch/arm64/include/uapi/asm/fcntl.h).
 * Sockets: include/uapi/asm-generic/socket.h, glibc bits/socket.h (MSG_*), bits/socket_type.h
 * (SOCK_CLOEXEC). errno: include/uapi/asm-generic/errno-base.h and errno.h.
 */
function linux(arch: string): PosixConstants {
  return {
    libc: ['libc.so.6'], // glibc's soname
    O_RDONLY: 0, // asm-generic/fcntl.h 00000000
    O_WRONLY: 0x1, // asm-generic/fcntl.h 00000001
    O_RDWR: 0x2, // asm-generic/fcntl.h 00000002
    O_NONBLOCK: 0x800, // asm-generic/fcntl.h 00004000
    O_CREAT: 0x40, // asm-generic/fcntl.h 00000100
    O_TRUNC: 0x200, // asm-generic/fcntl.h 00001000
    O_EXCL: 0x80, // asm-generic/fcntl.h 00000200
    O_SYNC: 0x101000, // asm-generic/fcntl.h (__O_SYNC 04000000 | O_DSYNC)
    O_DSYNC: 0x1000, // asm-generic/fcntl.h 00010000
    O_DIRECT: arch === 'arm64' ? 0x10000 : 0x4000, // arm64/include/uapi/asm/fcntl.h 0200000; asm-generic 00040000
    O_CLOEXEC: 0x80000, // asm-generic/fcntl.h 02000000
    F_NOCACHE: null, // macOS only
    F_FULLFSYNC: null, // macOS only
    F_BARRIERFSYNC: null, // macOS only
    SOL_SOCKET: 1, // asm-generic/socket.h
    SO_SNDTIMEO: 21, // asm-generic/socket.h SO_SNDTIMEO_OLD (time_t is a long on 64-bit)
    SO_RCVTIMEO: 20, // asm-generic/socket.h SO_RCVTIMEO_OLD
    SO_ERROR: 4, // asm-generic/socket.h
    MSG_NOSIGNAL: 0x4000, // glibc bits/socket.h
    SO_NOSIGPIPE: null, // none on Linux
    MSG_DONTWAIT: 0x40, // glibc bits/socket.h
    SOCK_CLOEXEC: 0x80000, // glibc bits/socket_type.h 02000000 (= O_CLOEXEC)
    SOCK_STREAM: 1, // glibc bits/socket_type.h
    IPPROTO_TCP: 6, // include/uapi/linux/in.h
    TCP_NODELAY: 1, // include/uapi/linux/tcp.h
    EINTR: 4, // asm-generic/errno-base.h
    EAGAIN: 11, // asm-generic/errno-base.h
    EINPROGRESS: 115, // asm-generic/errno.h
    ETIMEDOUT: 110, // asm-generic/errno.h
    ENOSPC: 28, // asm-generic/errno-base.h
    // glibc bits/statfs.h: f_type is the first member, a __fsword_t (long); struct statfs is 15 longs
    // plus an 8-byte fsid on LP64: f_type 0, f_bsize 8, f_blocks..f_ffree 16..55, f_fsid 56, f_namelen 64,
    // f_frsize 72, f_flags 80, f_spare[4] 88..119: 120 bytes.
    statfs: { kind: 'magic', bytes: 120, symbol: 'fstatfs', magicOffset: 0 },
    nfdsType: 'uint64_t', // glibc sys/poll.h: typedef unsigned long int nfds_t
  }
}

/**
 * macOS (xnu bsd/sys/fcntl.h, bsd/sys/socket.h, bsd/sys/errno.h, bsd/sys/mount.h, bsd/sys/poll.h).
 */
function darwin(arch: string): PosixConstants {
  return {
    // libSystem, which re-exports libsystem_kernel (the system call wrappers) and libsystem_c. Since macOS 11
    // it lives in the dyld shared cache, not on disk, and dlopen of its path still finds it there
    // (macOS Big Sur 11.0.1 release notes).
    libc: ['/usr/lib/libSystem.B.dylib', 'libc.dylib'],
    O_RDONLY: 0, // bsd/sys/fcntl.h 0x0000
    O_WRONLY: 0x1, // bsd/sys/fcntl.h 0x0001
    O_RDWR: 0x2, // bsd/sys/fcntl.h 0x0002
    O_NONBLOCK: 0x4, // bsd/sys/fcntl.h 0x00000004
    O_CREAT: 0x200, // bsd/sys/fcntl.h 0x00000200
    O_TRUNC: 0x400, // bsd/sys/fcntl.h 0x00000400
    O_EXCL: 0x800, // bsd/sys/fcntl.h 0x00000800
    O_SYNC: 0x80, // bsd/sys/_types/_o_sync.h 0x0080
    // bsd/sys/_types/_o_dsync.h 0x400000. The kernel treats it as O_SYNC (bsd/vfs/vfs_vnops.c: "We treat
    // O_DSYNC as O_FSYNC for now"): IO_SYNC either way.
    O_DSYNC: 0x400000,
    O_DIRECT: null, // none: F_NOCACHE is macOS's way
    O_CLOEXEC: 0x1000000, // bsd/sys/fcntl.h 0x01000000
    F_NOCACHE: 48, // bsd/sys/fcntl.h
    F_FULLFSYNC: 51, // bsd/sys/fcntl.h; fcntl returns 0 or -1 (bsd/kern/kern_descrip.c sets no retval)
    // bsd/sys/fcntl.h. bsd/kern/kern_descrip.c promotes it to F_FULLFSYNC where the file system has no
    // barrier (ENOTTY/ENOTSUP/EINVAL from the file system).
    F_BARRIERFSYNC: 85,
    SOL_SOCKET: 0xffff, // bsd/sys/socket.h
    SO_SNDTIMEO: 0x1005, // bsd/sys/socket.h
    SO_RCVTIMEO: 0x1006, // bsd/sys/socket.h
    SO_ERROR: 0x1007, // bsd/sys/socket.h
    // bsd/sys/socket.h defines MSG_NOSIGNAL 0x80000 only since xnu-7195.50.7.100.1 (macOS 11.x);
    // SO_NOSIGPIPE works on every release, so it is what we use.
    MSG_NOSIGNAL: null,
    SO_NOSIGPIPE: 0x1022, // bsd/sys/socket.h
    MSG_DONTWAIT: 0x80, // bsd/sys/socket.h
    SOCK_CLOEXEC: null, // bsd/sys/socket.h has none: FD_CLOEXEC is set with fcntl after socket()
    SOCK_STREAM: 1, // bsd/sys/socket.h
    IPPROTO_TCP: 6, // bsd/netinet/in.h
    TCP_NODELAY: 1, // bsd/netinet/tcp.h 0x01
    EINTR: 4, // bsd/sys/errno.h
    EAGAIN: 35, // bsd/sys/errno.h
    EINPROGRESS: 36, // bsd/sys/errno.h
    ETIMEDOUT: 60, // bsd/sys/errno.h
    ENOSPC: 28, // bsd/sys/errno.h
    // bsd/sys/mount.h __DARWIN_STRUCT_STATFS64, the layout of struct statfs whenever
    // __DARWIN_64_BIT_INO_T (every 64-bit build since 10.6): f_bsize u32 @0, f_iosize i32 @4,
    // f_blocks f_bfree f_bavail f_files f_ffree u64 @8,16,24,32,40, f_fsid (int32_t[2]) @48,
    // f_owner u32 @56, f_type @60, f_flags @64, f_fssubtype @68, f_fstypename[16] @72,
    // f_mntonname[1024] @88, f_mntfromname[1024] @1112, f_flags_ext u32 @2136, f_reserved[7] @2140..2167:
    // 2168 bytes (a multiple of 8, no tail padding). The symbol: bsd/sys/cdefs.h gives x86_64
    // (__DARWIN_ONLY_64_BIT_INO_T 0) the suffix "$INODE64" (__DARWIN_INODE64(fstatfs) in mount.h; plain
    // fstatfs there fills the old layout); arm64 has only 64-bit inodes and no suffix.
    statfs: { kind: 'name', bytes: 2168, symbol: arch === 'x64' ? 'fstatfs$INODE64' : 'fstatfs', nameOffset: 72, nameBytes: 16 },
    nfdsType: 'uint32_t', // bsd/sys/poll.h: typedef unsigned int nfds_t
  }
}

/**
 * FreeBSD 13+ (freebsd-src sys/sys/fcntl.h, sys/sys/socket.h, sys/sys/errno.h, sys/sys/mount.h,
 * sys/sys/poll.h).
 */
function freebsd(): PosixConstants {
  return {
    libc: ['libc.so.7'], // libc's soname since FreeBSD 7
    O_RDONLY: 0, // sys/sys/fcntl.h 0x0000
    O_WRONLY: 0x1, // sys/sys/fcntl.h 0x0001
    O_RDWR: 0x2, // sys/sys/fcntl.h 0x0002
    O_NONBLOCK: 0x4, // sys/sys/fcntl.h 0x0004
    O_CREAT: 0x200, // sys/sys/fcntl.h 0x0200
    O_TRUNC: 0x400, // sys/sys/fcntl.h 0x0400
    O_EXCL: 0x800, // sys/sys/fcntl.h 0x0800
    O_SYNC: 0x80, // sys/sys/fcntl.h 0x0080 (= O_FSYNC)
    O_DSYNC: 0x1000000, // sys/sys/fcntl.h 0x01000000 (FreeBSD 13.0+)
    O_DIRECT: 0x10000, // sys/sys/fcntl.h 0x00010000
    O_CLOEXEC: 0x100000, // sys/sys/fcntl.h 0x00100000
    F_NOCACHE: null, // macOS only
    F_FULLFSYNC: null, // macOS only
    F_BARRIERFSYNC: null, // macOS only
    SOL_SOCKET: 0xffff, // sys/sys/socket.h
    SO_SNDTIMEO: 0x1005, // sys/sys/socket.h
    SO_RCVTIMEO: 0x1006, // sys/sys/socket.h
    SO_ERROR: 0x1007, // sys/sys/socket.h
    MSG_NOSIGNAL: 0x20000, // sys/sys/socket.h
    SO_NOSIGPIPE: null, // sys/sys/socket.h has SO_NOSIGPIPE 0x0800, unused: MSG_NOSIGNAL covers send
    MSG_DONTWAIT: 0x80, // sys/sys/socket.h
    SOCK_CLOEXEC: 0x10000000, // sys/sys/socket.h
    SOCK_STREAM: 1, // sys/sys/socket.h
    IPPROTO_TCP: 6, // sys/netinet/in.h
    TCP_NODELAY: 1, // sys/netinet/tcp.h
    EINTR: 4, // sys/sys/errno.h
    EAGAIN: 35, // sys/sys/errno.h
    EINPROGRESS: 36, // sys/sys/errno.h
    ETIMEDOUT: 60, // sys/sys/errno.h
    ENOSPC: 28, // sys/sys/errno.h
    // sys/sys/mount.h struct statfs, STATFS_VERSION 0x20140518 (FreeBSD 12+, the default fstatfs@FBSD_1.5):
    // f_version u32 @0, f_type u32 @4, f_flags f_bsize f_iosize f_blocks f_bfree f_bavail f_files f_ffree
    // f_syncwrites f_asyncwrites f_syncreads f_asyncreads (12 x 64-bit) @8..103, then 80 bytes of spare
    // (f_spare[10], or f_nvnodelistsize + f_spare0 + f_spare[9] in newer headers) @104..183,
    // f_namemax u32 @184, f_owner @188, f_fsid (int32_t[2]) @192, f_charspare[80] @200,
    // f_fstypename[16] @280, f_mntfromname[1024] @296, f_mntonname[1024] @1320..2343: 2344 bytes.
    statfs: { kind: 'name', bytes: 2344, symbol: 'fstatfs', nameOffset: 280, nameBytes: 16 },
    nfdsType: 'uint32_t', // sys/sys/poll.h: typedef unsigned int nfds_t
  }
}

/**
 * OpenBSD (openbsd/src sys/sys/fcntl.h, sys/sys/socket.h, sys/sys/errno.h, sys/sys/poll.h).
 */
function openbsd(): PosixConstants {
  return {
    // The file is libc.so.MAJOR.MINOR and the version changes between releases. Asked for "libc.so",
    // ld.so takes the highest major.minor it finds (libexec/ld.so/library_subr.c: _dl_build_sod leaves
    // the version at -1, _dl_find_shlib keeps the largest match).
    libc: ['libc.so'],
    O_RDONLY: 0, // sys/sys/fcntl.h 0x0000
    O_WRONLY: 0x1, // sys/sys/fcntl.h 0x0001
    O_RDWR: 0x2, // sys/sys/fcntl.h 0x0002
    O_NONBLOCK: 0x4, // sys/sys/fcntl.h 0x0004
    O_CREAT: 0x200, // sys/sys/fcntl.h 0x0200
    O_TRUNC: 0x400, // sys/sys/fcntl.h 0x0400
    O_EXCL: 0x800, // sys/sys/fcntl.h 0x0800
    O_SYNC: 0x80, // sys/sys/fcntl.h 0x0080
    O_DSYNC: null, // sys/sys/fcntl.h: #define O_DSYNC O_SYNC ("synchronicity is all or nothing in OpenBSD")
    O_DIRECT: null, // none in sys/sys/fcntl.h
    O_CLOEXEC: 0x10000, // sys/sys/fcntl.h 0x10000
    F_NOCACHE: null, // macOS only
    F_FULLFSYNC: null, // macOS only
    F_BARRIERFSYNC: null, // macOS only
    SOL_SOCKET: 0xffff, // sys/sys/socket.h
    SO_SNDTIMEO: 0x1005, // sys/sys/socket.h
    SO_RCVTIMEO: 0x1006, // sys/sys/socket.h
    SO_ERROR: 0x1007, // sys/sys/socket.h
    MSG_NOSIGNAL: 0x400, // sys/sys/socket.h
    SO_NOSIGPIPE: null, // none in sys/sys/socket.h
    MSG_DONTWAIT: 0x80, // sys/sys/socket.h
    SOCK_CLOEXEC: 0x8000, // sys/sys/socket.h
    SOCK_STREAM: 1, // sys/sys/socket.h
    IPPROTO_TCP: 6, // sys/netinet/in.h
    TCP_NODELAY: 1, // sys/netinet/tcp.h
    EINTR: 4, // sys/sys/errno.h
    EAGAIN: 35, // sys/sys/errno.h
    EINPROGRESS: 36, // sys/sys/errno.h
    ETIMEDOUT: 60, // sys/sys/errno.h
    ENOSPC: 28, // sys/sys/errno.h
    // Not bound yet. In sys/sys/mount.h f_fstypename sits at byte 120 (f_flags f_bsize f_iosize u32
    // @0,4,8, ten 64-bit counters f_blocks..f_asyncreads @16..95, f_fsid @96, f_namemax @104, f_owner
    // @108, f_ctime @112), but the struct ends in union mount_info, whose size was not checked.
    statfs: null,
    nfdsType: 'uint32_t', // sys/sys/poll.h: typedef unsigned int nfds_t
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
const checkedWithNode = [
  'O_RDONLY',
  'O_WRONLY',
  'O_RDWR',
  'O_NONBLOCK',
  'O_CREAT',
  'O_TRUNC',
  'O_EXCL',
  'O_SYNC',
  'O_DSYNC',
  'O_DIRECT',
] as const

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
    if (ourValue !== nodeValue)
      found.push(
        `${name}: plugcheck has ${ourValue === null ? 'none' : `0x${ourValue.toString(16)}`}, Node has 0x${nodeValue.toString(16)}`,
      )
  }
  return found
}
