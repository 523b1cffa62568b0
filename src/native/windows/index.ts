/**
 * The Windows native port: kernel32 (files, locks, volumes), ntdll (NtFlushBuffersFileEx, looked up at
 * run time), advapi32 (the boot id) and ws2_32 (the ack socket). Importing this module loads no DLL;
 * the first call that needs one loads them all (win32.ts api()).
 *
 * Assumptions: 64-bit Windows (x64 or arm64), Windows 10 or later for the full method table; the paths
 * given are Windows paths (drive letter or UNC), shorter than MAX_PATH unless prefixed with \\?\.
 */
import type { DirectorySync, NativePort, PlatformTable } from '../port.js'
import { bootId, fileSystemOf, lockExclusive, openData, probeDirect } from './file.js'
import { connect } from './socket.js'
import { openRecordDirectory } from './record-directory.js'
import { alignedBuffer } from '../aligned.js'
import { windowsTable, type WindowsProbe } from './table.js'
import { api } from './win32.js'
import { unsafeWindowsFileName } from './names.js'

export { windowsTable, type WindowsProbe } from './table.js'

let probed: WindowsProbe | undefined

/** What this Windows offers, found at run time: cheap (two GetProcAddress calls, once), needs no data file. */
export function probe(): WindowsProbe {
  if (probed !== undefined) return probed
  const w = api()
  probed = { ntFlushBuffersFileEx: w.NtFlushBuffersFileEx !== null, wineVersion: w.wineVersion }
  return probed
}

/**
 * FlushFileBuffers on a directory handle fails (ERROR_ACCESS_DENIED; Node reports EPERM, nodejs/node#3879)
 * and Windows has no other call for it. NTFS records a rename in its metadata journal; no call asks
 * for that entry alone to reach the disk.
 */
const directorySync: DirectorySync = {
  supported: false,
  reason:
    'Windows cannot flush a directory (FlushFileBuffers on a directory handle fails); NTFS journals the rename as a metadata change, with no call to force it',
}

export const windowsPort: NativePort = {
  family: 'windows',
  table(): PlatformTable {
    return windowsTable(probe())
  },
  openData(path, method, options) {
    return openData(path, method, options.direct)
  },
  openRecordDirectory(path, method, options) {
    return openRecordDirectory(path, method, options.direct)
  },
  probeDirect,
  directorySync,
  // MoveFileExW (what Node's rename uses) fails on a target another handle holds open, even one shared
  // with FILE_SHARE_DELETE, unless POSIX rename semantics are asked for.
  renameReplacesOpenFiles: false,
  shell: 'windows',
  unsafeFileName: unsafeWindowsFileName,
  lockExclusive,
  connect,
  alignedBuffer,
  dropCache() {
    // Windows has no call to drop one file's cached pages (opening it with NO_BUFFERING bypasses them instead).
    return false
  },
  fileSystemOf,
  bootId,
  // Windows has no RLIMIT_NOFILE: handles are bounded by memory (and Node's sockets are not CRT
  // descriptors), so the listener has no descriptor limit to compare its bounds with.
  descriptorLimit: () => null,
  setDescriptorSoftLimit() {
    throw new Error('setDescriptorSoftLimit: Windows has no descriptor limit')
  },
  // Node gives no SOCKET handle of a served socket here (socket._handle.fd is -1): Windows' own send
  // buffering (SO_SNDBUF defaults to a few KB plus what the application posts) is left as it is.
  servedSockets: null,
}
