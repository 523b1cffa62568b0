/**
 * The only bindings to kernel32, ntdll, advapi32 and ws2_32. Nothing is loaded when this module is
 * imported: api() loads the DLLs on first use, so the rest of the Windows port (and its pure table) can
 * be imported, and unit-tested, on Linux.
 *
 * Calling convention: every prototype says __stdcall (WINAPI), which koffi honours on 32-bit x86 and
 * ignores on x64, where Windows has one convention. HANDLE, HMODULE and HKEY are `void *` (koffi gives a
 * BigInt, or null for NULL); SOCKET is UINT_PTR (`uintptr_t`); DWORD/ULONG/u_long are 32 bits and so is
 * `long` on Windows (LLP64). Pointers to out-parameters and structs are passed as Buffers (no copy).
 *
 * Errors: win32Error() is read right after the failing call (koffi makes no Win32 call in between; the
 * value comes from the thread's TEB); wsaError() likewise for Winsock.
 */
import koffi from 'koffi'
import { NativeError } from '../errors.js'
import { describeWin32, posixOf } from './error-codes.js'

/** winnt.h (ACCESS_MASK generic rights); Microsoft Learn "Generic Access Rights" */
export const GENERIC_READ = 0x80000000
export const GENERIC_WRITE = 0x40000000
/** winnt.h; Microsoft Learn "CreateFileW" (dwShareMode) */
export const FILE_SHARE_READ = 0x1
export const FILE_SHARE_WRITE = 0x2
export const FILE_SHARE_DELETE = 0x4
export const FILE_SHARE_ALL = FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE
/** fileapi.h; Microsoft Learn "CreateFileW" (dwCreationDisposition) */
export const CREATE_NEW = 1
export const OPEN_EXISTING = 3
export const OPEN_ALWAYS = 4
/** winnt.h FILE_ATTRIBUTE_*; winbase.h FILE_FLAG_*; Microsoft Learn "CreateFileW" (dwFlagsAndAttributes) */
export const FILE_ATTRIBUTE_DIRECTORY = 0x10
export const FILE_ATTRIBUTE_NORMAL = 0x80
export const FILE_FLAG_WRITE_THROUGH = 0x80000000
export const FILE_FLAG_NO_BUFFERING = 0x20000000
export const FILE_FLAG_BACKUP_SEMANTICS = 0x02000000
/** handleapi.h: INVALID_HANDLE_VALUE ((HANDLE)(LONG_PTR)-1), as koffi returns a `void *` */
export const INVALID_HANDLE_VALUE = 0xffffffffffffffffn
/** fileapi.h: INVALID_FILE_ATTRIBUTES ((DWORD)-1) */
export const INVALID_FILE_ATTRIBUTES = 0xffffffff
/** minwinbase.h; Microsoft Learn "LockFileEx" (dwFlags) */
export const LOCKFILE_FAIL_IMMEDIATELY = 0x1
export const LOCKFILE_EXCLUSIVE_LOCK = 0x2
/** ntifs.h; Microsoft Learn "NtFlushBuffersFileEx" (Flags) */
export const FLUSH_FLAGS_FILE_DATA_ONLY = 0x1
export const FLUSH_FLAGS_FILE_DATA_SYNC_ONLY = 0x4
/** winbase.h; Microsoft Learn "FormatMessageW" */
const FORMAT_MESSAGE_IGNORE_INSERTS = 0x200
const FORMAT_MESSAGE_FROM_SYSTEM = 0x1000
/** winreg.h: HKEY_LOCAL_MACHINE is ((HKEY)(ULONG_PTR)((LONG)0x80000002)), sign-extended to 64 bits */
export const HKEY_LOCAL_MACHINE = 0xffffffff80000002n
/** winreg.h; Microsoft Learn "RegGetValueW" (dwFlags) */
export const RRF_RT_REG_DWORD = 0x10

/**
 * OVERLAPPED (minwinbase.h; Microsoft Learn "OVERLAPPED structure"), 64-bit layout: Internal
 * ULONG_PTR at 0, InternalHigh ULONG_PTR at 8, Offset DWORD at 16, OffsetHigh DWORD at 20, hEvent
 * HANDLE at 24; 32 bytes. With a handle opened without FILE_FLAG_OVERLAPPED, WriteFile and LockFileEx
 * take the file offset from it and complete synchronously.
 */
export function overlappedAt(offsetBytes: number, into: Buffer = Buffer.alloc(32)): Buffer {
  into.fill(0)
  const offset = BigInt(offsetBytes)
  into.writeUInt32LE(Number(offset & 0xffffffffn), 16)
  into.writeUInt32LE(Number(offset >> 32n), 20)
  return into
}

/**
 * BY_HANDLE_FILE_INFORMATION (fileapi.h; Microsoft Learn "BY_HANDLE_FILE_INFORMATION"): DWORD attributes
 * at 0, three FILETIMEs (two DWORDs each) at 4, 12, 20, dwVolumeSerialNumber at 28, nFileSizeHigh 32,
 * nFileSizeLow 36, nNumberOfLinks 40, nFileIndexHigh 44, nFileIndexLow 48; 52 bytes, no padding.
 */
export const BY_HANDLE_FILE_INFORMATION_BYTES = 52
export const BY_HANDLE_VOLUME_SERIAL_AT = 28
export const BY_HANDLE_FILE_INDEX_HIGH_AT = 44
export const BY_HANDLE_FILE_INDEX_LOW_AT = 48

/** IO_STATUS_BLOCK (wdm.h; Microsoft Learn "IO_STATUS_BLOCK"): NTSTATUS/PVOID union at 0, ULONG_PTR Information at 8; 16 bytes. */
export const IO_STATUS_BLOCK_BYTES = 16

/* ws2def.h / winsock2.h constants (Microsoft Learn: "socket", "setsockopt", "SOL_SOCKET Socket Options",
   "IPPROTO_TCP Socket Options", "ioctlsocket", "WSAPOLLFD") */
export const SOCK_STREAM = 1
export const IPPROTO_TCP = 6
export const TCP_NODELAY = 0x0001
export const SOL_SOCKET = 0xffff
export const SO_SNDTIMEO = 0x1005
export const SO_RCVTIMEO = 0x1006
export const SO_ERROR = 0x1007
/** winsock2.h: FIONBIO = _IOW('f', 126, u_long) = 0x8004667E; ioctlsocket takes it as a (32-bit) long */
export const FIONBIO = 0x8004667e | 0
/** winsock2.h: INVALID_SOCKET (SOCKET)(~0), SOCKET_ERROR (-1) */
export const INVALID_SOCKET = 0xffffffffffffffffn
export const SOCKET_ERROR = -1
/** winsock2.h WSAPoll events: POLLRDNORM 0x0100, POLLRDBAND 0x0200, POLLIN = both; POLLERR 1, POLLHUP 2, POLLNVAL 4 */
export const POLLRDNORM = 0x0100
export const POLLERR = 0x0001
export const POLLHUP = 0x0002
export const POLLNVAL = 0x0004
/** WSAPOLLFD (winsock2.h): SOCKET fd at 0, SHORT events at 8, SHORT revents at 10; 16 bytes on x64. */
export const WSAPOLLFD_BYTES = 16
/** fd_set (winsock2.h): u_int fd_count at 0, SOCKET fd_array[FD_SETSIZE = 64] at 8 on x64; 520 bytes. */
export const FD_SET_BYTES = 8 + 64 * 8
/** timeval (winsock2.h): long tv_sec, long tv_usec; long is 32 bits on Windows; 8 bytes. */
export const TIMEVAL_BYTES = 8
/** WSADATA (winsock2.h) is 408 bytes on x64; a larger buffer is harmless. */
const WSADATA_BYTES = 512

type Fn = (...args: unknown[]) => unknown

export interface Win32 {
  readonly CreateFileW: Fn
  readonly WriteFile: Fn
  readonly FlushFileBuffers: Fn
  readonly CloseHandle: Fn
  readonly GetLastError: Fn
  readonly FormatMessageW: Fn
  readonly GetFileAttributesW: Fn
  readonly LockFileEx: Fn
  readonly UnlockFileEx: Fn
  readonly GetVolumeInformationByHandleW: Fn
  readonly GetFileInformationByHandle: Fn
  readonly RtlNtStatusToDosError: Fn
  /** null where ntdll.dll does not export it (Windows before 10 1709, Wine 8). */
  readonly NtFlushBuffersFileEx: Fn | null
  /** Wine's version string, null on Windows. */
  readonly wineVersion: string | null
  readonly RegGetValueW: Fn
  readonly WSAStartup: Fn
  readonly WSAGetLastError: Fn
  readonly socket: Fn
  readonly connect: Fn
  readonly ioctlsocket: Fn
  readonly setsockopt: Fn
  readonly getsockopt: Fn
  readonly send: Fn
  readonly recv: Fn
  readonly select: Fn
  readonly WSAPoll: Fn
  readonly closesocket: Fn
}

let loaded: Win32 | undefined

/** Loads the DLLs and binds every function, once. Windows only. */
export function api(): Win32 {
  if (loaded !== undefined) return loaded
  if (process.platform !== 'win32') throw new Error(`the Windows port was called on ${process.platform}`)
  const kernel32 = koffi.load('kernel32.dll')
  const ntdll = koffi.load('ntdll.dll')
  const advapi32 = koffi.load('advapi32.dll')
  const ws2 = koffi.load('ws2_32.dll')
  const k = (s: string): Fn => kernel32.func(s) as Fn
  // libloaderapi.h (Microsoft Learn "GetModuleHandleW", "GetProcAddress")
  const GetModuleHandleW = k('void * __stdcall GetModuleHandleW(const char16_t *lpModuleName)')
  const GetProcAddress = k('void * __stdcall GetProcAddress(void *hModule, const char *lpProcName)')
  // Resolved at run time, as PostgreSQL's src/port/win32ntdll.c does: binding a missing export by name
  // throws, and NtFlushBuffersFileEx is missing before Windows 10 1709 and in Wine 8.
  const ntdllModule = GetModuleHandleW('ntdll.dll')
  const flushExPointer = ntdllModule === null ? null : GetProcAddress(ntdllModule, 'NtFlushBuffersFileEx')
  const wineVersionPointer = ntdllModule === null ? null : GetProcAddress(ntdllModule, 'wine_get_version')
  // ntifs.h (Microsoft Learn "NtFlushBuffersFileEx"): NTSTATUS (HANDLE FileHandle, ULONG Flags,
  // PVOID Parameters, ULONG ParametersSize, PIO_STATUS_BLOCK IoStatusBlock)
  const flushExType = koffi.proto(
    'int32_t __stdcall NtFlushBuffersFileEx_t(void *FileHandle, uint32_t Flags, void *Parameters, uint32_t ParametersSize, void *IoStatusBlock)',
  )
  // Wine's own export: const char *wine_get_version(void) (cdecl; Wine's include/wine/library.h)
  const wineVersionType = koffi.proto('const char *wine_get_version_t(void)')
  loaded = {
    // fileapi.h (Microsoft Learn "CreateFileW")
    CreateFileW: k(
      'void * __stdcall CreateFileW(const char16_t *lpFileName, uint32_t dwDesiredAccess, uint32_t dwShareMode, void *lpSecurityAttributes, uint32_t dwCreationDisposition, uint32_t dwFlagsAndAttributes, void *hTemplateFile)',
    ),
    // fileapi.h (Microsoft Learn "WriteFile"): BOOL (HANDLE, LPCVOID, DWORD, LPDWORD, LPOVERLAPPED)
    WriteFile: k(
      'int __stdcall WriteFile(void *hFile, const void *lpBuffer, uint32_t nNumberOfBytesToWrite, void *lpNumberOfBytesWritten, void *lpOverlapped)',
    ),
    // fileapi.h (Microsoft Learn "FlushFileBuffers")
    FlushFileBuffers: k('int __stdcall FlushFileBuffers(void *hFile)'),
    // handleapi.h (Microsoft Learn "CloseHandle")
    CloseHandle: k('int __stdcall CloseHandle(void *hObject)'),
    // errhandlingapi.h (Microsoft Learn "GetLastError")
    GetLastError: k('uint32_t __stdcall GetLastError()'),
    // winbase.h (Microsoft Learn "FormatMessageW"); the last parameter is va_list *, passed NULL
    FormatMessageW: k(
      'uint32_t __stdcall FormatMessageW(uint32_t dwFlags, void *lpSource, uint32_t dwMessageId, uint32_t dwLanguageId, void *lpBuffer, uint32_t nSize, void *Arguments)',
    ),
    // fileapi.h (Microsoft Learn "GetFileAttributesW")
    GetFileAttributesW: k('uint32_t __stdcall GetFileAttributesW(const char16_t *lpFileName)'),
    // fileapi.h (Microsoft Learn "LockFileEx", "UnlockFileEx")
    LockFileEx: k(
      'int __stdcall LockFileEx(void *hFile, uint32_t dwFlags, uint32_t dwReserved, uint32_t nNumberOfBytesToLockLow, uint32_t nNumberOfBytesToLockHigh, void *lpOverlapped)',
    ),
    UnlockFileEx: k(
      'int __stdcall UnlockFileEx(void *hFile, uint32_t dwReserved, uint32_t nNumberOfBytesToUnlockLow, uint32_t nNumberOfBytesToUnlockHigh, void *lpOverlapped)',
    ),
    // fileapi.h (Microsoft Learn "GetVolumeInformationByHandleW")
    GetVolumeInformationByHandleW: k(
      'int __stdcall GetVolumeInformationByHandleW(void *hFile, void *lpVolumeNameBuffer, uint32_t nVolumeNameSize, void *lpVolumeSerialNumber, void *lpMaximumComponentLength, void *lpFileSystemFlags, void *lpFileSystemNameBuffer, uint32_t nFileSystemNameSize)',
    ),
    // fileapi.h (Microsoft Learn "GetFileInformationByHandle"): BOOL (HANDLE, LPBY_HANDLE_FILE_INFORMATION)
    GetFileInformationByHandle: k('int __stdcall GetFileInformationByHandle(void *hFile, void *lpFileInformation)'),
    // winternl.h (Microsoft Learn "RtlNtStatusToDosError"): ULONG (NTSTATUS Status)
    RtlNtStatusToDosError: ntdll.func('uint32_t __stdcall RtlNtStatusToDosError(int32_t Status)') as Fn,
    NtFlushBuffersFileEx: flushExPointer === null ? null : (koffi.decode(flushExPointer, flushExType) as Fn),
    wineVersion:
      wineVersionPointer === null ? null : String((koffi.decode(wineVersionPointer, wineVersionType) as Fn)() ?? 'unknown'),
    // winreg.h (Microsoft Learn "RegGetValueW"): LSTATUS (HKEY, LPCWSTR, LPCWSTR, DWORD, LPDWORD, PVOID, LPDWORD)
    RegGetValueW: advapi32.func(
      'int32_t __stdcall RegGetValueW(void *hkey, const char16_t *lpSubKey, const char16_t *lpValue, uint32_t dwFlags, void *pdwType, void *pvData, void *pcbData)',
    ) as Fn,
    // winsock2.h (Microsoft Learn "WSAStartup", "WSAGetLastError", "socket", "connect", "ioctlsocket",
    // "setsockopt", "getsockopt", "send", "recv", "select", "WSAPoll", "closesocket")
    WSAStartup: ws2.func('int __stdcall WSAStartup(uint16_t wVersionRequested, void *lpWSAData)') as Fn,
    WSAGetLastError: ws2.func('int __stdcall WSAGetLastError()') as Fn,
    socket: ws2.func('uintptr_t __stdcall socket(int af, int type, int protocol)') as Fn,
    connect: ws2.func('int __stdcall connect(uintptr_t s, const void *name, int namelen)') as Fn,
    ioctlsocket: ws2.func('int __stdcall ioctlsocket(uintptr_t s, int32_t cmd, void *argp)') as Fn,
    setsockopt: ws2.func('int __stdcall setsockopt(uintptr_t s, int level, int optname, const void *optval, int optlen)') as Fn,
    getsockopt: ws2.func('int __stdcall getsockopt(uintptr_t s, int level, int optname, void *optval, void *optlen)') as Fn,
    send: ws2.func('int __stdcall send(uintptr_t s, const void *buf, int len, int flags)') as Fn,
    recv: ws2.func('int __stdcall recv(uintptr_t s, void *buf, int len, int flags)') as Fn,
    select: ws2.func('int __stdcall select(int nfds, void *readfds, void *writefds, void *exceptfds, const void *timeout)') as Fn,
    WSAPoll: ws2.func('int __stdcall WSAPoll(void *fdArray, uint32_t fds, int timeout)') as Fn,
    closesocket: ws2.func('int __stdcall closesocket(uintptr_t s)') as Fn,
  }
  return loaded
}

/** True when the call returned INVALID_HANDLE_VALUE (or NULL, which no CreateFileW returns on success). */
export function isInvalidHandle(handle: unknown): boolean {
  return handle === null || BigInt(handle as bigint) === INVALID_HANDLE_VALUE
}

/** The system's text for a Win32 (or Winsock) error number, null when it has none. */
export function systemMessage(win32Error: number): string | null {
  const w = api()
  const buf = Buffer.alloc(1024)
  const chars = Number(
    w.FormatMessageW(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, null, win32Error, 0, buf, buf.length / 2, null),
  )
  return chars === 0 ? null : buf.toString('utf16le', 0, chars * 2)
}

/** A NativeError for a Win32 or Winsock error number: `EPERM: access is denied: Windows error 5, CreateFileW 'x'`. */
export function win32Failure(syscall: string, win32Error: number, path?: string, code?: string): NativeError {
  const posix = posixOf(win32Error)
  return new NativeError(syscall, code ?? posix.code, posix.errno, describeWin32(win32Error, systemMessage(win32Error)), path)
}

/** Throws the error GetLastError reports; call it right after the failing call. */
export function failLast(syscall: string, path?: string): never {
  throw win32Failure(syscall, Number(api().GetLastError()), path)
}

/** An NTSTATUS failure, through RtlNtStatusToDosError; the message carries both numbers. */
export function ntFailure(syscall: string, status: number, path?: string): NativeError {
  const w = api()
  const win32Error = Number(w.RtlNtStatusToDosError(status))
  const posix = posixOf(win32Error)
  const hex = `0x${(status >>> 0).toString(16).toUpperCase().padStart(8, '0')}`
  const description = describeWin32(win32Error, systemMessage(win32Error)).replace(/\)$/u, `, NTSTATUS ${hex})`)
  return new NativeError(syscall, posix.code, posix.errno, description, path)
}

let winsockStarted = false
/** WSAStartup(2.2) once per process; its result is the error number itself (Microsoft Learn "WSAStartup"). */
export function startWinsock(): void {
  if (winsockStarted) return
  const result = Number(api().WSAStartup(0x0202, Buffer.alloc(WSADATA_BYTES)))
  if (result !== 0) throw win32Failure('WSAStartup', result)
  winsockStarted = true
}
