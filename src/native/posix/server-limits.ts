/**
 * The numbers a listener needs from each POSIX system to bound what it holds: the descriptor limit
 * (RLIMIT_NOFILE, struct rlimit) and, per served socket, the kernel send buffer (SO_SNDBUF), the
 * bytes queued in it, and an abortive close (SO_LINGER with a zero time-out). Pure data, each value
 * citing its header; test/unit/native/posix-server-limits.test.ts writes them again from the headers.
 *
 * struct rlimit is { rlim_t rlim_cur; rlim_t rlim_max; } with a 64-bit rlim_t on every 64-bit system
 * here (Linux unsigned long, macOS __uint64_t, FreeBSD __int64_t, OpenBSD __uint64_t): 16 bytes.
 * struct linger is { int l_onoff; int l_linger; } everywhere: 8 bytes.
 */
import type { PosixOs } from './constants.js'

/** How the bytes still queued in a socket's send buffer are read, where the system says. */
export type QueuedBytesCall =
  /** ioctl(fd, request, int *) */
  | { readonly kind: 'ioctl'; readonly request: number }
  /** getsockopt(fd, SOL_SOCKET, name, int *) */
  | { readonly kind: 'sockopt'; readonly name: number }

export interface ServerLimitConstants {
  readonly RLIMIT_NOFILE: number
  /** RLIM_INFINITY as the unsigned 64-bit value the kernel stores. */
  readonly RLIM_INFINITY: bigint
  readonly SO_SNDBUF: number
  readonly SO_LINGER: number
  /** null: the system has no such call; the whole send buffer is then assumed full. */
  readonly queuedBytes: QueuedBytesCall | null
}

export const rlimitBytes = 16
export const lingerBytes = 8

const bsdInfinity = (1n << 63n) - 1n

export function serverLimitConstants(os: PosixOs): ServerLimitConstants {
  switch (os) {
    case 'linux':
      return {
        RLIMIT_NOFILE: 7, // include/uapi/asm-generic/resource.h
        RLIM_INFINITY: (1n << 64n) - 1n, // include/uapi/asm-generic/resource.h: (~0UL)
        SO_SNDBUF: 7, // include/uapi/asm-generic/socket.h
        SO_LINGER: 13, // include/uapi/asm-generic/socket.h
        // include/uapi/asm-generic/ioctls.h TIOCOUTQ 0x5411, which include/uapi/linux/sockios.h names
        // SIOCOUTQ for sockets: bytes not yet acknowledged by the peer (sent or not).
        queuedBytes: { kind: 'ioctl', request: 0x5411 },
      }
    case 'darwin':
      return {
        RLIMIT_NOFILE: 8, // bsd/sys/resource.h
        RLIM_INFINITY: bsdInfinity, // bsd/sys/resource.h (((__uint64_t)1 << 63) - 1)
        SO_SNDBUF: 0x1001, // bsd/sys/socket.h
        SO_LINGER: 0x0080, // bsd/sys/socket.h (in ticks; a zero time-out is zero in any unit)
        queuedBytes: { kind: 'sockopt', name: 0x1024 }, // bsd/sys/socket.h SO_NWRITE: bytes in the send buffer
      }
    case 'freebsd':
      return {
        RLIMIT_NOFILE: 8, // sys/sys/resource.h
        RLIM_INFINITY: bsdInfinity, // sys/sys/resource.h ((rlim_t)(((__uint64_t)1 << 63) - 1))
        SO_SNDBUF: 0x1001, // sys/sys/socket.h
        SO_LINGER: 0x0080, // sys/sys/socket.h
        // sys/sys/filio.h FIONWRITE _IOR('f', 119, int): IOC_OUT 0x40000000 | sizeof(int) << 16 | 'f' << 8 | 119
        queuedBytes: { kind: 'ioctl', request: 0x40046677 },
      }
    case 'openbsd':
      return {
        RLIMIT_NOFILE: 8, // sys/sys/resource.h
        RLIM_INFINITY: bsdInfinity, // sys/sys/resource.h (((rlim_t)1 << 63) - 1)
        SO_SNDBUF: 0x1001, // sys/sys/socket.h
        SO_LINGER: 0x0080, // sys/sys/socket.h
        queuedBytes: null, // sys/sys/filio.h has no FIONWRITE, sys/sys/socket.h no SO_NWRITE
      }
  }
}
