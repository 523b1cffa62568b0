/** HOST[:PORT] parsing and name resolution for --server. */
import { lookup } from 'node:dns/promises'
import { isIP } from 'node:net'
import { defaultPort } from '../protocol/messages.js'

export interface Endpoint {
  readonly host: string
  readonly port: number
}

/** "db2", "db2:5400", "10.0.0.2:5400", "[::1]:5400", "::1". Returns an error sentence instead of throwing. */
export function parseEndpoint(text: string): Endpoint | string {
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(text)
  let host: string
  let portText: string | undefined
  if (bracketed) {
    host = bracketed[1]!
    portText = bracketed[2]
  } else if (isIP(text) === 6) {
    host = text
  } else {
    const parts = text.split(':')
    if (parts.length > 2) return `--server ${text}: write an IPv6 address with a port as [ADDR]:PORT`
    host = parts[0]!
    portText = parts[1]
  }
  if (host === '') return `--server ${text}: no host name`
  const port = portText === undefined ? defaultPort : Number(portText)
  if (!Number.isInteger(port) || port < 1 || port > 65535) return `--server ${text}: port must be 1-65535`
  return { host, port }
}

export function formatEndpoint(endpoint: Endpoint): string {
  return isIP(endpoint.host) === 6 ? `[${endpoint.host}]:${endpoint.port}` : `${endpoint.host}:${endpoint.port}`
}

export async function resolveEndpoint(endpoint: Endpoint): Promise<{ address: string; family: 4 | 6 }> {
  const found = await lookup(endpoint.host)
  return { address: found.address, family: found.family === 6 ? 6 : 4 }
}
