/**
 * The POSIX port: Linux, macOS, FreeBSD and OpenBSD through their C library. Everything that differs
 * between them is data (constants.ts, table.ts) or a call looked up at run time (libc.ts). Each part
 * of the port is built in its own file on the C library, loaded on first use: data files and their
 * syncs (data-files.ts), locks (locks.ts), the ack socket (ack-socket.ts), served sockets and the
 * descriptor limit (served-sockets.ts), file systems and the boot id (file-system.ts).
 */
import { constants as nodeFsConstants } from 'node:fs'
import type { NativePort, PlatformTable, ServedSocketCalls } from '../port.js'
import { alignedBuffer } from '../aligned.js'
import { mismatchesWithNode, posixConstants, type PosixOs } from './constants.js'
import { loadLibc, type Libc } from './libc.js'
import { posixTable } from './table.js'
import { descriptorLimitCalls, servedSocketCalls } from './served-sockets.js'
import { dataFileCalls } from './data-files.js'
import { recordDirectoryCalls } from './record-directory.js'
import { lockCalls } from './locks.js'
import { ackSocketCalls } from './ack-socket.js'
import { fileSystemCalls } from './file-system.js'

export function createPosixPort(os: PosixOs): NativePort {
  const k = posixConstants(os, process.arch)
  const mismatches = mismatchesWithNode(os, k, nodeFsConstants as unknown as Record<string, number>)
  if (mismatches.length > 0) {
    // Node was compiled against this system's headers; a disagreement means our table is wrong here.
    throw new Error(
      `plugcheck's open flags for ${os} disagree with this system's (${mismatches.join('; ')}): refusing to run with wrong flags`,
    )
  }
  let loaded: Libc | undefined
  const c = (): Libc => (loaded ??= loadLibc(k))
  let table: PlatformTable | undefined

  const methodTable = (): PlatformTable => (table ??= posixTable(os, { fdatasync: c().fdatasync !== null }))

  const port: NativePort = {
    family: 'posix',
    table: methodTable,
    ...dataFileCalls(c, k, methodTable),
    ...recordDirectoryCalls(c, k, methodTable),
    directorySync: { supported: true },
    renameReplacesOpenFiles: true,
    shell: 'posix',
    unsafeFileName: () => null, // every name but "." and ".." is a plain file name
    ...lockCalls(c, k),
    ...ackSocketCalls(c, os),
    alignedBuffer,
    ...fileSystemCalls(c, k, os),
    ...descriptorLimitCalls(c, os),
    // A getter, not a part spread in: spreading would bind the served-socket calls (and load the C library) at once.
    get servedSockets() {
      return (served ??= servedSocketCalls(c(), os))
    },
  }
  let served: ServedSocketCalls | undefined
  return port
}
