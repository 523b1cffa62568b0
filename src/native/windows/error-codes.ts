/**
 * Win32 and Winsock error numbers to the POSIX code and errno Node reports on Windows. Pure (no koffi),
 * so it is unit-tested on Linux.
 *
 * The mapping is libuv's uv_translate_sys_error (src/win/error.c), which is what Node's fs and net
 * errors use on Windows; errno is libuv's Windows value (include/uv/errno.h: UV__ENOENT -4058, ...), so
 * `err.errno` matches what Node would put there. Notably ERROR_ACCESS_DENIED is EPERM, as libuv has it:
 * Node on Windows says `EPERM: operation not permitted, open` for a read-only file.
 *
 * Error numbers: winerror.h ("System Error Codes (0-499)", "(500-999)", "(1000-1299)" and
 * "Windows Sockets Error Codes" on Microsoft Learn).
 */

/**
 * winerror.h: every number below checked against mingw-w64-headers/include/winerror.h (ERROR_* are
 * __MSABI_LONG(n)) and Microsoft Learn "System Error Codes (0-499)", "(500-999)", "(1000-1299)",
 * "(1700-3999)".
 */
export const ERROR = {
  INVALID_FUNCTION: 1,
  FILE_NOT_FOUND: 2,
  PATH_NOT_FOUND: 3,
  TOO_MANY_OPEN_FILES: 4,
  ACCESS_DENIED: 5,
  INVALID_HANDLE: 6,
  NOT_ENOUGH_MEMORY: 8,
  INVALID_DATA: 13,
  OUTOFMEMORY: 14,
  INVALID_DRIVE: 15,
  NOT_SAME_DEVICE: 17,
  WRITE_PROTECT: 19,
  CRC: 23,
  GEN_FAILURE: 31,
  SHARING_VIOLATION: 32,
  LOCK_VIOLATION: 33,
  HANDLE_DISK_FULL: 39,
  NOT_SUPPORTED: 50,
  NETNAME_DELETED: 64,
  FILE_EXISTS: 80,
  CANNOT_MAKE: 82,
  INVALID_PARAMETER: 87,
  BROKEN_PIPE: 109,
  OPEN_FAILED: 110,
  BUFFER_OVERFLOW: 111,
  DISK_FULL: 112,
  SEM_TIMEOUT: 121,
  INSUFFICIENT_BUFFER: 122,
  INVALID_NAME: 123,
  MOD_NOT_FOUND: 126,
  DIR_NOT_EMPTY: 145,
  BAD_PATHNAME: 161,
  ALREADY_EXISTS: 183,
  ENVVAR_NOT_FOUND: 203,
  FILENAME_EXCED_RANGE: 206,
  DIRECTORY: 267,
  ELEVATION_REQUIRED: 740,
  OPERATION_ABORTED: 995,
  NOACCESS: 998,
  END_OF_MEDIA: 1100,
  IO_DEVICE: 1117,
  CONNECTION_REFUSED: 1225,
  NETWORK_UNREACHABLE: 1231,
  HOST_UNREACHABLE: 1232,
  CONNECTION_ABORTED: 1236,
  PRIVILEGE_NOT_HELD: 1314,
  DISK_CORRUPT: 1393,
  CANT_ACCESS_FILE: 1920,
  NOT_CONNECTED: 2250,
} as const

/**
 * winerror.h WSA* = WSABASEERR (10000) + n, checked against mingw-w64-headers/include/winerror.h and
 * psdk_inc/_wsa_errnos.h, and Microsoft Learn "Windows Sockets Error Codes".
 */
export const WSA = {
  EINTR: 10004,
  EACCES: 10013,
  EFAULT: 10014,
  EINVAL: 10022,
  EMFILE: 10024,
  EWOULDBLOCK: 10035,
  EINPROGRESS: 10036,
  EALREADY: 10037,
  ENOTSOCK: 10038,
  EMSGSIZE: 10040,
  EPROTONOSUPPORT: 10043,
  ESOCKTNOSUPPORT: 10044,
  EPFNOSUPPORT: 10046,
  EAFNOSUPPORT: 10047,
  EADDRINUSE: 10048,
  EADDRNOTAVAIL: 10049,
  ENETDOWN: 10050,
  ENETUNREACH: 10051,
  ENETRESET: 10052,
  ECONNABORTED: 10053,
  ECONNRESET: 10054,
  ENOBUFS: 10055,
  EISCONN: 10056,
  ENOTCONN: 10057,
  ESHUTDOWN: 10058,
  ETIMEDOUT: 10060,
  ECONNREFUSED: 10061,
  EHOSTUNREACH: 10065,
  NOTINITIALISED: 10093,
  HOST_NOT_FOUND: 11001,
  NO_DATA: 11004,
} as const

/**
 * libuv include/uv/errno.h, the Windows values (the `#else` branch of each UV__E*, taken when _WIN32),
 * which Node reports as err.errno on Windows; checked one by one against libuv's header.
 */
const uvErrno: Record<string, number> = {
  E2BIG: -4093,
  EACCES: -4092,
  EADDRINUSE: -4091,
  EADDRNOTAVAIL: -4090,
  EAFNOSUPPORT: -4089,
  EAGAIN: -4088,
  EALREADY: -4084,
  EBADF: -4083,
  EBUSY: -4082,
  ECANCELED: -4081,
  ECONNABORTED: -4079,
  ECONNREFUSED: -4078,
  ECONNRESET: -4077,
  EEXIST: -4075,
  EFAULT: -4074,
  EHOSTUNREACH: -4073,
  EINVAL: -4071,
  EIO: -4070,
  EISCONN: -4069,
  EISDIR: -4068,
  EMFILE: -4066,
  EMSGSIZE: -4065,
  ENAMETOOLONG: -4064,
  ENETDOWN: -4063,
  ENETUNREACH: -4062,
  ENOBUFS: -4060,
  ENOENT: -4058,
  ENOMEM: -4057,
  ENOSPC: -4055,
  ENOTCONN: -4053,
  ENOTEMPTY: -4051,
  ENOTSOCK: -4050,
  ENOTSUP: -4049,
  EPERM: -4048,
  EPIPE: -4047,
  EPROTONOSUPPORT: -4045, // UV__EPROTONOSUPPORT (-4045); -4046 is UV__EPROTO
  EROFS: -4043,
  ESHUTDOWN: -4042,
  ETIMEDOUT: -4039,
  EXDEV: -4037,
  EOF: -4095,
  ESOCKTNOSUPPORT: -4025,
  UNKNOWN: -4094,
}

// uv_translate_sys_error, case by case (libuv src/win/error.c), for the numbers above; checked against
// that switch (uv_translate_write_sys_error, which WriteFile errors go through in libuv, maps
// ERROR_BROKEN_PIPE to EPIPE instead; plugcheck writes files, never pipes, so the main table is used).
const codeOf = new Map<number, string>([
  [WSA.EACCES, 'EACCES'],
  [ERROR.ELEVATION_REQUIRED, 'EACCES'],
  [ERROR.CANT_ACCESS_FILE, 'EACCES'],
  [WSA.EADDRINUSE, 'EADDRINUSE'],
  [WSA.EADDRNOTAVAIL, 'EADDRNOTAVAIL'],
  [WSA.EAFNOSUPPORT, 'EAFNOSUPPORT'],
  [WSA.EWOULDBLOCK, 'EAGAIN'],
  [WSA.EALREADY, 'EALREADY'],
  [ERROR.INVALID_HANDLE, 'EBADF'],
  [ERROR.LOCK_VIOLATION, 'EBUSY'],
  [ERROR.SHARING_VIOLATION, 'EBUSY'],
  [ERROR.OPERATION_ABORTED, 'ECANCELED'],
  [WSA.EINTR, 'ECANCELED'],
  [ERROR.CONNECTION_ABORTED, 'ECONNABORTED'],
  [WSA.ECONNABORTED, 'ECONNABORTED'],
  [ERROR.CONNECTION_REFUSED, 'ECONNREFUSED'],
  [WSA.ECONNREFUSED, 'ECONNREFUSED'],
  [ERROR.NETNAME_DELETED, 'ECONNRESET'],
  [WSA.ECONNRESET, 'ECONNRESET'],
  [ERROR.ALREADY_EXISTS, 'EEXIST'],
  [ERROR.FILE_EXISTS, 'EEXIST'],
  [ERROR.NOACCESS, 'EFAULT'],
  [WSA.EFAULT, 'EFAULT'],
  [ERROR.HOST_UNREACHABLE, 'EHOSTUNREACH'],
  [WSA.EHOSTUNREACH, 'EHOSTUNREACH'],
  [ERROR.INSUFFICIENT_BUFFER, 'EINVAL'],
  [ERROR.INVALID_DATA, 'EINVAL'],
  [ERROR.INVALID_PARAMETER, 'EINVAL'],
  [WSA.EINVAL, 'EINVAL'],
  [WSA.EPFNOSUPPORT, 'EINVAL'],
  [ERROR.CRC, 'EIO'],
  [ERROR.DISK_CORRUPT, 'EIO'],
  [ERROR.GEN_FAILURE, 'EIO'],
  [ERROR.IO_DEVICE, 'EIO'],
  [ERROR.OPEN_FAILED, 'EIO'],
  [WSA.EISCONN, 'EISCONN'],
  [ERROR.TOO_MANY_OPEN_FILES, 'EMFILE'],
  [WSA.EMFILE, 'EMFILE'],
  [WSA.EMSGSIZE, 'EMSGSIZE'],
  [ERROR.BUFFER_OVERFLOW, 'ENAMETOOLONG'],
  [ERROR.FILENAME_EXCED_RANGE, 'ENAMETOOLONG'],
  [ERROR.NETWORK_UNREACHABLE, 'ENETUNREACH'],
  [WSA.ENETUNREACH, 'ENETUNREACH'],
  [WSA.ENOBUFS, 'ENOBUFS'],
  [ERROR.BAD_PATHNAME, 'ENOENT'],
  [ERROR.DIRECTORY, 'ENOENT'],
  [ERROR.ENVVAR_NOT_FOUND, 'ENOENT'],
  [ERROR.FILE_NOT_FOUND, 'ENOENT'],
  [ERROR.INVALID_NAME, 'ENOENT'],
  [ERROR.INVALID_DRIVE, 'ENOENT'],
  [ERROR.MOD_NOT_FOUND, 'ENOENT'],
  [ERROR.PATH_NOT_FOUND, 'ENOENT'],
  [WSA.HOST_NOT_FOUND, 'ENOENT'],
  [WSA.NO_DATA, 'ENOENT'],
  [ERROR.NOT_ENOUGH_MEMORY, 'ENOMEM'],
  [ERROR.OUTOFMEMORY, 'ENOMEM'],
  [ERROR.CANNOT_MAKE, 'ENOSPC'],
  [ERROR.DISK_FULL, 'ENOSPC'],
  [ERROR.END_OF_MEDIA, 'ENOSPC'],
  [ERROR.HANDLE_DISK_FULL, 'ENOSPC'],
  [ERROR.NOT_CONNECTED, 'ENOTCONN'],
  [WSA.ENOTCONN, 'ENOTCONN'],
  [ERROR.DIR_NOT_EMPTY, 'ENOTEMPTY'],
  [WSA.ENOTSOCK, 'ENOTSOCK'],
  [ERROR.NOT_SUPPORTED, 'ENOTSUP'],
  [ERROR.BROKEN_PIPE, 'EOF'],
  [ERROR.ACCESS_DENIED, 'EPERM'],
  [ERROR.PRIVILEGE_NOT_HELD, 'EPERM'],
  [WSA.ESHUTDOWN, 'EPIPE'],
  [WSA.EPROTONOSUPPORT, 'EPROTONOSUPPORT'],
  [ERROR.WRITE_PROTECT, 'EROFS'],
  [ERROR.SEM_TIMEOUT, 'ETIMEDOUT'],
  [WSA.ETIMEDOUT, 'ETIMEDOUT'],
  [ERROR.NOT_SAME_DEVICE, 'EXDEV'],
  [ERROR.INVALID_FUNCTION, 'EISDIR'],
  [WSA.ESOCKTNOSUPPORT, 'ESOCKTNOSUPPORT'],
  // Not in libuv's table (it would say UNKNOWN); named here so a dead network reads as one.
  [WSA.ENETDOWN, 'ENETDOWN'],
  [WSA.ENETRESET, 'ECONNRESET'],
])

/** The POSIX code and (libuv, negative) errno for a Win32 or Winsock error number. */
export function posixOf(win32Error: number): { readonly code: string; readonly errno: number } {
  const code = codeOf.get(win32Error) ?? 'UNKNOWN'
  return { code, errno: uvErrno[code] ?? uvErrno.UNKNOWN! }
}

/** FormatMessageW's text as Node prints descriptions: first letter lower case, no trailing period or CRLF. */
export function tidyDescription(text: string): string {
  const trimmed = text.replace(/[\s.]+$/u, '').replace(/\s*\r?\n\s*/gu, ' ')
  return trimmed.charAt(0).toLowerCase() + trimmed.slice(1)
}

/** Where the system has no text for a number (Wine lacks some Winsock messages): the POSIX wording. */
const fallbackText: Record<string, string> = {
  ETIMEDOUT: 'connection timed out',
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset by peer',
  ECONNABORTED: 'software caused connection abort',
  ENETUNREACH: 'network is unreachable',
  EHOSTUNREACH: 'host is unreachable',
}

/** The description part of a NativeError message: "access is denied: Windows error 5". */
export function describeWin32(win32Error: number, systemText: string | null): string {
  const missing = systemText === null || systemText.trim() === '' || /^unknown error\.?$/iu.test(systemText.trim())
  const text = missing ? (fallbackText[posixOf(win32Error).code] ?? 'unknown error') : tidyDescription(systemText)
  return `${text}: Windows error ${win32Error}`
}
