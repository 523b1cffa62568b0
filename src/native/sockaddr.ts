/**
 * IP address text to the raw sockaddr_in / sockaddr_in6 bytes that connect() takes, for every
 * platform plugcheck runs on. Pure: no koffi, no system calls; the posix and windows ports pass the
 * result to connect().
 *
 * Fault model: the address text comes from the command line or the resolver, so it is parsed
 * strictly (RFC 4291 section 2.2 for IPv6, four decimal octets without leading zeros for IPv4) and
 * cross-checked against Node's own parser (net.isIP, built on inet_pton); anything else throws
 * rather than writing NaN or zero bytes into a structure the kernel will trust.
 *
 * The two layouts (offsets in bytes):
 *
 *   sockaddr_in (16 bytes)              sockaddr_in6 (28 bytes)
 *     0  family  (u16, host order)        0  family   (u16, host order)
 *        or len (u8) + family (u8)           or len (u8) + family (u8)
 *     2  port    (u16, network order)     2  port     (u16, network order)
 *     4  address (4 bytes)                4  flowinfo (u32, network order; we send 0)
 *     8  zero    (8 bytes)                8  address  (16 bytes)
 *                                        24  scope id (u32, host order)
 *
 * The BSDs (4.4BSD's heritage: macOS, FreeBSD, OpenBSD) start both with a one-byte length
 * (sin_len/sin6_len) and a one-byte family; Linux and Windows start with a two-byte family.
 */
import { isIP } from 'node:net'
import { endianness as hostEndianness } from 'node:os'
import type { SocketAddress } from './port.js'

export interface SockaddrLayout {
  /** "Linux", "macOS", ... for messages. */
  readonly name: string
  /** True where the struct starts with sin_len/sin6_len (u8) and the family is one byte. */
  readonly lengthByte: boolean
  /** AF_INET: the socket() domain and the family field of sockaddr_in. */
  readonly afInet: number
  /** AF_INET6: the socket() domain and the family field of sockaddr_in6. */
  readonly afInet6: number
}

export const sockaddrInBytes = 16
export const sockaddrIn6Bytes = 28

/**
 * Linux: struct sockaddr_in in <netinet/in.h> (glibc; the kernel's is <linux/in.h>) and struct
 * sockaddr_in6 in <netinet/in.h> (<linux/in6.h>), both starting with `sa_family_t` (unsigned short);
 * AF_INET 2 and AF_INET6 10 from <bits/socket.h> (<linux/socket.h>: PF_INET6 10).
 */
export const linuxSockaddr: SockaddrLayout = { name: 'Linux', lengthByte: false, afInet: 2, afInet6: 10 }

/**
 * macOS: struct sockaddr_in in <netinet/in.h> and struct sockaddr_in6 in <netinet6/in6.h> start with
 * `__uint8_t sin_len; sa_family_t sin_family;` (sa_family_t is __uint8_t, <sys/_types/_sa_family_t.h>);
 * AF_INET 2, AF_INET6 30 in <sys/socket.h>.
 */
export const macosSockaddr: SockaddrLayout = { name: 'macOS', lengthByte: true, afInet: 2, afInet6: 30 }

/**
 * FreeBSD: <netinet/in.h> and <netinet6/in6.h>, `uint8_t sin_len; sa_family_t sin_family;`
 * (sa_family_t is __uint8_t, <sys/_types.h>); AF_INET 2, AF_INET6 28 in <sys/socket.h>.
 */
export const freebsdSockaddr: SockaddrLayout = { name: 'FreeBSD', lengthByte: true, afInet: 2, afInet6: 28 }

/**
 * OpenBSD: <netinet/in.h> and <netinet6/in6.h>, `u_int8_t sin_len; sa_family_t sin_family;`
 * (sa_family_t is __uint8_t, <sys/_types.h>); AF_INET 2, AF_INET6 24 in <sys/socket.h>.
 */
export const openbsdSockaddr: SockaddrLayout = { name: 'OpenBSD', lengthByte: true, afInet: 2, afInet6: 24 }

/**
 * Windows: SOCKADDR_IN in <ws2def.h> and SOCKADDR_IN6 in <ws2ipdef.h> start with
 * `ADDRESS_FAMILY sin_family` (USHORT); sin6_scope_id is a ULONG in a union with SCOPE_ID.
 * AF_INET 2, AF_INET6 23 in <ws2def.h> (Microsoft Learn: "sockaddr_in6 structure (ws2ipdef.h)",
 * "SOCKADDR_IN structure (ws2def.h)").
 */
export const windowsSockaddr: SockaddrLayout = { name: 'Windows', lengthByte: false, afInet: 2, afInet6: 23 }

/** Layouts by process.platform. */
export const sockaddrLayouts: Readonly<Record<'linux' | 'darwin' | 'freebsd' | 'openbsd' | 'win32', SockaddrLayout>> = {
  linux: linuxSockaddr,
  darwin: macosSockaddr,
  freebsd: freebsdSockaddr,
  openbsd: openbsdSockaddr,
  win32: windowsSockaddr,
}

/** This platform's layout; throws on a platform plugcheck has no layout for. */
export function sockaddrLayoutFor(platform: string = process.platform): SockaddrLayout {
  const layout = (sockaddrLayouts as Readonly<Record<string, SockaddrLayout | undefined>>)[platform]
  if (layout === undefined) throw new Error(`no sockaddr layout for platform ${platform}`)
  return layout
}

/**
 * The raw sockaddr_in (family 4) or sockaddr_in6 (family 6) for address in layout. address.address
 * is the bare address (no %zone: the scope travels in scopeId). Throws on anything malformed.
 * `endianness` is the CPU's byte order (the family and scope id are in host order); tests pass it.
 */
export function sockaddrBytes(address: SocketAddress, layout: SockaddrLayout, endianness: 'LE' | 'BE' = hostEndianness()): Buffer {
  const { port, scopeId } = address
  if (!Number.isInteger(port) || port < 0 || port > 0xffff) throw new RangeError(`port ${port} is not 0-65535`)
  if (!Number.isInteger(scopeId) || scopeId < 0 || scopeId > 0xffffffff) throw new RangeError(`scope id ${scopeId} is not 0-4294967295`)
  if (address.family === 4) {
    if (scopeId !== 0) throw new RangeError(`IPv4 address ${address.address} has no scope (got scope id ${scopeId})`)
    const bytes = Buffer.alloc(sockaddrInBytes)
    writeFamily(bytes, layout, layout.afInet, sockaddrInBytes, endianness)
    bytes.writeUInt16BE(port, 2)
    ipv4Bytes(address.address).copy(bytes, 4)
    return bytes
  }
  if (address.family === 6) {
    const bytes = Buffer.alloc(sockaddrIn6Bytes)
    writeFamily(bytes, layout, layout.afInet6, sockaddrIn6Bytes, endianness)
    bytes.writeUInt16BE(port, 2)
    // sin6_flowinfo (offset 4) stays 0: no flow label.
    ipv6Bytes(address.address).copy(bytes, 8)
    if (endianness === 'LE') bytes.writeUInt32LE(scopeId, 24)
    else bytes.writeUInt32BE(scopeId, 24)
    return bytes
  }
  throw new RangeError(`address family ${String((address as { family: unknown }).family)} is not 4 or 6`)
}

function writeFamily(bytes: Buffer, layout: SockaddrLayout, family: number, structBytes: number, endianness: 'LE' | 'BE'): void {
  if (layout.lengthByte) {
    bytes.writeUInt8(structBytes, 0)
    bytes.writeUInt8(family, 1)
  } else if (endianness === 'LE') {
    bytes.writeUInt16LE(family, 0)
  } else {
    bytes.writeUInt16BE(family, 0)
  }
}

const decimalOctet = /^(?:0|[1-9][0-9]{0,2})$/
const hexGroup = /^[0-9a-fA-F]{1,4}$/

/** Dotted-quad IPv4 text to its 4 bytes; no leading zeros (which some parsers read as octal). */
export function ipv4Bytes(text: string): Buffer {
  const parts = text.split('.')
  const octets = parts.map((part) => (decimalOctet.test(part) ? Number(part) : NaN))
  if (parts.length !== 4 || octets.some((o) => !(o >= 0 && o <= 255)) || isIP(text) !== 4)
    throw new Error(`${JSON.stringify(text)} is not an IPv4 address`)
  return Buffer.from(octets)
}

/**
 * RFC 4291 section 2.2 text to the address's 16 bytes: eight groups of 1-4 hex digits, at most one
 * "::" standing for one or more zero groups, and an optional dotted IPv4 tail standing for the last
 * two groups ("::ffff:127.0.0.1", "64:ff9b::192.0.2.1"). No %zone: split it off first (splitZone).
 */
export function ipv6Bytes(text: string): Buffer {
  const refuse = (): never => {
    throw new Error(`${JSON.stringify(text)} is not an IPv6 address`)
  }
  if (isIP(text) !== 6 || text.includes('%')) refuse()
  const halves = text.split('::')
  if (halves.length > 2) refuse()
  const groupsOf = (part: string, last: boolean): number[] => {
    if (part === '') return []
    const fields = part.split(':')
    const groups: number[] = []
    fields.forEach((field, i) => {
      if (last && i === fields.length - 1 && field.includes('.')) {
        const v4 = ipv4Bytes(field)
        groups.push(v4.readUInt16BE(0), v4.readUInt16BE(2))
      } else if (hexGroup.test(field)) {
        groups.push(parseInt(field, 16))
      } else {
        refuse()
      }
    })
    return groups
  }
  const compressed = halves.length === 2
  const head = groupsOf(halves[0]!, !compressed)
  const tail = compressed ? groupsOf(halves[1]!, true) : []
  const zeros = 8 - head.length - tail.length
  if (compressed ? zeros < 1 : zeros !== 0) refuse()
  const groups = [...head, ...Array<number>(zeros).fill(0), ...tail]
  const bytes = Buffer.alloc(16)
  groups.forEach((group, i) => {
    bytes.writeUInt16BE(group, i * 2)
  })
  return bytes
}

/** "fe80::1%eth0" -> { address: "fe80::1", zone: "eth0" }; an address without % has no zone. */
export function splitZone(text: string): { address: string; zone?: string } {
  const at = text.indexOf('%')
  return at < 0 ? { address: text } : { address: text.slice(0, at), zone: text.slice(at + 1) }
}

/** ::ffff:a.b.c.d (RFC 4291 section 2.5.5.2): the IPv4 address it maps, or null. */
export function unmappedIpv4(address: string): string | null {
  const bytes = ipv6Bytes(address)
  if (!bytes.subarray(0, 10).equals(Buffer.alloc(10)) || bytes.readUInt16BE(10) !== 0xffff) return null
  return [...bytes.subarray(12)].join('.')
}

/** fe80::/10 (RFC 4291 section 2.5.6): an address that means nothing without its interface. */
export function isLinkLocal(address: string): boolean {
  const bytes = ipv6Bytes(address)
  return bytes[0] === 0xfe && (bytes[1]! & 0xc0) === 0x80
}

/**
 * The host text Node's net.connect needs to reach address with its scope. Node hands a literal to
 * libuv's uv_ip6_addr, which reads the text after % with if_nametoindex() on POSIX (so a number there
 * silently becomes scope 0) and with atoi() on Windows (libuv src/uv-common.c). So on POSIX the scope
 * is written as the interface's name, found by index among os.networkInterfaces().
 */
export function nodeConnectHost(
  address: SocketAddress,
  interfaces: NodeJS.Dict<import('node:os').NetworkInterfaceInfo[]>,
  platform: string = process.platform,
): string {
  if (address.family === 4 || address.scopeId === 0) return address.address
  if (platform === 'win32') return `${address.address}%${address.scopeId}`
  for (const [name, entries] of Object.entries(interfaces)) {
    if ((entries ?? []).some((entry) => entry.family === 'IPv6' && entry.scopeid === address.scopeId)) return `${address.address}%${name}`
  }
  return address.address
}
