/**
 * Data files, locks and file-system facts through kernel32 and ntdll.
 *
 * Fault model: every failing call becomes a NativeError built from GetLastError (or the NTSTATUS)
 * read right after it. A failed flush is never retried: the run stops (after a failed flush the
 * cache manager may have dropped the dirty data, as Linux does).
 */
import { win32 as win32Path } from 'node:path'
import { ERROR } from './error-codes.js'
import type { DataFile, FileLock } from '../port.js'
import type { MethodName } from '../methods.js'
import {
  api,
  BY_HANDLE_FILE_INDEX_HIGH_AT,
  BY_HANDLE_FILE_INDEX_LOW_AT,
  BY_HANDLE_FILE_INFORMATION_BYTES,
  BY_HANDLE_VOLUME_SERIAL_AT,
  CREATE_NEW,
  failLast,
  FILE_ATTRIBUTE_DIRECTORY,
  FILE_ATTRIBUTE_NORMAL,
  FILE_FLAG_BACKUP_SEMANTICS,
  FILE_FLAG_NO_BUFFERING,
  FILE_FLAG_WRITE_THROUGH,
  FILE_SHARE_ALL,
  FLUSH_FLAGS_FILE_DATA_ONLY,
  FLUSH_FLAGS_FILE_DATA_SYNC_ONLY,
  GENERIC_READ,
  GENERIC_WRITE,
  HKEY_LOCAL_MACHINE,
  INVALID_FILE_ATTRIBUTES,
  IO_STATUS_BLOCK_BYTES,
  isInvalidHandle,
  LOCKFILE_EXCLUSIVE_LOCK,
  LOCKFILE_FAIL_IMMEDIATELY,
  ntFailure,
  OPEN_ALWAYS,
  OPEN_EXISTING,
  overlappedAt,
  RRF_RT_REG_DWORD,
  win32Failure,
} from './win32.js'

type Handle = bigint

/** WriteFile's length is a DWORD: larger writes go in parts of at most 1 GiB (a multiple of any sector size). */
const maxWriteChunkBytes = 1 << 30

/**
 * CreateFileW, with the error built from GetLastError. A directory opened without
 * FILE_FLAG_BACKUP_SEMANTICS fails with ERROR_ACCESS_DENIED; that is reported as EISDIR, as Node does.
 */
/**
 * The path as Node's fs hands it to Windows: absolute and namespaced (\\?\C:\x, \\?\UNC\server\share\x),
 * so the port opens exactly the file that fs checked, created and renamed. Without the prefix Win32
 * path rules would strip a trailing dot or space and turn NUL or COM1.dat into devices (such names are
 * refused before a run starts: unsafeFileName), and paths over MAX_PATH would fail.
 */
export function namespaced(path: string): string {
  return win32Path.toNamespacedPath(win32Path.resolve(path))
}

function createFile(path: string, access: number, disposition: number, flags: number): Handle {
  const w = api()
  const handle = w.CreateFileW(namespaced(path), access, FILE_SHARE_ALL, null, disposition, flags, null)
  if (!isInvalidHandle(handle)) return BigInt(handle as bigint)
  const error = Number(w.GetLastError())
  if (error === ERROR.ACCESS_DENIED) {
    const attributes = Number(w.GetFileAttributesW(namespaced(path)))
    if (attributes !== INVALID_FILE_ATTRIBUTES && (attributes & FILE_ATTRIBUTE_DIRECTORY) !== 0) {
      throw win32Failure('CreateFileW', error, path, 'EISDIR')
    }
  }
  throw win32Failure('CreateFileW', error, path)
}

function closeHandle(handle: Handle, path: string): void {
  if (Number(api().CloseHandle(handle)) === 0) failLast('CloseHandle', path)
}

/** The flags CreateFileW needs for method (PostgreSQL's src/port/open.c: O_DSYNC and O_DIRECT). */
export function openFlags(method: MethodName, direct: boolean): number {
  let flags = FILE_ATTRIBUTE_NORMAL
  if (method === 'open_datasync') flags |= FILE_FLAG_WRITE_THROUGH
  if (direct) flags |= FILE_FLAG_NO_BUFFERING
  return flags
}

type Flush = (handle: Handle, path: string) => void

const flushFileBuffers: Flush = (handle, path) => {
  if (Number(api().FlushFileBuffers(handle)) === 0) failLast('FlushFileBuffers', path)
}

function ntFlush(flags: number): Flush {
  const iosb = Buffer.alloc(IO_STATUS_BLOCK_BYTES)
  return (handle, path) => {
    const flushEx = api().NtFlushBuffersFileEx
    if (flushEx === null) throw new Error('NtFlushBuffersFileEx called where ntdll lacks it (the table says n/a)')
    iosb.fill(0)
    const status = Number(flushEx(handle, flags, null, 0, iosb))
    if (status < 0) throw ntFailure('NtFlushBuffersFileEx', status, path) // NT_SUCCESS(s) is s >= 0
  }
}

const noFlush: Flush = () => {}

/** The sync after the writes, per method; unavailable methods are a programmer error here. */
function flushFor(method: MethodName): Flush {
  switch (method) {
    case 'fsync':
    case 'fsync_writethrough':
      return flushFileBuffers
    case 'fdatasync':
      return ntFlush(FLUSH_FLAGS_FILE_DATA_SYNC_ONLY)
    case 'flush_data_only':
      return ntFlush(FLUSH_FLAGS_FILE_DATA_ONLY)
    case 'open_datasync': // durable at WriteFile: FILE_FLAG_WRITE_THROUGH
    case 'none':
      return noFlush
    default:
      throw new Error(`${method} does not exist on Windows (the table says n/a)`)
  }
}

/** Opens path (OPEN_EXISTING), or creates it (CREATE_NEW: a files run's record file, which must not exist), for method. */
export function openData(path: string, method: MethodName, direct: boolean, disposition = OPEN_EXISTING): DataFile {
  const w = api()
  const flush = flushFor(method)
  if ((method === 'fdatasync' || method === 'flush_data_only') && w.NtFlushBuffersFileEx === null) {
    throw new Error(`${method} needs NtFlushBuffersFileEx, which this ntdll lacks (the table says n/a)`)
  }
  const handle = createFile(path, GENERIC_READ | GENERIC_WRITE, disposition, openFlags(method, direct))
  const overlapped = Buffer.alloc(32) // OVERLAPPED, 32 bytes on 64-bit (win32.ts overlappedAt)
  const written = Buffer.alloc(4) // DWORD nNumberOfBytesWritten (Microsoft Learn "WriteFile")
  let open = true
  return {
    write(buf, offsetBytes) {
      let done = 0
      while (done < buf.length) {
        const part = buf.subarray(done, done + Math.min(buf.length - done, maxWriteChunkBytes))
        written.writeUInt32LE(0, 0)
        // A synchronous handle with an OVERLAPPED offset: a positioned write that leaves no file pointer state.
        const ok = Number(w.WriteFile(handle, part, part.length, written, overlappedAt(offsetBytes + done, overlapped)))
        if (ok === 0) failLast('WriteFile', path)
        const n = written.readUInt32LE(0)
        if (n === 0) throw win32Failure('WriteFile', ERROR.DISK_FULL, path) // no progress: treat as a full disk
        done += n
      }
    },
    sync() {
      flush(handle, path)
    },
    close() {
      if (!open) return
      open = false
      closeHandle(handle, path)
    },
  }
}

/** Creates path with FILE_FLAG_NO_BUFFERING and closes it; CreateFileW's error when the volume refuses. */
export function probeDirect(path: string): void {
  const handle = createFile(path, GENERIC_READ | GENERIC_WRITE, CREATE_NEW, FILE_ATTRIBUTE_NORMAL | FILE_FLAG_NO_BUFFERING)
  closeHandle(handle, path)
}

/**
 * The lock's one byte sits far past any data plugcheck writes: Windows byte-range locks are mandatory,
 * so a lock over the data would make our own WriteFile on another handle fail. Locking past the end of
 * the file is allowed (Microsoft Learn "LockFileEx").
 */
const lockOffsetBytes = 2 ** 62

export function lockExclusive(path: string, create: boolean): FileLock | 'busy' | 'missing' {
  const w = api()
  let handle: Handle
  try {
    handle = createFile(
      path,
      create ? GENERIC_READ | GENERIC_WRITE : GENERIC_READ,
      create ? OPEN_ALWAYS : OPEN_EXISTING,
      FILE_ATTRIBUTE_NORMAL,
    )
  } catch (error) {
    if (!create && (error as { code?: string }).code === 'ENOENT') return 'missing'
    throw error
  }
  const overlapped = overlappedAt(lockOffsetBytes)
  if (Number(w.LockFileEx(handle, LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, overlapped)) === 0) {
    const error = Number(w.GetLastError())
    w.CloseHandle(handle)
    // LOCKFILE_FAIL_IMMEDIATELY: another handle holds it (ERROR_LOCK_VIOLATION; ERROR_IO_PENDING cannot happen on a synchronous handle).
    if (error === ERROR.LOCK_VIOLATION) return 'busy'
    throw win32Failure('LockFileEx', error, path)
  }
  let identity: { dev: number; ino: number }
  try {
    identity = fileIdentity(handle, path)
  } catch (error) {
    w.CloseHandle(handle)
    throw error
  }
  let held = true
  return {
    ...identity,
    release() {
      if (!held) return
      held = false
      // Closing the handle releases the lock (Microsoft Learn "LockFileEx"); unlock first so it is immediate.
      w.UnlockFileEx(handle, 0, 1, 0, overlappedAt(lockOffsetBytes))
      closeHandle(handle, path)
    },
  }
}

/**
 * The file's identity as Node's fs.statSync reports it on Windows (libuv: st_dev is the volume serial
 * number, st_ino the 64-bit file index, both as doubles).
 */
function fileIdentity(handle: Handle, path: string): { dev: number; ino: number } {
  const info = Buffer.alloc(BY_HANDLE_FILE_INFORMATION_BYTES)
  if (Number(api().GetFileInformationByHandle(handle, info)) === 0) failLast('GetFileInformationByHandle', path)
  const index = (BigInt(info.readUInt32LE(BY_HANDLE_FILE_INDEX_HIGH_AT)) << 32n) | BigInt(info.readUInt32LE(BY_HANDLE_FILE_INDEX_LOW_AT))
  return { dev: info.readUInt32LE(BY_HANDLE_VOLUME_SERIAL_AT), ino: Number(index) }
}

/** GetVolumeInformationByHandleW's file-system name ("NTFS", "ReFS", "FAT32", ...); null when Windows will not say. */
export function fileSystemOf(path: string): { readonly type: string; readonly magic: number | null; readonly inMemory: boolean } | null {
  const w = api()
  // Access 0 with FILE_FLAG_BACKUP_SEMANTICS opens files and directories alike, for queries only.
  const handle = createFile(path, 0, OPEN_EXISTING, FILE_FLAG_BACKUP_SEMANTICS)
  try {
    const name = Buffer.alloc(2 * 261) // MAX_PATH + 1 WCHARs (Microsoft Learn "GetVolumeInformationByHandleW")
    const ok = Number(w.GetVolumeInformationByHandleW(handle, null, 0, null, null, null, name, name.length / 2))
    if (ok === 0) return null
    const text = name.toString('utf16le')
    const end = text.indexOf('\0')
    const type = end === -1 ? text : text.slice(0, end)
    return type === '' ? null : { type, magic: null, inMemory: false }
  } finally {
    w.CloseHandle(handle)
  }
}

/** HKLM\...\Memory Management\PrefetchParameters BootId (a DWORD counting boots); null when absent. */
export function bootId(): string | null {
  const w = api()
  const value = Buffer.alloc(4) // REG_DWORD: 4 bytes (Microsoft Learn "Registry Value Types")
  const size = Buffer.alloc(4) // DWORD *pcbData, in bytes, in and out (Microsoft Learn "RegGetValueW")
  size.writeUInt32LE(4, 0)
  const status = Number(
    w.RegGetValueW(
      HKEY_LOCAL_MACHINE,
      'SYSTEM\\CurrentControlSet\\Control\\Session Manager\\Memory Management\\PrefetchParameters',
      'BootId',
      RRF_RT_REG_DWORD,
      null,
      value,
      size,
    ),
  )
  return status === 0 ? String(value.readUInt32LE(0)) : null // ERROR_SUCCESS 0 (LSTATUS is the error number itself)
}
