/**
 * The only bindings to kernel32, ntdll, advapi32 and ws2_32. Nothing is loaded when this module is
 * imported: api() loads the DLLs on first use, so the rest of the Windows port (and its pure table) can
 * be imported, and unit-tested, on Linux.
 *
 * Calling convention: every prototype says __stdcall (WINAPI, NTAPI and WSAAPI are all __stdcall in
 * mingw-w64's minwindef.h / winnt.h / winsock2.h), which koffi honours on 32-bit x86; on x64 and ARM64
 * "__stdcall is accepted and ignored" and the one platform convention is used (Microsoft Learn
 * "__stdcall", "x64 calling convention"). None of the functions bound here is variadic (FormatMessageW
 * takes a va_list *, a plain pointer, passed NULL). HANDLE, HMODULE and HKEY are `void *` (koffi 3 gives
 * a BigInt, or null for NULL: koffi doc/pointers.md); SOCKET is UINT_PTR (`uintptr_t`; mingw-w64
 * psdk_inc/_socket_types.h), returned as a Number up to 2^53 and as an exact BigInt above (koffi
 * src/util.hh NewInt), so INVALID_SOCKET compares exactly; DWORD/ULONG/u_long/BOOL are 32 bits and so
 * is `long` on Windows (LLP64); NTSTATUS and LSTATUS are signed 32-bit LONGs (winnt.h, winreg.h). A JS
 * number passed to a uint32_t parameter goes through int64 and is truncated (koffi src/util.hh
 * TryNumber), so GENERIC_READ | GENERIC_WRITE, negative after JS's 32-bit `|`, arrives as 0xC0000000.
 * Pointers to out-parameters and structs are passed as Buffers (no copy). The struct offsets below are
 * the 64-bit layouts (x64 and ARM64 share them); api() refuses any other architecture.
 *
 * Errors: GetLastError (and WSAGetLastError, which reads the same TEB field) must be the next koffi
 * call after the failing one. koffi (since 2.6.10, CHANGELOG "Protect GetLastError() value from Node.js
 * and V8 on Windows"; src/koffi/src/interp.cc WRAP) copies TEB LastErrorValue aside right after each
 * native call and restores it right before the next, so what Node and V8 do in between does not
 * matter, but any other koffi call in between does. Every failure path here reads it first.
 */
import koffi from 'koffi'
import { NativeError } from '../errors.js'
import { describeWin32, posixOf } from './error-codes.js'

/* Every constant below was checked against mingw-w64-headers/include (the file named beside it) and the
   Microsoft Learn page named beside it. */
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
/** handleapi.h: INVALID_HANDLE_VALUE ((HANDLE)(LONG_PTR)-1), as koffi returns a `void *` (Microsoft Learn "CreateFileW": "If the function fails, the return value is INVALID_HANDLE_VALUE") */
export const INVALID_HANDLE_VALUE = 0xffffffffffffffffn
/** fileapi.h: INVALID_FILE_ATTRIBUTES ((DWORD)-1) */
export const INVALID_FILE_ATTRIBUTES = 0xffffffff
/** winbase.h; Microsoft Learn "MoveFileExW" (dwFlags) */
export const MOVEFILE_REPLACE_EXISTING = 0x1
export const MOVEFILE_WRITE_THROUGH = 0x8
/** minwinbase.h; Microsoft Learn "LockFileEx" (dwFlags) */
export const LOCKFILE_FAIL_IMMEDIATELY = 0x1
export const LOCKFILE_EXCLUSIVE_LOCK = 0x2
/** ntifs.h (mingw-w64 has them in winnt.h: 0x1, 0x4; FLUSH_FLAGS_NO_SYNC is 0x2); Microsoft Learn "NtFlushBuffersFileEx" (Flags) */
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
 * OVERLAPPED (minwinbase.h, checked in mingw-w64's; Microsoft Learn "OVERLAPPED structure"), 64-bit layout: Internal
 * ULONG_PTR at 0, InternalHigh ULONG_PTR at 8, Offset DWORD at 16, OffsetHigh DWORD at 20 (a union with PVOID Pointer), hEvent
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
 * BY_HANDLE_FILE_INFORMATION (fileapi.h, checked in mingw-w64's; FILETIME is two DWORDs, minwinbase.h; Microsoft Learn "BY_HANDLE_FILE_INFORMATION"): DWORD attributes
 * at 0, three FILETIMEs (two DWORDs each) at 4, 12, 20, dwVolumeSerialNumber at 28, nFileSizeHigh 32,
 * nFileSizeLow 36, nNumberOfLinks 40, nFileIndexHigh 44, nFileIndexLow 48; 52 bytes, no padding.
 */
export const BY_HANDLE_FILE_INFORMATION_BYTES = 52
export const BY_HANDLE_VOLUME_SERIAL_AT = 28
export const BY_HANDLE_FILE_INDEX_HIGH_AT = 44
export const BY_HANDLE_FILE_INDEX_LOW_AT = 48

/** IO_STATUS_BLOCK (wdm.h; mingw-w64 winternl.h; Microsoft Learn "IO_STATUS_BLOCK"): NTSTATUS/PVOID union at 0, ULONG_PTR Information at 8; 16 bytes. */
export const IO_STATUS_BLOCK_BYTES = 16

/* ws2def.h / winsock2.h constants (mingw-w64 winsock2.h; Microsoft Learn: "socket", "setsockopt",
   "SOL_SOCKET Socket Options" (SO_SNDTIMEO/SO_RCVTIMEO take a DWORD of milliseconds),
   "IPPROTO_TCP Socket Options", "ioctlsocket", "WSAPOLLFD") */
export const SOCK_STREAM = 1
export const IPPROTO_TCP = 6
export const TCP_NODELAY = 0x0001
export const SOL_SOCKET = 0xffff
export const SO_SNDTIMEO = 0x1005
export const SO_RCVTIMEO = 0x1006
export const SO_ERROR = 0x1007
/** winsock2.h: FIONBIO = _IOW('f', 126, u_long) = IOC_IN 0x80000000 | (sizeof(u_long) 4 << 16) | ('f' 0x66 << 8) | 126 = 0x8004667E; ioctlsocket takes it as a (32-bit) long (mingw-w64: `__LONG32 cmd`), so it is passed as the negative int32 */
export const FIONBIO = 0x8004667e | 0
/** winsock2.h (mingw-w64 psdk_inc/_socket_types.h): INVALID_SOCKET (SOCKET)(~0), SOCKET_ERROR (-1) */
export const INVALID_SOCKET = 0xffffffffffffffffn
export const SOCKET_ERROR = -1
/** winsock2.h WSAPoll events (not the POSIX values): POLLRDNORM 0x0100, POLLRDBAND 0x0200, POLLIN = both; POLLERR 1, POLLHUP 2, POLLNVAL 4 (Microsoft Learn "WSAPOLLFD": POLLERR/POLLHUP/POLLNVAL are reported in revents unasked) */
export const POLLRDNORM = 0x0100
export const POLLERR = 0x0001
export const POLLHUP = 0x0002
export const POLLNVAL = 0x0004
/** WSAPOLLFD (winsock2.h `struct pollfd`; Microsoft Learn "WSAPOLLFD"): SOCKET fd at 0, SHORT events at 8, SHORT revents at 10, 4 bytes of tail padding; 16 bytes on 64-bit. */
export const WSAPOLLFD_BYTES = 16
/** fd_set (winsock2.h; mingw-w64 psdk_inc/_fd_types.h; Microsoft Learn "fd_set"): u_int fd_count at 0, 4 bytes of padding, SOCKET fd_array[FD_SETSIZE = 64] at 8 on 64-bit; 520 bytes. */
export const FD_SET_BYTES = 8 + 64 * 8
/** timeval (winsock2.h; mingw-w64 _timeval.h; Microsoft Learn "timeval"): long tv_sec, long tv_usec; long is 32 bits on Windows; 8 bytes. */
export const TIMEVAL_BYTES = 8
/**
 * WSADATA (Microsoft Learn "WSADATA"; mingw-w64 psdk_inc/_wsadata.h): on _WIN64 the fields are
 * reordered: WORD wVersion, WORD wHighVersion, u_short iMaxSockets, u_short iMaxUdpDg, char *lpVendorInfo
 * at 8, szDescription[257] at 16, szSystemStatus[129] at 273; 402 bytes padded to 408. plugcheck reads
 * none of it; a larger buffer is harmless.
 */
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
  readonly MoveFileExW: Fn
  readonly CreateHardLinkW: Fn
  readonly DeleteFileW: Fn
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
  // The struct offsets in this file (OVERLAPPED, WSAPOLLFD, fd_set, SOCKET as 8 bytes) are the 64-bit
  // ones; on 32-bit Windows they would be wrong and the kernel would read garbage.
  if (process.arch !== 'x64' && process.arch !== 'arm64')
    throw new Error(`the Windows port needs 64-bit Windows (x64 or arm64), not ${process.arch}`)
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
  // PVOID Parameters, ULONG ParametersSize, PIO_STATUS_BLOCK IoStatusBlock); __kernel_entry NTSYSCALLAPI,
  // stdcall (mingw-w64-crt lib32/ntdll.def: NtFlushBuffersFileEx@20, five 4-byte arguments on x86).
  // PostgreSQL's src/port/win32fdatasync.c calls it with the same arguments (FLUSH_FLAGS_FILE_DATA_SYNC_ONLY, NULL, 0, &iosb).
  const flushExType = koffi.proto(
    'int32_t __stdcall NtFlushBuffersFileEx_t(void *FileHandle, uint32_t Flags, void *Parameters, uint32_t ParametersSize, void *IoStatusBlock)',
  )
  // Wine's own export: const char *wine_get_version(void) (Wine's dlls/ntdll/ntdll.spec: `@ cdecl wine_get_version()`;
  // cdecl and stdcall are one convention on x64)
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
    // winbase.h (Microsoft Learn "MoveFileExW"): BOOL (LPCWSTR, LPCWSTR, DWORD)
    MoveFileExW: k('int __stdcall MoveFileExW(const char16_t *lpExistingFileName, const char16_t *lpNewFileName, uint32_t dwFlags)'),
    // winbase.h (Microsoft Learn "CreateHardLinkW"): BOOL (LPCWSTR lpFileName, LPCWSTR lpExistingFileName, LPSECURITY_ATTRIBUTES)
    CreateHardLinkW: k(
      'int __stdcall CreateHardLinkW(const char16_t *lpFileName, const char16_t *lpExistingFileName, void *lpSecurityAttributes)',
    ),
    // fileapi.h (Microsoft Learn "DeleteFileW")
    DeleteFileW: k('int __stdcall DeleteFileW(const char16_t *lpFileName)'),
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
    wineVersion: wineVersionPointer === null ? null : String((koffi.decode(wineVersionPointer, wineVersionType) as Fn)() ?? 'unknown'),
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
