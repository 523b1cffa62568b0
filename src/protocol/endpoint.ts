/**
 * --server HOST[:PORT]: parsing, and resolution to the one address both write and verify connect to.
 *
 * Accepted: "db2", "db2:5400", "10.0.0.2:5400", "[::1]:5400", "::1", "[::ffff:127.0.0.1]:5400",
 * "[fe80::1%eth0]:5400" and "[fe80::1%4]:5400" (a link-local address with its interface, by name or
 * index). Host names go to the OS resolver (getaddrinfo, through dns.lookup); the first address it
 * gives is the one used, by the writer's ack socket and by verify alike, so that both talk to the
 * same listener when a name has several addresses. A URL (`http://10.0.0.2:5400`) is refused, naming
 * the HOST[:PORT] in it.
 */
import { lookup } from 'node:dns/promises'
import { isIP, isIPv6 } from 'node:net'
import { networkInterfaces, type NetworkInterfaceInfo } from 'node:os'
import { usageError } from '../base/errors.js'
import type { SocketAddress } from '../native/port.js'
import { isLinkLocal, splitZone, unmappedIpv4 } from '../native/sockaddr.js'
import { defaultPort } from './default-port.js'

export interface Endpoint {
  /** As written, without brackets: a name, an IPv4 address, or an IPv6 address with its %zone if any. */
  readonly host: string
  readonly port: number
}

/** A URL's scheme (http://, tcp://): --server takes no URL, whatever its scheme. */
const urlScheme = /^[a-z][a-z0-9+.-]*:\/\//i

/**
 * The refusal of a URL given as --server, with the HOST[:PORT] inside it when there is one that
 * parses (no user, path, query or fragment): `http://10.77.0.1:5400/` -> `10.77.0.1:5400`.
 */
function urlRefusal(text: string): string {
  const authority = text.replace(urlScheme, '').split(/[/?#]/, 1)[0]!
  const hostPort = authority.slice(authority.lastIndexOf('@') + 1)
  const meant = hostPort !== '' && typeof parseEndpoint(hostPort) !== 'string' ? `: --server ${hostPort}` : ''
  return `--server takes HOST[:PORT], not a URL${meant}`
}

/** Returns an error sentence instead of throwing. */
export function parseEndpoint(text: string): Endpoint | string {
  if (urlScheme.test(text)) return urlRefusal(text)
  const bracketed = /^\[([^\]]*)\](?::([^:]*))?$/.exec(text)
  let host: string
  let portText: string | undefined
  if (bracketed) {
    host = bracketed[1]!
    portText = bracketed[2]
    if (host !== '' && literalFamily(host) !== 6) return `--server ${text}: ${host} in brackets is not an IPv6 address`
  } else if (literalFamily(text) === 6) {
    host = text
  } else if (text.includes('[') || text.includes(']')) {
    return `--server ${text}: write an IPv6 address with a port as [ADDR]:PORT`
  } else {
    const parts = text.split(':')
    if (parts.length > 2) return `--server ${text}: write an IPv6 address with a port as [ADDR]:PORT`
    host = parts[0]!
    portText = parts[1]
  }
  if (host === '') return `--server ${text}: no host name`
  if (/\s/.test(host)) return `--server ${text}: a host name has no spaces`
  const { address, zone } = splitZone(host)
  if (zone !== undefined && literalFamily(host) === 6 && unmappedIpv4(address) !== null)
    return `--server ${text}: an IPv4-mapped address takes no %scope`
  if (portText !== undefined && !/^[0-9]{1,5}$/.test(portText)) return `--server ${text}: port must be 1-65535`
  const port = portText === undefined ? defaultPort : Number(portText)
  if (port < 1 || port > 65535) return `--server ${text}: port must be 1-65535`
  return { host, port }
}

/**
 * 4 or 6 for an address literal, 0 for a name. An IPv6 literal may carry a %zone: an interface name
 * (any characters but whitespace, %, colons, brackets and /, so "br_lan" too, which net.isIP
 * refuses) or index. No colon, so that "fe80::1%eth0:5400" is not taken for an address.
 */
export function literalFamily(host: string): 0 | 4 | 6 {
  const { address, zone } = splitZone(host)
  if (zone === undefined) return isIP(address) as 0 | 4 | 6
  return isIP(address) === 6 && /^[^\s%:[\]/]+$/.test(zone) ? 6 : 0
}

export function formatEndpoint(endpoint: Endpoint): string {
  return literalFamily(endpoint.host) === 6 ? `[${endpoint.host}]:${endpoint.port}` : `${endpoint.host}:${endpoint.port}`
}

/** What resolveEndpoint reads from the machine; tests replace it. */
export interface ResolverEnv {
  lookup(host: string): Promise<{ address: string; family: number }>
  networkInterfaces(): NodeJS.Dict<NetworkInterfaceInfo[]>
}

const systemResolver: ResolverEnv = { lookup: (host) => lookup(host), networkInterfaces }

/**
 * The address to connect to. A name goes to the OS resolver (its errors, ENOTFOUND and the like, are
 * thrown as they come); a %scope that names no interface here is a usage error (exit 2).
 */
export async function resolveEndpoint(endpoint: Endpoint, env: ResolverEnv = systemResolver): Promise<SocketAddress> {
  let text = endpoint.host
  if (literalFamily(text) === 0) {
    text = (await env.lookup(endpoint.host)).address
    if (literalFamily(text) === 0) throw new Error(`the resolver gave ${JSON.stringify(text)} for ${endpoint.host}, not an address`)
  }
  const where = formatEndpoint(endpoint)
  if (literalFamily(text) === 4) return { address: text, family: 4, port: endpoint.port, scopeId: 0 }
  const { address, zone } = splitZone(text)
  // An IPv4-mapped address (::ffff:a.b.c.d) is connected to as the IPv4 address it maps. On the
  // wire it is IPv4 either way (an IPv6 socket sends IPv4 packets for it: RFC 4038 section 4.2,
  // Linux's tcp_v6_connect hands it to tcp_v4_connect), and a dual-stack listener sees the same
  // peer ::ffff:a.b.c.d whichever socket family we use. An IPv6 socket would only add ways to fail:
  // Windows and FreeBSD create IPv6 sockets with IPV6_V6ONLY set (Microsoft Learn "Dual-Stack
  // Sockets for IPv6 and IPv4", FreeBSD ip6(4) net.inet6.ip6.v6only=1), which refuses mapped
  // addresses, and OpenBSD refuses them on IPv6 sockets altogether (OpenBSD ip6(4)).
  const mapped = unmappedIpv4(address)
  if (mapped !== null) return { address: mapped, family: 4, port: endpoint.port, scopeId: 0 }
  return {
    address,
    family: 6,
    port: endpoint.port,
    scopeId: zone === undefined ? 0 : scopeIdOf(where, address, zone, env.networkInterfaces()),
  }
}

/**
 * The interface index for a %zone. Node has no if_nametoindex, but os.networkInterfaces() reports,
 * for each interface's IPv6 addresses, the scope id of its link-local ones: that is the interface
 * index (RFC 4007 section 6: a link-local zone is an interface). A number is taken as the index.
 */
function scopeIdOf(where: string, address: string, zone: string, interfaces: NodeJS.Dict<NetworkInterfaceInfo[]>): number {
  const linkLocal = isLinkLocal(address)
  const indexOf = (name: string): number | undefined =>
    (interfaces[name] ?? []).find((entry) => entry.family === 'IPv6' && entry.scopeid !== undefined && entry.scopeid > 0)?.scopeid
  const known = Object.keys(interfaces)
    .map((name) => (indexOf(name) === undefined ? name : `${name} (${indexOf(name)})`))
    .join(', ')
  const hint = `interfaces here: ${known === '' ? 'none' : known}; a link-local address needs one that has an IPv6 link-local address (its index in parentheses)`
  if (/^[0-9]+$/.test(zone)) {
    const index = Number(zone)
    if (index > 0xffffffff) throw usageError(`--server ${where}: scope ${zone} is not an interface index`, hint)
    // A link-local address is only reachable through an interface with a link-local address; one
    // that no interface here has as its index would fail at connect with a bare EINVAL.
    if (linkLocal && index !== 0 && !Object.keys(interfaces).some((name) => indexOf(name) === index)) {
      throw usageError(`--server ${where}: no network interface with index ${index} has an IPv6 link-local address`, hint)
    }
    return index
  }
  if (interfaces[zone] === undefined) throw usageError(`--server ${where}: no network interface "${zone}"`, hint)
  const index = indexOf(zone)
  if (index !== undefined) return index
  if (linkLocal) throw usageError(`--server ${where}: network interface "${zone}" has no IPv6 link-local address`, hint)
  // The interface exists but Node cannot tell its index (it has no link-local address, like Linux's
  // lo). The kernels ignore the scope of an address that is not link-local (Linux tcp_v6_connect
  // looks at sin6_scope_id only for link-local destinations), so none is sent.
  return 0
}

/** Default bound on connect, every send and every wait for an answer (`--listener-timeout`). */
export const listenerTimeoutMs = 10_000

/** A peer as the listener's quotas count it: IPv4 as it is (also when mapped into IPv6), IPv6 by its /64. */
export function peerKey(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)
  if (mapped !== null) return mapped[1]!
  if (!isIPv6(address)) return address
  return `${expandIPv6(address).slice(0, 4).join(':')}::/64`
}

/** The eight groups of an IPv6 address, without leading zeros (::1 -> 0,0,0,0,0,0,0,1). */
function expandIPv6(address: string): string[] {
  const plain = address.split('%')[0]!
  const [head, tail] = plain.includes('::') ? plain.split('::') : [plain, undefined]
  const left = head === '' ? [] : head!.split(':')
  const right = tail === undefined || tail === '' ? [] : tail.split(':')
  const groups = tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right]
  return groups.map((g) => (g.includes('.') ? g : Number.parseInt(g, 16).toString(16)))
}
