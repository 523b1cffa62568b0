/**
 * The POSIX port's numbers for Linux, macOS, FreeBSD and OpenBSD against the systems' own headers.
 * The expected values here are written again from the headers (not copied from constants.ts), each
 * group with the file it comes from, so a slip in either place shows up as a difference. The
 * struct statfs offsets are recomputed from the headers' field lists with C's layout rules.
 */
import * as fs from 'node:fs'
import t, { type Test } from 'tap'
import { mismatchesWithNode, posixConstants, type PosixConstants, type PosixOs } from '../../../src/native/posix/constants.js'

type Expected = Omit<PosixConstants, 'statfs'> & { statfs: PosixConstants['statfs'] }

/** For the tests that compare with this system's own Node and libc: they fail, saying why, off Linux. */
function notLinux(t: Test): boolean {
  if (process.platform === 'linux') return false
  t.fail(`this test compares with the running Linux system, and this is ${process.platform}\nhint: run the suite on Linux x64, as CI does`)
  return true
}

// Linux: include/uapi/asm-generic/fcntl.h (octal there), arch/arm64/include/uapi/asm/fcntl.h,
// include/uapi/asm-generic/socket.h, glibc bits/socket.h and bits/socket_type.h, asm-generic/errno*.h,
// glibc sys/poll.h.
const linuxCommon = {
  libc: ['libc.so.6'],
  O_RDONLY: 0o0,
  O_WRONLY: 0o1,
  O_RDWR: 0o2,
  O_NONBLOCK: 0o4000,
  O_CREAT: 0o100,
  O_TRUNC: 0o1000,
  O_EXCL: 0o200,
  O_SYNC: 0o4000000 | 0o10000, // __O_SYNC | O_DSYNC
  O_DSYNC: 0o10000,
  O_CLOEXEC: 0o2000000,
  F_NOCACHE: null,
  F_FULLFSYNC: null,
  F_BARRIERFSYNC: null,
  SOL_SOCKET: 1,
  SO_SNDTIMEO: 21, // SO_SNDTIMEO_OLD
  SO_RCVTIMEO: 20, // SO_RCVTIMEO_OLD
  SO_ERROR: 4, // asm-generic/socket.h
  MSG_NOSIGNAL: 0x4000,
  SO_NOSIGPIPE: null,
  MSG_DONTWAIT: 0x40,
  SOCK_CLOEXEC: 0o2000000,
  SOCK_STREAM: 1,
  IPPROTO_TCP: 6,
  TCP_NODELAY: 1,
  EINTR: 4,
  EAGAIN: 11,
  EINPROGRESS: 115,
  ETIMEDOUT: 110,
  ENOSPC: 28,
  nfdsType: 'uint64_t', // typedef unsigned long int nfds_t
} as const

// macOS: xnu bsd/sys/fcntl.h, bsd/sys/_types/_o_sync.h, bsd/sys/_types/_o_dsync.h, bsd/sys/socket.h,
// bsd/sys/errno.h, bsd/sys/poll.h.
const darwinCommon = {
  libc: ['/usr/lib/libSystem.B.dylib', 'libc.dylib'],
  O_RDONLY: 0x0000,
  O_WRONLY: 0x0001,
  O_RDWR: 0x0002,
  O_NONBLOCK: 0x00000004,
  O_CREAT: 0x00000200,
  O_TRUNC: 0x00000400,
  O_EXCL: 0x00000800,
  O_SYNC: 0x0080,
  O_DSYNC: 0x400000,
  O_DIRECT: null,
  O_CLOEXEC: 0x01000000,
  F_NOCACHE: 48,
  F_FULLFSYNC: 51,
  F_BARRIERFSYNC: 85,
  SOL_SOCKET: 0xffff,
  SO_SNDTIMEO: 0x1005,
  SO_RCVTIMEO: 0x1006,
  SO_ERROR: 0x1007, // bsd/sys/socket.h
  MSG_NOSIGNAL: null, // 0x80000 only in newer SDKs; SO_NOSIGPIPE instead
  SO_NOSIGPIPE: 0x1022,
  MSG_DONTWAIT: 0x80,
  SOCK_CLOEXEC: null,
  SOCK_STREAM: 1,
  IPPROTO_TCP: 6,
  TCP_NODELAY: 0x01,
  EINTR: 4,
  EAGAIN: 35,
  EINPROGRESS: 36,
  ETIMEDOUT: 60,
  ENOSPC: 28,
  nfdsType: 'uint32_t', // typedef unsigned int nfds_t
} as const

// Field lists of struct statfs, as (name, size, alignment) in declaration order.
type Field = readonly [name: string, sizeBytes: number, alignBytes: number]
const u32 = (name: string): Field => [name, 4, 4]
const u64 = (name: string): Field => [name, 8, 8]
const chars = (name: string, n: number): Field => [name, n, 1]
const fsid: Field = ['f_fsid', 8, 4] // struct fsid { int32_t val[2]; }

/** C layout: each field at the next multiple of its alignment; the size padded to the largest alignment. */
function layout(fields: readonly Field[]): { offsets: Record<string, number>; sizeBytes: number } {
  const offsets: Record<string, number> = {}
  let at = 0
  let maxAlign = 1
  for (const [name, size, align] of fields) {
    at = Math.ceil(at / align) * align
    offsets[name] = at
    at += size
    maxAlign = Math.max(maxAlign, align)
  }
  return { offsets, sizeBytes: Math.ceil(at / maxAlign) * maxAlign }
}

// xnu bsd/sys/mount.h __DARWIN_STRUCT_STATFS64 (MFSTYPENAMELEN 16, MAXPATHLEN 1024 from bsd/sys/syslimits.h).
const darwinStatfs = layout([
  u32('f_bsize'),
  u32('f_iosize'),
  u64('f_blocks'),
  u64('f_bfree'),
  u64('f_bavail'),
  u64('f_files'),
  u64('f_ffree'),
  fsid,
  u32('f_owner'),
  u32('f_type'),
  u32('f_flags'),
  u32('f_fssubtype'),
  chars('f_fstypename', 16),
  chars('f_mntonname', 1024),
  chars('f_mntfromname', 1024),
  u32('f_flags_ext'),
  ['f_reserved', 7 * 4, 4],
])

// freebsd-src sys/sys/mount.h struct statfs, STATFS_VERSION 0x20140518 (MFSNAMELEN 16, MNAMELEN 1024).
const freebsdStatfs = layout([
  u32('f_version'),
  u32('f_type'),
  ...['f_flags', 'f_bsize', 'f_iosize', 'f_blocks', 'f_bfree', 'f_bavail', 'f_files', 'f_ffree'].map(u64),
  ...['f_syncwrites', 'f_asyncwrites', 'f_syncreads', 'f_asyncreads'].map(u64),
  u32('f_nvnodelistsize'), // f_spare[10] in older headers: the same 80 bytes
  u32('f_spare0'),
  ['f_spare', 9 * 8, 8],
  u32('f_namemax'),
  u32('f_owner'),
  fsid,
  chars('f_charspare', 80),
  chars('f_fstypename', 16),
  chars('f_mntfromname', 1024),
  chars('f_mntonname', 1024),
])

// glibc bits/statfs.h on LP64: __fsword_t f_type first, 15 longs and an 8-byte fsid.
const linuxStatfs = layout([
  u64('f_type'),
  u64('f_bsize'),
  ...['f_blocks', 'f_bfree', 'f_bavail', 'f_files', 'f_ffree'].map(u64),
  fsid,
  u64('f_namelen'),
  u64('f_frsize'),
  u64('f_flags'),
  ['f_spare', 4 * 8, 8],
])

const expected: Record<string, Expected> = {
  'linux x64': {
    ...linuxCommon,
    O_DIRECT: 0o40000,
    statfs: { kind: 'magic', bytes: linuxStatfs.sizeBytes, symbol: 'fstatfs', magicOffset: linuxStatfs.offsets.f_type! },
  },
  'linux arm64': {
    ...linuxCommon,
    O_DIRECT: 0o200000,
    statfs: { kind: 'magic', bytes: linuxStatfs.sizeBytes, symbol: 'fstatfs', magicOffset: linuxStatfs.offsets.f_type! },
  },
  // x86_64 asks for the 64-bit-inode layout by its suffixed name (bsd/sys/cdefs.h __DARWIN_SUF_64_BIT_INO_T);
  // arm64 has only that layout, under the plain name.
  'darwin x64': {
    ...darwinCommon,
    statfs: {
      kind: 'name',
      bytes: darwinStatfs.sizeBytes,
      symbol: 'fstatfs$INODE64',
      nameOffset: darwinStatfs.offsets.f_fstypename!,
      nameBytes: 16,
    },
  },
  'darwin arm64': {
    ...darwinCommon,
    statfs: {
      kind: 'name',
      bytes: darwinStatfs.sizeBytes,
      symbol: 'fstatfs',
      nameOffset: darwinStatfs.offsets.f_fstypename!,
      nameBytes: 16,
    },
  },
  // freebsd-src sys/sys/fcntl.h, sys/sys/socket.h, sys/sys/errno.h, sys/sys/poll.h.
  freebsd: {
    libc: ['libc.so.7'],
    O_RDONLY: 0x0000,
    O_WRONLY: 0x0001,
    O_RDWR: 0x0002,
    O_NONBLOCK: 0x0004,
    O_CREAT: 0x0200,
    O_TRUNC: 0x0400,
    O_EXCL: 0x0800,
    O_SYNC: 0x0080,
    O_DSYNC: 0x01000000,
    O_DIRECT: 0x00010000,
    O_CLOEXEC: 0x00100000,
    F_NOCACHE: null,
    F_FULLFSYNC: null,
    F_BARRIERFSYNC: null,
    SOL_SOCKET: 0xffff,
    SO_SNDTIMEO: 0x1005,
    SO_RCVTIMEO: 0x1006,
    SO_ERROR: 0x1007, // sys/sys/socket.h
    MSG_NOSIGNAL: 0x20000,
    SO_NOSIGPIPE: null,
    MSG_DONTWAIT: 0x80,
    SOCK_CLOEXEC: 0x10000000,
    SOCK_STREAM: 1,
    IPPROTO_TCP: 6,
    TCP_NODELAY: 1,
    EINTR: 4,
    EAGAIN: 35,
    EINPROGRESS: 36,
    ETIMEDOUT: 60,
    ENOSPC: 28,
    statfs: {
      kind: 'name',
      bytes: freebsdStatfs.sizeBytes,
      symbol: 'fstatfs',
      nameOffset: freebsdStatfs.offsets.f_fstypename!,
      nameBytes: 16,
    },
    nfdsType: 'uint32_t',
  },
  // openbsd/src sys/sys/fcntl.h (1.23), sys/sys/socket.h (1.108), sys/sys/errno.h, sys/sys/poll.h.
  openbsd: {
    libc: ['libc.so'],
    O_RDONLY: 0x0000,
    O_WRONLY: 0x0001,
    O_RDWR: 0x0002,
    O_NONBLOCK: 0x0004,
    O_CREAT: 0x0200,
    O_TRUNC: 0x0400,
    O_EXCL: 0x0800,
    O_SYNC: 0x0080,
    O_DSYNC: null, // #define O_DSYNC O_SYNC
    O_DIRECT: null,
    O_CLOEXEC: 0x10000,
    F_NOCACHE: null,
    F_FULLFSYNC: null,
    F_BARRIERFSYNC: null,
    SOL_SOCKET: 0xffff,
    SO_SNDTIMEO: 0x1005,
    SO_RCVTIMEO: 0x1006,
    SO_ERROR: 0x1007, // sys/sys/socket.h
    MSG_NOSIGNAL: 0x400,
    SO_NOSIGPIPE: null,
    MSG_DONTWAIT: 0x80,
    SOCK_CLOEXEC: 0x8000,
    SOCK_STREAM: 1,
    IPPROTO_TCP: 6,
    TCP_NODELAY: 1,
    EINTR: 4,
    EAGAIN: 35,
    EINPROGRESS: 36,
    ETIMEDOUT: 60,
    ENOSPC: 28,
    statfs: null,
    nfdsType: 'uint32_t',
  },
}

t.test('struct statfs layouts worked out from the headers', async (t) => {
  t.equal(darwinStatfs.offsets.f_fstypename, 72, 'macOS f_fstypename after 8 + 5*8 + 8 + 4*4 bytes')
  t.equal(darwinStatfs.sizeBytes, 2168, 'macOS: 88 + 2*1024 + 4 + 7*4')
  t.equal(freebsdStatfs.offsets.f_fstypename, 280, 'FreeBSD f_fstypename after 8 + 12*8 + 80 + 8 + 8 + 80 bytes')
  t.equal(freebsdStatfs.sizeBytes, 2344, 'FreeBSD: 296 + 2*1024')
  t.equal(linuxStatfs.offsets.f_type, 0)
  t.equal(linuxStatfs.sizeBytes, 120)
})

t.test('every table equals the header values', async (t) => {
  const cases: [string, PosixOs, string][] = [
    ['linux x64', 'linux', 'x64'],
    ['linux arm64', 'linux', 'arm64'],
    ['darwin x64', 'darwin', 'x64'],
    ['darwin arm64', 'darwin', 'arm64'],
    ['freebsd', 'freebsd', 'x64'],
    ['freebsd', 'freebsd', 'arm64'],
    ['openbsd', 'openbsd', 'x64'],
  ]
  for (const [key, os, arch] of cases) {
    const ours = posixConstants(os, arch)
    const wanted = expected[key]!
    // Key by key, so a failure names the constant.
    for (const name of Object.keys(wanted) as (keyof Expected)[]) t.same(ours[name], wanted[name], `${os} ${arch} ${name}`)
    t.same(Object.keys(ours).sort(), Object.keys(wanted).sort(), `${os} ${arch}: no value left unchecked`)
  }
})

t.test('O_SYNC and O_DSYNC are distinct where the system has both, and open_datasync never falls back silently', async (t) => {
  for (const os of ['linux', 'darwin', 'freebsd'] as const) {
    const k = posixConstants(os, 'x64')
    t.not(k.O_DSYNC, null, `${os} has O_DSYNC`)
    t.not(k.O_DSYNC, k.O_SYNC, `${os} O_DSYNC is its own bit`)
  }
})

t.test('mismatchesWithNode', async (t) => {
  t.test('none against this Node on Linux', async (t) => {
    if (notLinux(t)) return
    t.same(mismatchesWithNode('linux', posixConstants('linux', process.arch), fs.constants as unknown as Record<string, number>), [])
  })

  t.test('the Linux table agrees with every open flag this Node knows', async (t) => {
    if (notLinux(t)) return
    const k = posixConstants('linux', process.arch)
    const node = fs.constants as unknown as Record<string, number>
    for (const name of [
      'O_RDONLY',
      'O_WRONLY',
      'O_RDWR',
      'O_NONBLOCK',
      'O_CREAT',
      'O_TRUNC',
      'O_EXCL',
      'O_SYNC',
      'O_DSYNC',
      'O_DIRECT',
    ] as const) {
      t.equal(k[name], node[name], `${name} as Node has it`)
    }
  })

  t.test('a deliberate mismatch is found and named, with both values', async (t) => {
    const k = posixConstants('linux', 'x64')
    const node = { ...(fs.constants as unknown as Record<string, number>), O_DSYNC: 0x1234 }
    const found = mismatchesWithNode('linux', k, node)
    t.same(found, ['O_DSYNC: plugcheck has 0x1000, Node has 0x1234'])
  })

  t.test('a flag Node has where our table has none is a mismatch', async (t) => {
    const found = mismatchesWithNode('openbsd', posixConstants('openbsd', 'x64'), { O_DIRECT: 0x10000 })
    t.same(found, ['O_DIRECT: plugcheck has none, Node has 0x10000'])
  })

  t.test('names Node lacks are not checked', async (t) => {
    t.same(mismatchesWithNode('darwin', posixConstants('darwin', 'arm64'), {}), [])
  })

  t.test("each system's table matches a Node built against that system's headers", async (t) => {
    // fs.constants as Node would report them there: the same header values, and O_DIRECT only where it exists.
    const nodeOn: Record<'darwin' | 'freebsd' | 'openbsd', Record<string, number>> = {
      darwin: {
        O_RDONLY: 0,
        O_WRONLY: 1,
        O_RDWR: 2,
        O_NONBLOCK: 0x4,
        O_CREAT: 0x200,
        O_TRUNC: 0x400,
        O_EXCL: 0x800,
        O_SYNC: 0x80,
        O_DSYNC: 0x400000,
      },
      freebsd: {
        O_RDONLY: 0,
        O_WRONLY: 1,
        O_RDWR: 2,
        O_NONBLOCK: 0x4,
        O_CREAT: 0x200,
        O_TRUNC: 0x400,
        O_EXCL: 0x800,
        O_SYNC: 0x80,
        O_DSYNC: 0x1000000,
        O_DIRECT: 0x10000,
      },
      // OpenBSD's O_DSYNC is O_SYNC, so Node reports 0x80 for it.
      openbsd: {
        O_RDONLY: 0,
        O_WRONLY: 1,
        O_RDWR: 2,
        O_NONBLOCK: 0x4,
        O_CREAT: 0x200,
        O_TRUNC: 0x400,
        O_EXCL: 0x800,
        O_SYNC: 0x80,
        O_DSYNC: 0x80,
      },
    }
    for (const os of ['darwin', 'freebsd', 'openbsd'] as const) {
      t.same(mismatchesWithNode(os, posixConstants(os, 'arm64'), nodeOn[os]), [], `${os} agrees`)
    }
    // FreeBSD before 13 had no O_DSYNC bit of its own: a Node built there would show the difference.
    t.same(mismatchesWithNode('freebsd', posixConstants('freebsd', 'x64'), { ...nodeOn.freebsd, O_DSYNC: 0x80 }), [
      'O_DSYNC: plugcheck has 0x1000000, Node has 0x80',
    ])
  })
})

t.test('the port refuses to start when its flags disagree with Node', async (t) => {
  if (notLinux(t)) return
  // The port reads node:fs's constants; hand it a copy with one flag changed.
  const wrong = { ...fs.constants, O_SYNC: 0x80 }
  const { createPosixPort } = await t.mockImport<typeof import('../../../src/native/posix/index.js')>(
    '../../../src/native/posix/index.js',
    {
      'node:fs': { ...fs, constants: wrong, default: { ...fs, constants: wrong } },
    },
  )
  t.throws(() => createPosixPort('linux'), {
    message:
      /^plugcheck's open flags for linux disagree with this system's \(O_SYNC: plugcheck has 0x101000, Node has 0x80\): refusing to run with wrong flags$/,
  })
  // And with the real constants it starts.
  const real = await import('../../../src/native/posix/index.js')
  t.doesNotThrow(() => real.createPosixPort('linux'))
})

t.test('every statfs symbol can be declared to koffi by name, $INODE64 included', async (t) => {
  if (notLinux(t)) return
  // A C-like prototype string cannot carry "fstatfs$INODE64" (koffi stops at the "$"); the
  // (name, result, arguments) form can. Here, on glibc, the lookup itself must be what fails, never the parse.
  const { default: koffi } = await import('koffi')
  const lib = koffi.load('libc.so.6')
  t.throws(
    () => lib.func('int fstatfs$INODE64(int fd, void *buf)'),
    { message: /Unexpected token '\$'/ },
    'the prototype-string form cannot name it',
  )
  for (const [os, arch] of [
    ['linux', 'x64'],
    ['darwin', 'x64'],
    ['darwin', 'arm64'],
    ['freebsd', 'x64'],
  ] as const) {
    const layout = posixConstants(os, arch).statfs
    if (layout === null) continue
    try {
      lib.func(layout.symbol, 'int', ['int', 'void *'])
      t.pass(`${os} ${arch}: ${layout.symbol} found in glibc`)
    } catch (error) {
      t.match((error as Error).message, /Cannot find function/, `${os} ${arch}: ${layout.symbol} parses; only the lookup fails on glibc`)
    }
  }
})
