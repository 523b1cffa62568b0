/**
 * The Windows bindings' constants and struct layouts, checked on any 64-bit system: the values are
 * restated from the headers (mingw-w64-headers/include: winnt.h, winbase.h, fileapi.h, minwinbase.h,
 * winreg.h, winsock2.h, psdk_inc/_fd_types.h, psdk_inc/_wsadata.h, winternl.h) and the Microsoft Learn
 * pages cited in src/native/windows/win32.ts, and the layouts are recomputed by koffi from the C
 * declarations (natural alignment, as MSVC lays them out; every field has a fixed width, so an LP64
 * host gives the LLP64 answer).
 */
import koffi from 'koffi'
import t from 'tap'
import { posixOf, WSA } from '../../src/native/windows/error-codes.js'
import * as w from '../../src/native/windows/win32.js'

t.test('file constants match the headers', async (t) => {
  t.equal(w.GENERIC_READ, 0x80000000) // winnt.h
  t.equal(w.GENERIC_WRITE, 0x40000000)
  t.equal((w.GENERIC_READ | w.GENERIC_WRITE) >>> 0, 0xc0000000, 'the JS | result truncates to the intended DWORD')
  t.same([w.FILE_SHARE_READ, w.FILE_SHARE_WRITE, w.FILE_SHARE_DELETE], [1, 2, 4]) // winnt.h
  t.same([w.CREATE_NEW, w.OPEN_EXISTING, w.OPEN_ALWAYS], [1, 3, 4]) // fileapi.h
  t.same([w.FILE_ATTRIBUTE_DIRECTORY, w.FILE_ATTRIBUTE_NORMAL], [0x10, 0x80]) // winnt.h
  t.same([w.FILE_FLAG_WRITE_THROUGH, w.FILE_FLAG_NO_BUFFERING, w.FILE_FLAG_BACKUP_SEMANTICS], [0x80000000, 0x20000000, 0x02000000]) // winbase.h
  t.equal(w.INVALID_HANDLE_VALUE, BigInt.asUintN(64, -1n), '(HANDLE)(LONG_PTR)-1 on 64-bit')
  t.equal(w.INVALID_FILE_ATTRIBUTES, 0xffffffff)
  t.same([w.LOCKFILE_FAIL_IMMEDIATELY, w.LOCKFILE_EXCLUSIVE_LOCK], [1, 2]) // minwinbase.h
  t.same([w.FLUSH_FLAGS_FILE_DATA_ONLY, w.FLUSH_FLAGS_FILE_DATA_SYNC_ONLY], [1, 4]) // winnt.h / ntifs.h
  t.equal(w.HKEY_LOCAL_MACHINE, BigInt.asUintN(64, BigInt(0x80000002 | 0)), '((HKEY)(ULONG_PTR)((LONG)0x80000002)): sign-extended')
  t.equal(w.RRF_RT_REG_DWORD, 0x10) // winreg.h
})

t.test('Winsock constants match the headers', async (t) => {
  t.same([w.SOCK_STREAM, w.IPPROTO_TCP, w.TCP_NODELAY], [1, 6, 1])
  t.same([w.SOL_SOCKET, w.SO_SNDTIMEO, w.SO_RCVTIMEO, w.SO_ERROR], [0xffff, 0x1005, 0x1006, 0x1007])
  // winsock2.h: #define _IOW(x,y,t) (IOC_IN|(((long)sizeof(t)&IOCPARM_MASK)<<16)|((x)<<8)|(y)), IOC_IN 0x80000000, IOCPARM_MASK 0x7f
  const ioW = (x: string, y: number, size: number): number => 0x80000000 | ((size & 0x7f) << 16) | (x.charCodeAt(0) << 8) | y | 0
  t.equal(w.FIONBIO, ioW('f', 126, 4), "FIONBIO = _IOW('f', 126, u_long)")
  t.equal(w.FIONBIO >>> 0, 0x8004667e)
  t.equal(w.INVALID_SOCKET, BigInt.asUintN(64, -1n), '(SOCKET)(~0) on 64-bit')
  t.equal(w.SOCKET_ERROR, -1)
  // winsock2.h WSAPoll flags, not the POSIX ones (POSIX POLLIN is 1, which is POLLERR here)
  t.same([w.POLLRDNORM, w.POLLERR, w.POLLHUP, w.POLLNVAL], [0x100, 0x1, 0x2, 0x4])
})

t.test('struct layouts: koffi lays the C declarations out as the constants say', async (t) => {
  const OVERLAPPED = koffi.struct('bindings_OVERLAPPED', {
    Internal: 'uintptr_t',
    InternalHigh: 'uintptr_t',
    Offset: 'uint32_t',
    OffsetHigh: 'uint32_t',
    hEvent: 'void *',
  })
  t.equal(koffi.sizeof(OVERLAPPED), 32)
  t.equal(koffi.offsetof(OVERLAPPED, 'Offset'), 16)
  t.equal(koffi.offsetof(OVERLAPPED, 'OffsetHigh'), 20)
  const o = w.overlappedAt(2 ** 40 + 2 ** 33 + 5) // exact in a double
  t.equal(o.length, 32)
  t.equal(o.readUInt32LE(16), 5, 'Offset is the low DWORD')
  t.equal(o.readUInt32LE(20), 0x102, 'OffsetHigh is the high DWORD')
  t.equal(w.overlappedAt(2 ** 62).readUInt32LE(20), 0x40000000, 'the lock offset 2^62 is exact')

  const FILETIME = koffi.struct('bindings_FILETIME', { dwLowDateTime: 'uint32_t', dwHighDateTime: 'uint32_t' })
  const BHFI = koffi.struct('bindings_BY_HANDLE_FILE_INFORMATION', {
    dwFileAttributes: 'uint32_t',
    ftCreationTime: FILETIME,
    ftLastAccessTime: FILETIME,
    ftLastWriteTime: FILETIME,
    dwVolumeSerialNumber: 'uint32_t',
    nFileSizeHigh: 'uint32_t',
    nFileSizeLow: 'uint32_t',
    nNumberOfLinks: 'uint32_t',
    nFileIndexHigh: 'uint32_t',
    nFileIndexLow: 'uint32_t',
  })
  t.equal(koffi.sizeof(BHFI), w.BY_HANDLE_FILE_INFORMATION_BYTES)
  t.equal(koffi.offsetof(BHFI, 'dwVolumeSerialNumber'), w.BY_HANDLE_VOLUME_SERIAL_AT)
  t.equal(koffi.offsetof(BHFI, 'nFileIndexHigh'), w.BY_HANDLE_FILE_INDEX_HIGH_AT)
  t.equal(koffi.offsetof(BHFI, 'nFileIndexLow'), w.BY_HANDLE_FILE_INDEX_LOW_AT)

  const IOSB = koffi.struct('bindings_IO_STATUS_BLOCK', {
    u: koffi.union('bindings_IOSB_u', { Status: 'int32_t', Pointer: 'void *' }),
    Information: 'uintptr_t',
  })
  t.equal(koffi.sizeof(IOSB), w.IO_STATUS_BLOCK_BYTES)

  const WSAPOLLFD = koffi.struct('bindings_WSAPOLLFD', { fd: 'uintptr_t', events: 'int16_t', revents: 'int16_t' })
  t.equal(koffi.sizeof(WSAPOLLFD), w.WSAPOLLFD_BYTES)
  t.equal(koffi.offsetof(WSAPOLLFD, 'events'), 8)
  t.equal(koffi.offsetof(WSAPOLLFD, 'revents'), 10)

  const FD_SET = koffi.struct('bindings_fd_set', { fd_count: 'uint32_t', fd_array: koffi.array('uintptr_t', 64) })
  t.equal(koffi.sizeof(FD_SET), w.FD_SET_BYTES)
  t.equal(koffi.offsetof(FD_SET, 'fd_array'), 8, 'padding after u_int fd_count')

  const TIMEVAL = koffi.struct('bindings_timeval', { tv_sec: 'int32_t', tv_usec: 'int32_t' })
  t.equal(koffi.sizeof(TIMEVAL), w.TIMEVAL_BYTES)

  // psdk_inc/_wsadata.h, the _WIN64 branch (Microsoft Learn "WSADATA": the order differs on 64-bit)
  const WSADATA = koffi.struct('bindings_WSADATA', {
    wVersion: 'uint16_t',
    wHighVersion: 'uint16_t',
    iMaxSockets: 'uint16_t',
    iMaxUdpDg: 'uint16_t',
    lpVendorInfo: 'void *',
    szDescription: koffi.array('char', 257),
    szSystemStatus: koffi.array('char', 129),
  })
  t.equal(koffi.sizeof(WSADATA), 408)
  t.ok(koffi.sizeof(WSADATA) <= 512, 'startWinsock passes 512 bytes')
})

t.test('libuv errno values: EPROTONOSUPPORT is -4045 (-4046 is EPROTO)', async (t) => {
  t.same(posixOf(WSA.EPROTONOSUPPORT), { code: 'EPROTONOSUPPORT', errno: -4045 })
})

t.test(`api() loads the Windows bindings on Windows only (this is ${process.platform})`, async (t) => {
  if (process.platform === 'win32') t.doesNotThrow(() => w.api(), 'api() loads kernel32, ntdll, advapi32 and ws2_32')
  else t.throws(() => w.api(), new RegExp(`^the Windows port was called on ${process.platform}$`, 'u'))
})
