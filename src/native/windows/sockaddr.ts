/**
 * Winsock's connect address, from the shared builder (src/native/sockaddr.ts, Windows layout: ws2def.h
 * SOCKADDR_IN, ws2ipdef.h SOCKADDR_IN6; AF_INET 2, AF_INET6 23).
 *
 * A v4-mapped address (::ffff:a.b.c.d) is connected as IPv4: Windows creates AF_INET6 sockets with
 * IPV6_V6ONLY on (Microsoft Learn "Dual-Stack Sockets for IPv6 Winsock Applications"), so connecting
 * one to a mapped address would fail.
 */
import type { SocketAddress } from '../port.js'
import { sockaddrBytes, splitZone, unmappedIpv4, windowsSockaddr } from '../sockaddr.js'

export const AF_INET = windowsSockaddr.afInet
export const AF_INET6 = windowsSockaddr.afInet6

export interface WinSockaddr {
  readonly family: number
  readonly bytes: Buffer
}

export function winSockaddr(address: SocketAddress): WinSockaddr {
  const bare = { ...address, address: splitZone(address.address).address } // the zone travels as scopeId
  if (bare.family === 6) {
    const v4 = unmappedIpv4(bare.address)
    if (v4 !== null)
      return { family: AF_INET, bytes: sockaddrBytes({ ...bare, address: v4, family: 4, scopeId: 0 }, windowsSockaddr, 'LE') }
  }
  return { family: bare.family === 4 ? AF_INET : AF_INET6, bytes: sockaddrBytes(bare, windowsSockaddr, 'LE') }
}
