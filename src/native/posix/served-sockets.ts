/**
 * The listener's calls on its own process and served sockets: the descriptor limit (getrlimit,
 * setrlimit) and, per socket descriptor, SO_SNDBUF, the bytes still queued for the peer, and an
 * abortive close. Numbers from server-limits.ts.
 */
import koffi from 'koffi'
import type { DescriptorLimit, NativePort, ServedSocketCalls } from '../port.js'
import type { PosixOs } from './constants.js'
import { errnoError, type Libc } from './libc.js'
import { lingerBytes, rlimitBytes, serverLimitConstants } from './server-limits.js'

/** A 64-bit rlim_t as a number: RLIM_INFINITY (and anything past 2^53) is Infinity. */
function limitValue(raw: bigint, infinity: bigint): number {
  return raw >= infinity || raw > BigInt(Number.MAX_SAFE_INTEGER) ? Infinity : Number(raw)
}

export function descriptorLimit(lib: Libc, os: PosixOs): DescriptorLimit {
  const n = serverLimitConstants(os)
  const rlim = Buffer.alloc(rlimitBytes)
  if ((lib.getrlimit(n.RLIMIT_NOFILE, rlim) as number) !== 0) throw errnoError(lib, 'getrlimit', koffi.errno())
  return { soft: limitValue(rlim.readBigUInt64LE(0), n.RLIM_INFINITY), hard: limitValue(rlim.readBigUInt64LE(8), n.RLIM_INFINITY) }
}

export function setDescriptorSoftLimit(lib: Libc, os: PosixOs, soft: number): void {
  const n = serverLimitConstants(os)
  const current = Buffer.alloc(rlimitBytes)
  if ((lib.getrlimit(n.RLIMIT_NOFILE, current) as number) !== 0) throw errnoError(lib, 'getrlimit', koffi.errno())
  const rlim = Buffer.alloc(rlimitBytes)
  rlim.writeBigUInt64LE(soft === Infinity ? n.RLIM_INFINITY : BigInt(soft), 0)
  current.copy(rlim, 8, 8, 16) // the hard limit stays as it is
  if ((lib.setrlimit(n.RLIMIT_NOFILE, rlim) as number) !== 0) throw errnoError(lib, 'setrlimit', koffi.errno())
}

export function servedSocketCalls(lib: Libc, os: PosixOs): ServedSocketCalls {
  const n = serverLimitConstants(os)
  const k = lib.k
  const intValue = Buffer.alloc(4)
  const intLength = Buffer.alloc(4)
  const getInt = (fd: number, name: number): number => {
    intLength.writeUInt32LE(4)
    if ((lib.getsockopt(fd, k.SOL_SOCKET, name, intValue, intLength) as number) !== 0) throw errnoError(lib, 'getsockopt', koffi.errno())
    return intValue.readInt32LE(0)
  }
  return {
    boundSendBuffer(fd: number, sizeBytes: number): number {
      const value = Buffer.alloc(4)
      value.writeInt32LE(sizeBytes)
      if ((lib.setsockopt(fd, k.SOL_SOCKET, n.SO_SNDBUF, value, 4) as number) !== 0) throw errnoError(lib, 'setsockopt', koffi.errno())
      return getInt(fd, n.SO_SNDBUF)
    },
    queuedSendBytes(fd: number): number | null {
      const call = n.queuedBytes
      if (call === null) return null
      if (call.kind === 'sockopt') return getInt(fd, call.name)
      if ((lib.ioctl(fd, call.request, 'void *', intValue) as number) !== 0) throw errnoError(lib, 'ioctl', koffi.errno())
      return intValue.readInt32LE(0)
    },
    abortOnClose(fd: number): void {
      const linger = Buffer.alloc(lingerBytes)
      linger.writeInt32LE(1, 0) // l_onoff
      linger.writeInt32LE(0, 4) // l_linger: no time at all
      if ((lib.setsockopt(fd, k.SOL_SOCKET, n.SO_LINGER, linger, lingerBytes) as number) !== 0)
        throw errnoError(lib, 'setsockopt', koffi.errno())
    },
  }
}

/** The port's descriptorLimit and setDescriptorSoftLimit, on the C library loaded on first use (c). */
export function descriptorLimitCalls(c: () => Libc, os: PosixOs): Pick<NativePort, 'descriptorLimit' | 'setDescriptorSoftLimit'> {
  return {
    descriptorLimit: () => descriptorLimit(c(), os),
    setDescriptorSoftLimit: (soft: number) => setDescriptorSoftLimit(c(), os, soft),
  }
}
