/**
 * The native port of the running platform, chosen here and nowhere else: Windows has its own
 * (kernel32, ntdll, ws2_32), every other supported system goes through libc.
 */
import type { NativePort } from './port.js'
import { isPosixOs } from './posix/constants.js'
import { createPosixPort } from './posix/index.js'
import { windowsPort } from './windows/index.js'

export type {
  AckSocket,
  DataFile,
  DescriptorLimit,
  FileLock,
  MethodRow,
  NativePort,
  PlatformTable,
  RecordDirectory,
  ServedSocketCalls,
  SocketAddress,
} from './port.js'
export { NativeError } from './errors.js'
export { directorySyncs, directorySyncText, isMethodName, methodNames, type DirectorySyncCall, type MethodName } from './methods.js'

let chosen: NativePort | undefined

/** The port for this platform; created on first use (the Windows DLLs and libc load then). */
export function nativePort(): NativePort {
  if (chosen === undefined) {
    const platform = process.platform
    if (platform === 'win32') chosen = windowsPort
    else if (isPosixOs(platform)) chosen = createPosixPort(platform)
    else throw new Error(`plugcheck runs on Linux, macOS, FreeBSD, OpenBSD and Windows, not on ${platform}`)
  }
  return chosen
}

/**
 * The alignment of buffers, sizes and offsets for --direct: O_DIRECT's logical block on Linux and
 * FreeBSD, the sector size FILE_FLAG_NO_BUFFERING wants on Windows (4096 covers 512e and 4Kn drives).
 */
export const directAlignmentBytes = 4096
