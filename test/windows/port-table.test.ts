/**
 * The Windows method table, error mapping and sockaddr bytes: pure code, run on Linux (importing the
 * port loads no DLL).
 */
import t from 'tap'
import { methodNames } from '../../src/native/methods.js'
import { describeWin32, ERROR, posixOf, tidyDescription, WSA } from '../../src/native/windows/error-codes.js'
import { windowsPort } from '../../src/native/windows/index.js'
import { AF_INET, AF_INET6, winSockaddr } from '../../src/native/windows/sockaddr.js'
import { windowsTable } from '../../src/native/windows/table.js'

const modern = windowsTable({ ntFlushBuffersFileEx: true, wineVersion: null })
const old = windowsTable({ ntFlushBuffersFileEx: false, wineVersion: null })
const wine = windowsTable({ ntFlushBuffersFileEx: false, wineVersion: '8.0' })

t.test('every method has a row, calls, and a reason when unavailable', async (t) => {
  for (const table of [modern, old, wine]) {
    t.same(
      table.methods.map((m) => m.name),
      [...methodNames],
    )
    t.equal(table.family, 'windows')
    t.equal(table.platform, 'win32')
    for (const row of table.methods) {
      t.ok(row.calls.length > 0, `${row.name} says its calls`)
      if (!row.available) t.ok((row.reason ?? '').length > 0, `${row.name} says why not`)
      else t.equal(row.reason, undefined, `${row.name} has no reason`)
    }
  }
})

t.test('fdatasync and flush_data_only follow the NtFlushBuffersFileEx lookup', async (t) => {
  const row = (table: typeof modern, name: string) => table.methods.find((m) => m.name === name)!
  t.equal(row(modern, 'fdatasync').available, true)
  t.match(row(modern, 'fdatasync').calls, /NtFlushBuffersFileEx\(FLUSH_FLAGS_FILE_DATA_SYNC_ONLY\)/)
  t.equal(row(modern, 'flush_data_only').available, true)
  t.equal(row(modern, 'flush_data_only').durable, false)
  t.match(row(modern, 'flush_data_only').caveat, /should lose/)
  for (const table of [old, wine]) {
    t.equal(row(table, 'fdatasync').available, false)
    t.match(row(table, 'fdatasync').reason, /NtFlushBuffersFileEx/)
    t.equal(row(table, 'flush_data_only').available, false)
  }
  const available = (table: typeof modern) => table.methods.filter((m) => m.available).map((m) => m.name)
  t.same(available(modern), ['fsync', 'fdatasync', 'open_datasync', 'fsync_writethrough', 'flush_data_only', 'none'])
  t.same(available(old), ['fsync', 'open_datasync', 'fsync_writethrough', 'none'])
  t.match(row(modern, 'open_sync').reason, /O_SYNC/)
  t.match(row(modern, 'barrier_fsync').reason, /macOS/)
  t.match(row(modern, 'pwritev2_dsync').reason, /Linux/)
  t.match(row(modern, 'open_datasync').calls, /FILE_FLAG_WRITE_THROUGH/)
  t.same(
    [row(modern, 'fsync').calls, row(modern, 'fsync_writethrough').calls],
    ['WriteFile, FlushFileBuffers', 'WriteFile, FlushFileBuffers'],
  )
  t.equal(row(modern, 'none').durable, false)
})

t.test('direct and the Wine note', async (t) => {
  t.equal(modern.direct.applies, true)
  t.match((modern.direct as { how: string }).how, /FILE_FLAG_NO_BUFFERING/)
  t.same(modern.notes, [])
  t.equal(wine.notes.length, 1)
  t.match(wine.notes[0], /Wine 8\.0, which ignores FILE_FLAG_WRITE_THROUGH and FILE_FLAG_NO_BUFFERING.*durability is not tested/)
})

t.test('Win32 and Winsock errors map as libuv maps them', async (t) => {
  t.same(posixOf(ERROR.FILE_NOT_FOUND), { code: 'ENOENT', errno: -4058 })
  t.same(posixOf(ERROR.PATH_NOT_FOUND), { code: 'ENOENT', errno: -4058 })
  t.same(posixOf(ERROR.ACCESS_DENIED), { code: 'EPERM', errno: -4048 })
  t.equal(posixOf(ERROR.INVALID_PARAMETER).code, 'EINVAL')
  t.equal(posixOf(ERROR.DISK_FULL).code, 'ENOSPC')
  t.equal(posixOf(ERROR.HANDLE_DISK_FULL).code, 'ENOSPC')
  t.equal(posixOf(ERROR.SHARING_VIOLATION).code, 'EBUSY')
  t.equal(posixOf(ERROR.LOCK_VIOLATION).code, 'EBUSY')
  t.equal(posixOf(ERROR.FILE_EXISTS).code, 'EEXIST')
  t.equal(posixOf(ERROR.ALREADY_EXISTS).code, 'EEXIST')
  t.equal(posixOf(WSA.ECONNREFUSED).code, 'ECONNREFUSED')
  t.equal(posixOf(WSA.ETIMEDOUT).code, 'ETIMEDOUT')
  t.equal(posixOf(WSA.ECONNRESET).code, 'ECONNRESET')
  t.same(posixOf(424242), { code: 'UNKNOWN', errno: -4094 })
  t.equal(tidyDescription('The system cannot find the path specified.\r\n'), 'the system cannot find the path specified')
  t.equal(describeWin32(3, 'The system cannot find the path specified.\r\n'), 'the system cannot find the path specified: Windows error 3')
  t.equal(describeWin32(WSA.ETIMEDOUT, null), 'connection timed out: Windows error 10060')
  t.equal(describeWin32(WSA.ETIMEDOUT, 'Unknown error'), 'connection timed out: Windows error 10060')
})

t.test('sockaddr bytes for Winsock', async (t) => {
  const v4 = winSockaddr({ address: '127.0.0.1', family: 4, port: 0x1234, scopeId: 0 })
  t.equal(v4.family, AF_INET)
  t.equal(v4.bytes.toString('hex'), '0200' + '1234' + '7f000001' + '0000000000000000')
  const mapped = winSockaddr({ address: '::ffff:127.0.0.1', family: 6, port: 80, scopeId: 0 })
  t.equal(mapped.family, AF_INET, 'a v4-mapped address connects as IPv4 (Windows sockets are V6ONLY)')
  t.equal(mapped.bytes.length, 16)
  const v6 = winSockaddr({ address: 'fe80::1%eth0', family: 6, port: 443, scopeId: 7 })
  t.equal(v6.family, AF_INET6)
  t.equal(v6.bytes.length, 28)
  t.equal(v6.bytes.readUInt16LE(0), 23)
  t.equal(v6.bytes.readUInt16BE(2), 443)
  t.equal(v6.bytes.subarray(8, 24).toString('hex'), 'fe800000000000000000000000000001')
  t.equal(v6.bytes.readUInt32LE(24), 7)
  t.throws(() => winSockaddr({ address: 'not-an-ip', family: 4, port: 1, scopeId: 0 }))
})

t.test('importing the port on Linux loads nothing; calls that need a DLL say so', async (t) => {
  t.equal(windowsPort.family, 'windows')
  t.equal(windowsPort.dropCache('x'), false)
  t.equal(windowsPort.directorySync.supported, false)
  const buf = windowsPort.alignedBuffer(8192, 4096)
  t.equal(buf.length, 8192)
  t.throws(() => windowsPort.table(), /called on linux/)
})
