/**
 * The listener's default TCP port: a port number, and the one the README tells users (TCP port 5400)
 * and the one the help prints.
 */
import { readFileSync } from 'node:fs'
import t from 'tap'
import { defaultPort } from '../../../src/protocol/default-port.js'

t.test('a TCP port a user may bind without root', async (t) => {
  t.ok(Number.isInteger(defaultPort))
  t.ok(defaultPort >= 1024 && defaultPort <= 65_535, `${defaultPort}`)
})

t.test('the port the README documents', async (t) => {
  const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8')
  const documented = /TCP port (\d+)/.exec(readme)?.[1]
  t.equal(documented, '5400')
  t.equal(defaultPort, Number(documented))
})
