/**
 * sockaddr bytes for every platform layout, checked against values computed by hand from the
 * headers (netinet/in.h, netinet6/in6.h, sys/socket.h, ws2def.h, ws2ipdef.h; see src/native/sockaddr.ts),
 * and the address parser: RFC 4291 text forms accepted, garbage refused with an error.
 */
import t from 'tap'
import {
  freebsdSockaddr,
  ipv4Bytes,
  ipv6Bytes,
  isLinkLocal,
  linuxSockaddr,
  macosSockaddr,
  nodeConnectHost,
  openbsdSockaddr,
  sockaddrBytes,
  sockaddrLayoutFor,
  sockaddrLayouts,
  splitZone,
  unmappedIpv4,
  windowsSockaddr,
} from '../../../src/native/sockaddr.js'
import type { SocketAddress } from '../../../src/native/port.js'

const hex = (text: string): string => text.replace(/\s+/g, '')
const v4: SocketAddress = { address: '127.0.0.1', family: 4, port: 5400, scopeId: 0 }
const v6: SocketAddress = { address: 'fe80::1', family: 6, port: 5400, scopeId: 4 }
// 5400 = 0x1518 in network order; 127.0.0.1 = 7f 00 00 01; fe80::1 = fe80 then six zero groups then 0001.
const v6Tail = '1518 00000000 fe800000000000000000000000000001'

t.test('sockaddr_in: 16 bytes, family then port then address then 8 zero bytes', async (t) => {
  const twoByteFamily = hex('0200 1518 7f000001 0000000000000000')
  const lengthByte = hex('10 02 1518 7f000001 0000000000000000') // sin_len 16, AF_INET 2
  t.equal(sockaddrBytes(v4, linuxSockaddr, 'LE').toString('hex'), twoByteFamily, 'Linux')
  t.equal(sockaddrBytes(v4, windowsSockaddr, 'LE').toString('hex'), twoByteFamily, 'Windows')
  t.equal(sockaddrBytes(v4, macosSockaddr, 'LE').toString('hex'), lengthByte, 'macOS')
  t.equal(sockaddrBytes(v4, freebsdSockaddr, 'LE').toString('hex'), lengthByte, 'FreeBSD')
  t.equal(sockaddrBytes(v4, openbsdSockaddr, 'LE').toString('hex'), lengthByte, 'OpenBSD')
  t.equal(
    sockaddrBytes(v4, linuxSockaddr, 'BE').toString('hex'),
    hex('0002 1518 7f000001 0000000000000000'),
    'a big-endian CPU writes the family high byte first',
  )
  t.equal(
    sockaddrBytes({ address: '10.20.30.40', family: 4, port: 65535, scopeId: 0 }, linuxSockaddr, 'LE').toString('hex'),
    hex('0200 ffff 0a141e28 0000000000000000'),
  )
})

t.test('sockaddr_in6: 28 bytes, family, port, flowinfo, 16 address bytes, scope id in host order', async (t) => {
  t.equal(sockaddrBytes(v6, linuxSockaddr, 'LE').toString('hex'), hex(`0a00 ${v6Tail} 04000000`), 'Linux: AF_INET6 10')
  t.equal(sockaddrBytes(v6, windowsSockaddr, 'LE').toString('hex'), hex(`1700 ${v6Tail} 04000000`), 'Windows: AF_INET6 23')
  t.equal(sockaddrBytes(v6, macosSockaddr, 'LE').toString('hex'), hex(`1c 1e ${v6Tail} 04000000`), 'macOS: sin6_len 28, AF_INET6 30')
  t.equal(sockaddrBytes(v6, freebsdSockaddr, 'LE').toString('hex'), hex(`1c 1c ${v6Tail} 04000000`), 'FreeBSD: AF_INET6 28')
  t.equal(sockaddrBytes(v6, openbsdSockaddr, 'LE').toString('hex'), hex(`1c 18 ${v6Tail} 04000000`), 'OpenBSD: AF_INET6 24')
  t.equal(sockaddrBytes(v6, linuxSockaddr, 'BE').toString('hex'), hex(`000a ${v6Tail} 00000004`), 'big-endian CPU')
  const wide = { ...v6, scopeId: 0x01020304 }
  t.equal(sockaddrBytes(wide, linuxSockaddr, 'LE').subarray(24).toString('hex'), '04030201', 'scope id little-endian')
  t.equal(
    sockaddrBytes({ ...wide, scopeId: 0xffffffff }, linuxSockaddr, 'LE')
      .subarray(24)
      .toString('hex'),
    'ffffffff',
  )
  const mapped = sockaddrBytes({ address: '::ffff:127.0.0.1', family: 6, port: 1, scopeId: 0 }, linuxSockaddr, 'LE')
  t.equal(
    mapped.toString('hex'),
    hex('0a00 0001 00000000 00000000000000000000ffff7f000001 00000000'),
    'a mapped address as family 6 keeps its ::ffff: prefix',
  )
})

t.test('layouts by platform and the numbers from the headers', async (t) => {
  t.same(Object.keys(sockaddrLayouts).sort(), ['darwin', 'freebsd', 'linux', 'openbsd', 'win32'])
  t.same(
    Object.values(sockaddrLayouts).map((l) => [l.name, l.lengthByte, l.afInet, l.afInet6]),
    [
      ['Linux', false, 2, 10],
      ['macOS', true, 2, 30],
      ['FreeBSD', true, 2, 28],
      ['OpenBSD', true, 2, 24],
      ['Windows', false, 2, 23],
    ],
  )
  t.equal(sockaddrLayoutFor('linux'), linuxSockaddr)
  t.throws(() => sockaddrLayoutFor('aix'), /no sockaddr layout for platform aix/)
})

t.test('bad input to sockaddrBytes throws instead of writing bytes', async (t) => {
  const bad: [SocketAddress, RegExp][] = [
    [{ ...v4, port: 65536 }, /port 65536/],
    [{ ...v4, port: -1 }, /port -1/],
    [{ ...v4, port: Number.NaN }, /port NaN/],
    [{ ...v4, port: 1.5 }, /port 1.5/],
    [{ ...v4, scopeId: 3 }, /IPv4 address 127\.0\.0\.1 has no scope/],
    [{ ...v6, scopeId: -1 }, /scope id -1/],
    [{ ...v6, scopeId: 2 ** 32 }, /scope id 4294967296/],
    [{ ...v6, address: 'fe80::1%eth0' }, /not an IPv6 address/],
    [{ ...v6, address: '127.0.0.1' }, /not an IPv6 address/],
    [{ ...v4, address: '::1' }, /not an IPv4 address/],
    [{ ...v4, family: 5 as 4 }, /address family 5/],
  ]
  for (const [address, message] of bad) t.throws(() => sockaddrBytes(address, linuxSockaddr), message, JSON.stringify(address))
})

t.test('IPv6 text forms (RFC 4291 section 2.2) give the right 16 bytes', async (t) => {
  const cases: [string, string][] = [
    ['::', '00000000000000000000000000000000'],
    ['::1', '00000000000000000000000000000001'],
    ['1::', '00010000000000000000000000000000'],
    ['1:2:3:4:5:6:7:8', '00010002000300040005000600070008'],
    ['1:0:0:0:0:0:0:8', '00010000000000000000000000000008'],
    ['1::8', '00010000000000000000000000000008'],
    ['1:2:3:4:5:6:7::', '00010002000300040005000600070000'],
    ['::2:3:4:5:6:7:8', '00000002000300040005000600070008'],
    ['2001:DB8::a:Bc', '20010db80000000000000000000a00bc'],
    ['fe80::fc:ff:fe00:1', 'fe8000000000000000fc00fffe000001'],
    ['::ffff:127.0.0.1', '00000000000000000000ffff7f000001'],
    ['::ffff:7f00:1', '00000000000000000000ffff7f000001'],
    ['::1.2.3.4', '00000000000000000000000001020304'],
    ['64:ff9b::192.0.2.1', '0064ff9b0000000000000000c0000201'],
    ['1:2:3:4:5:6:1.2.3.4', '00010002000300040005000601020304'],
    ['ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'ff'.repeat(16)],
  ]
  for (const [text, bytes] of cases) t.equal(ipv6Bytes(text).toString('hex'), bytes, text)
})

t.test('random addresses round-trip through the full and the WHATWG URL compressed forms', async (t) => {
  let seed = 0x2545f491
  const next = (): number => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) >>> 16) & 0xffff
  for (let i = 0; i < 500; i++) {
    // Runs of zero groups are frequent so that "::" appears at every position.
    const groups = Array.from({ length: 8 }, () => (next() % 3 === 0 ? 0 : next()))
    const bytes = Buffer.alloc(16)
    groups.forEach((g, j) => {
      bytes.writeUInt16BE(g, j * 2)
    })
    const full = groups.map((g) => g.toString(16)).join(':')
    const compressed = new URL(`http://[${full}]/`).hostname.slice(1, -1)
    if (!ipv6Bytes(full).equals(bytes) || !ipv6Bytes(compressed).equals(bytes)) {
      t.fail(`${full} / ${compressed}: got ${ipv6Bytes(compressed).toString('hex')}, wanted ${bytes.toString('hex')}`)
      return
    }
  }
  t.pass('500 addresses')
})

t.test('garbage is refused with an error, never parsed into bytes', async (t) => {
  const notV6 = [
    '',
    ':',
    ':::',
    '1::2::3',
    '1:2:3:4:5:6:7:8:9',
    '1:2:3:4:5:6:7',
    'g::1',
    '12345::',
    '::1:',
    ':1::',
    '1.2.3.4',
    '::ffff:01.2.3.4',
    '::ffff:1.2.3',
    '::ffff:256.0.0.1',
    '1.2.3.4::',
    '::1.2.3.4:1',
    '1:2:3:4:5:6:7:1.2.3.4',
    'fe80::1%eth0',
    ' ::1',
    '::1 ',
    'localhost',
    '[::1]',
  ]
  for (const text of notV6) t.throws(() => ipv6Bytes(text), /is not an IPv6 address/, JSON.stringify(text))
  const notV4 = [
    '',
    '1.2.3',
    '1.2.3.4.5',
    '256.0.0.1',
    '01.2.3.4',
    '1.2.3.04',
    '1..2.3',
    '-1.2.3.4',
    '1.2.3.4 ',
    '0x7f.0.0.1',
    '::1',
    'a.b.c.d',
    '1e2.0.0.1',
  ]
  for (const text of notV4) t.throws(() => ipv4Bytes(text), /is not an IPv4 address/, JSON.stringify(text))
  t.equal(ipv4Bytes('0.0.0.0').toString('hex'), '00000000')
  t.equal(ipv4Bytes('255.255.255.255').toString('hex'), 'ffffffff')
})

t.test('zones, mapped and link-local addresses', async (t) => {
  t.same(splitZone('fe80::1%eth0'), { address: 'fe80::1', zone: 'eth0' })
  t.same(splitZone('fe80::1%12'), { address: 'fe80::1', zone: '12' })
  t.same(splitZone('::1'), { address: '::1' })
  t.equal(unmappedIpv4('::ffff:127.0.0.1'), '127.0.0.1')
  t.equal(unmappedIpv4('::FFFF:7f00:1'), '127.0.0.1')
  t.equal(unmappedIpv4('::127.0.0.1'), null, 'IPv4-compatible is not IPv4-mapped')
  t.equal(unmappedIpv4('::1'), null)
  t.equal(unmappedIpv4('64:ff9b::192.0.2.1'), null)
  t.ok(isLinkLocal('fe80::1'))
  t.ok(isLinkLocal('febf::1'))
  t.notOk(isLinkLocal('fec0::1'))
  t.notOk(isLinkLocal('::1'))
  t.notOk(isLinkLocal('fd00::2'))
})

t.test('the host text Node needs for a scoped address: a name on POSIX, the index on Windows', async (t) => {
  const interfaces = {
    lo: [
      {
        address: '::1',
        netmask: 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
        family: 'IPv6' as const,
        mac: '00:00:00:00:00:00',
        internal: true,
        cidr: '::1/128',
        scopeid: 0,
      },
    ],
    eth0: [
      {
        address: 'fe80::fc:ff:fe00:1',
        netmask: 'ffff:ffff:ffff:ffff::',
        family: 'IPv6' as const,
        mac: '02:fc:00:00:00:01',
        internal: false,
        cidr: 'fe80::fc:ff:fe00:1/64',
        scopeid: 4,
      },
    ],
  }
  t.equal(nodeConnectHost({ address: 'fe80::1', family: 6, port: 1, scopeId: 4 }, interfaces, 'linux'), 'fe80::1%eth0')
  t.equal(nodeConnectHost({ address: 'fe80::1', family: 6, port: 1, scopeId: 4 }, interfaces, 'win32'), 'fe80::1%4')
  t.equal(nodeConnectHost({ address: '::1', family: 6, port: 1, scopeId: 0 }, interfaces, 'linux'), '::1')
  t.equal(
    nodeConnectHost({ address: '::1', family: 6, port: 1, scopeId: 9 }, interfaces, 'linux'),
    '::1',
    'an index no interface has: no zone',
  )
  t.equal(nodeConnectHost(v4, interfaces, 'linux'), '127.0.0.1')
})
