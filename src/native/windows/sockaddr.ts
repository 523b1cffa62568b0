/**
 * sockaddr_in / sockaddr_in6 bytes for Winsock's connect (pure, unit-tested on Linux). Private to the
 * Windows port until a shared builder exists.
 *
 * Layouts (ws2def.h SOCKADDR_IN, ws2ipdef.h SOCKADDR_IN6; Microsoft Learn "SOCKADDR_IN6" and
 * "sockaddr_in"): sin_family u16 (host order) at 0, sin_port u16 (network order) at 2; IPv4: in_addr at
 * 4, 8 zero bytes, 16 in all; IPv6: sin6_flowinfo u32 at 4, in6_addr at 8, sin6_scope_id u32 at 24,
 * 28 in all.
 *
 * A v4-mapped address (::ffff:a.b.c.d) is connected as IPv4: Windows creates AF_INET6 sockets with
 * IPV6_V6ONLY on (Microsoft Learn "Dual-Stack Sockets for IPv6 Winsock Applications"), so connecting
 * one to a mapped address would fail.
 */
import { isIPv4, isIPv6 } from 'node:net'
import type { SocketAddress } from '../port.js'

/** ws2def.h */
export const AF_INET = 2
/** ws2def.h (23 on Windows, unlike Linux's 10) */
export const AF_INET6 = 23

export interface WinSockaddr {
  readonly family: typeof AF_INET | typeof AF_INET6
  readonly bytes: Buffer
}

export function winSockaddr(address: SocketAddress): WinSockaddr {
  const text = address.address.replace(/%.*$/u, '') // the zone travels as scopeId
  if (!Number.isInteger(address.port) || address.port < 0 || address.port > 65535) {
    throw new Error(`port out of range: ${address.port}`)
  }
  if (address.family === 4 || isIPv4(text)) {
    if (!isIPv4(text)) throw new Error(`not an IPv4 address: ${address.address}`)
    return { family: AF_INET, bytes: inet4(text, address.port) }
  }
  if (!isIPv6(text)) throw new Error(`not an IPv6 address: ${address.address}`)
  const in6 = parseIPv6(text)
  const mapped = in6.subarray(0, 10).every((b) => b === 0) && in6[10] === 0xff && in6[11] === 0xff
  if (mapped) return { family: AF_INET, bytes: inet4(Array.from(in6.subarray(12)).join('.'), address.port) }
  const bytes = Buffer.alloc(28)
  bytes.writeUInt16LE(AF_INET6, 0)
  bytes.writeUInt16BE(address.port, 2)
  bytes.writeUInt32LE(0, 4) // sin6_flowinfo
  in6.copy(bytes, 8)
  bytes.writeUInt32LE(address.scopeId >>> 0, 24)
  return { family: AF_INET6, bytes }
}

function inet4(text: string, port: number): Buffer {
  const bytes = Buffer.alloc(16)
  bytes.writeUInt16LE(AF_INET, 0)
  bytes.writeUInt16BE(port, 2)
  text.split('.').forEach((part, i) => bytes.writeUInt8(Number(part), 4 + i))
  return bytes
}

/** 16 bytes of a textual IPv6 address (already checked by isIPv6), with an embedded IPv4 tail. */
function parseIPv6(text: string): Buffer {
  let groups: string[]
  const v4tail = /(\d+\.\d+\.\d+\.\d+)$/u.exec(text)
  let body = text
  if (v4tail !== null) {
    const q = v4tail[1].split('.').map(Number)
    body = text.slice(0, -v4tail[1].length) + `${((q[0] << 8) | q[1]).toString(16)}:${((q[2] << 8) | q[3]).toString(16)}`
  }
  const halves = body.split('::')
  if (halves.length === 2) {
    const head = halves[0] === '' ? [] : halves[0].split(':')
    const tail = halves[1] === '' ? [] : halves[1].split(':')
    groups = [...head, ...Array<string>(8 - head.length - tail.length).fill('0'), ...tail]
  } else {
    groups = body.split(':')
  }
  const out = Buffer.alloc(16)
  groups.forEach((g, i) => out.writeUInt16BE(parseInt(g, 16), i * 2))
  return out
}
