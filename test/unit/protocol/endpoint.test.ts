/**
 * --server parsing and resolution: every accepted form round-trips through formatEndpoint, bad ones
 * are refused with a sentence, and resolution gives the address write and verify both connect to
 * (mapped as IPv4, a scope by interface name or index, an unknown interface a usage error).
 */
import t from 'tap'
import type { NetworkInterfaceInfo } from 'node:os'
import {
  formatEndpoint,
  literalFamily,
  parseEndpoint,
  resolveEndpoint,
  type Endpoint,
  type ResolverEnv,
} from '../../../src/protocol/endpoint.js'
import { PlugcheckError } from '../../../src/base/errors.js'
import { defaultPort } from '../../../src/protocol/messages.js'

t.test('accepted forms parse and format back', async (t) => {
  const cases: [string, Endpoint, string][] = [
    ['db2', { host: 'db2', port: defaultPort }, `db2:${defaultPort}`],
    ['db2:5400', { host: 'db2', port: 5400 }, 'db2:5400'],
    ['10.0.0.2:5400', { host: '10.0.0.2', port: 5400 }, '10.0.0.2:5400'],
    ['[::1]:5400', { host: '::1', port: 5400 }, '[::1]:5400'],
    ['[::1]', { host: '::1', port: defaultPort }, `[::1]:${defaultPort}`],
    ['::1', { host: '::1', port: defaultPort }, `[::1]:${defaultPort}`],
    ['[::ffff:127.0.0.1]:5400', { host: '::ffff:127.0.0.1', port: 5400 }, '[::ffff:127.0.0.1]:5400'],
    ['[fe80::1%eth0]:5400', { host: 'fe80::1%eth0', port: 5400 }, '[fe80::1%eth0]:5400'],
    ['[fe80::1%4]:5400', { host: 'fe80::1%4', port: 5400 }, '[fe80::1%4]:5400'],
    ['[fe80::1%br_lan]:1', { host: 'fe80::1%br_lan', port: 1 }, '[fe80::1%br_lan]:1'],
    ['fe80::1%eth0', { host: 'fe80::1%eth0', port: defaultPort }, `[fe80::1%eth0]:${defaultPort}`],
    ['localhost:65535', { host: 'localhost', port: 65535 }, 'localhost:65535'],
  ]
  for (const [text, endpoint, formatted] of cases) {
    t.same(parseEndpoint(text), endpoint, text)
    t.equal(formatEndpoint(endpoint), formatted, `${text} formats`)
    t.same(parseEndpoint(formatted), endpoint, `${formatted} parses back`)
  }
})

t.test('a URL is refused, naming the HOST[:PORT] inside it when there is one', async (t) => {
  const cases: [string, string][] = [
    ['http://10.77.0.1:5400', '--server takes HOST[:PORT], not a URL: --server 10.77.0.1:5400'],
    ['http://10.77.0.1:5400/', '--server takes HOST[:PORT], not a URL: --server 10.77.0.1:5400'],
    ['HTTPS://db2', '--server takes HOST[:PORT], not a URL: --server db2'],
    ['tcp://user:pw@db2:5400/path?q=1#f', '--server takes HOST[:PORT], not a URL: --server db2:5400'],
    ['tcp://[::1]:5400', '--server takes HOST[:PORT], not a URL: --server [::1]:5400'],
    ['http://', '--server takes HOST[:PORT], not a URL'],
    ['http://db2:99999', '--server takes HOST[:PORT], not a URL'],
  ]
  for (const [text, message] of cases) t.equal(parseEndpoint(text), message, text)
})

t.test('bad forms are refused with a sentence naming the input', async (t) => {
  const cases: [string, RegExp][] = [
    ['', /no host name/],
    [':5400', /no host name/],
    ['[]:5400', /no host name/],
    ['db2:', /port must be 1-65535/],
    ['db2:0', /port must be 1-65535/],
    ['db2:65536', /port must be 1-65535/],
    ['db2:54x', /port must be 1-65535/],
    ['db2:+54', /port must be 1-65535/],
    ['db2:5400000', /port must be 1-65535/],
    ['[::1]:', /port must be 1-65535/],
    ['[::1]:99999', /port must be 1-65535/],
    ['::1:5400:x', /write an IPv6 address with a port as \[ADDR\]:PORT/],
    ['fe80::1%eth0:5400', /write an IPv6 address with a port as \[ADDR\]:PORT/],
    ['[::1', /write an IPv6 address with a port as \[ADDR\]:PORT/],
    ['::1]:5400', /write an IPv6 address with a port as \[ADDR\]:PORT/],
    ['[::1]x', /write an IPv6 address with a port as \[ADDR\]:PORT/],
    ['[10.0.0.2]:5400', /10\.0\.0\.2 in brackets is not an IPv6 address/],
    ['[db2]:5400', /db2 in brackets is not an IPv6 address/],
    ['[1::2::3]:5400', /in brackets is not an IPv6 address/],
    ['[fe80::1%]:5400', /in brackets is not an IPv6 address/],
    ['[fe80::1%a b]:5400', /in brackets is not an IPv6 address/],
    ['[fe80::1%a%b]:5400', /in brackets is not an IPv6 address/],
    ['[::ffff:127.0.0.1%eth0]:5400', /an IPv4-mapped address takes no %scope/],
    ['db 2:5400', /a host name has no spaces/],
  ]
  for (const [text, message] of cases) {
    const parsed = parseEndpoint(text)
    t.type(parsed, 'string', JSON.stringify(text))
    t.match(parsed, message, JSON.stringify(text))
    t.match(parsed, `--server ${text}:`, 'names the input')
  }
})

t.test('literalFamily tells literals from names', async (t) => {
  t.equal(literalFamily('127.0.0.1'), 4)
  t.equal(literalFamily('::1'), 6)
  t.equal(literalFamily('fe80::1%eth0'), 6)
  t.equal(literalFamily('127.0.0.1%eth0'), 0)
  t.equal(literalFamily('db2'), 0)
})

// Interfaces as Node reports them on a Linux machine with one Ethernet link (index 4) and lo.
const entry = (address: string, scopeid: number): NetworkInterfaceInfo => ({
  address,
  netmask: 'ffff:ffff:ffff:ffff::',
  family: 'IPv6',
  mac: '00:00:00:00:00:00',
  internal: false,
  cidr: `${address}/64`,
  scopeid,
})
const v4entry: NetworkInterfaceInfo = {
  address: '127.0.0.1',
  netmask: '255.0.0.0',
  family: 'IPv4',
  mac: '00:00:00:00:00:00',
  internal: true,
  cidr: '127.0.0.1/8',
}
const interfaces = { lo: [v4entry, entry('::1', 0)], eth0: [entry('fd00::2', 0), entry('fe80::fc:ff:fe00:1', 4)], tun0: [v4entry] }
const lookups: string[] = []
const env = (answer: { address: string; family: number } = { address: '192.0.2.7', family: 4 }): ResolverEnv => ({
  lookup: async (host) => {
    lookups.push(host)
    return answer
  },
  networkInterfaces: () => interfaces,
})
const resolve = (text: string, answer?: { address: string; family: number }) => {
  const endpoint = parseEndpoint(text)
  if (typeof endpoint === 'string') throw new Error(endpoint)
  return resolveEndpoint(endpoint, env(answer))
}

t.test('literals resolve without the resolver; a mapped address connects as IPv4', async (t) => {
  lookups.length = 0
  t.same(await resolve('127.0.0.1:5400'), { address: '127.0.0.1', family: 4, port: 5400, scopeId: 0 })
  t.same(await resolve('[::1]:5400'), { address: '::1', family: 6, port: 5400, scopeId: 0 })
  t.same(await resolve('[::ffff:127.0.0.1]:5400'), { address: '127.0.0.1', family: 4, port: 5400, scopeId: 0 })
  t.same(await resolve('[::FFFF:7f00:1]:5400'), { address: '127.0.0.1', family: 4, port: 5400, scopeId: 0 })
  t.same(await resolve('[::127.0.0.1]:5400'), { address: '::127.0.0.1', family: 6, port: 5400, scopeId: 0 }, 'IPv4-compatible stays IPv6')
  t.same(lookups, [], 'no literal went to the resolver')
})

t.test('a scope by name is the interface index; by number, the number', async (t) => {
  t.same(await resolve('[fe80::1%eth0]:5400'), { address: 'fe80::1', family: 6, port: 5400, scopeId: 4 })
  t.same(await resolve('[fe80::1%4]:5400'), { address: 'fe80::1', family: 6, port: 5400, scopeId: 4 })
  t.same(await resolve('[fd00::9%eth0]:5400'), { address: 'fd00::9', family: 6, port: 5400, scopeId: 4 })
  t.same(
    await resolve('[::1%1]:5400'),
    { address: '::1', family: 6, port: 5400, scopeId: 1 },
    'a number on an address that needs no scope is passed on',
  )
  t.same(
    await resolve('[::1%lo]:5400'),
    { address: '::1', family: 6, port: 5400, scopeId: 0 },
    'lo has no link-local address, so Node cannot tell its index; ::1 needs none',
  )
})

t.test('a scope naming no usable interface is a usage error (exit 2) naming it', async (t) => {
  const refused = async (text: string, message: RegExp): Promise<void> => {
    const error = await resolve(text).then(
      () => null,
      (e: unknown) => e,
    )
    t.type(error, PlugcheckError, text)
    t.equal((error as PlugcheckError).exitCode, 2, text)
    t.match((error as PlugcheckError).message, message, text)
    t.match((error as PlugcheckError).hint, /interfaces here: lo, eth0 \(4\), tun0/, text)
  }
  await refused('[fe80::1%nosuch]:5400', /^--server \[fe80::1%nosuch\]:5400: no network interface "nosuch"$/)
  await refused('[::1%nosuch]:5400', /no network interface "nosuch"/)
  await refused('[fe80::1%lo]:5400', /network interface "lo" has no IPv6 link-local address/)
  await refused('[fe80::1%tun0]:5400', /network interface "tun0" has no IPv6 link-local address/)
  await refused('[fe80::1%7]:5400', /no network interface with index 7 has an IPv6 link-local address/)
  await refused('[fe80::1%4294967296]:5400', /scope 4294967296 is not an interface index/)
})

t.test('names go to the OS resolver; what it gives is taken like a literal', async (t) => {
  lookups.length = 0
  t.same(await resolve('db2:5400'), { address: '192.0.2.7', family: 4, port: 5400, scopeId: 0 })
  t.same(await resolve('db2:5400', { address: '2001:db8::7', family: 6 }), { address: '2001:db8::7', family: 6, port: 5400, scopeId: 0 })
  t.same(await resolve('db2:5400', { address: '::ffff:192.0.2.7', family: 6 }), { address: '192.0.2.7', family: 4, port: 5400, scopeId: 0 })
  t.same(await resolve('db2:5400', { address: 'fe80::7%eth0', family: 6 }), { address: 'fe80::7', family: 6, port: 5400, scopeId: 4 })
  t.same(lookups, ['db2', 'db2', 'db2', 'db2'])
  await t.rejects(resolve('db2:5400', { address: 'garbage', family: 4 }), /the resolver gave "garbage" for db2, not an address/)
})

t.test('the real resolver: localhost is a loopback address, an unknown name fails with its code', async (t) => {
  const local = await resolveEndpoint({ host: 'localhost', port: 5400 })
  t.ok(['127.0.0.1', '::1'].includes(local.address), `localhost resolved to ${local.address}`)
  t.equal(local.port, 5400)
  await t.rejects(resolveEndpoint({ host: 'no-such-host.invalid', port: 5400 }), { code: /^(ENOTFOUND|EAI_AGAIN)$/ })
})
