/**
 * Every spelling of the listener's address works for write and verify alike: a real `plugcheck
 * listen --host ::` (dual-stack: IPv4 peers arrive as ::ffff:a.b.c.d), reached as
 * [::ffff:127.0.0.1], [::1], [::1%lo], [::1%<index>], 127.0.0.1 and localhost; each write must
 * succeed and verify must pass (exit 0) with every acknowledged record intact. A scope naming no
 * interface is a usage error (exit 2) for both. All traffic stays on this machine: loopback, and
 * this machine's own link-local address (on an interface the test makes where none has one), which
 * the kernel delivers locally.
 */
import { shellQuote } from '../../src/client/write/writer.js'
import t, { type Test } from 'tap'
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { networkInterfaces } from 'node:os'
import { join } from 'node:path'
import { exitedWithOutput, runCli, runInProcess, spawnCli, tempDir } from '../fixtures/cli.js'

/** `plugcheck listen --host :: --port 0`; resolves with its port once it prints "listening on [::]:PORT". */
async function startDualStackListener(t: Test, dir: string): Promise<number> {
  const child = spawnCli(['listen', '--host', '::', '--port', '0', '--dir', dir])
  // Once its last stderr lines are read: a refusal to start is reported with them.
  const exited = exitedWithOutput(child)
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    await exited
  })
  let stdout = ''
  let stderr = ''
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
  return new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`listener did not start within 60 s: ${stderr}`)), 60_000)
    child.stdout!.on('data', (c: Buffer) => {
      stdout += c.toString()
      const match = /listening on \[::\]:(\d+)/.exec(stdout)
      if (match) {
        clearTimeout(timer)
        resolve(Number(match[1]))
      }
    })
    child.once('exit', () => clearTimeout(timer))
    void exited.then(({ code }) => reject(new Error(`listener exited (${code}) before listening; no IPv6 here? ${stderr}`)))
  })
}

/** One write through server, then verify through the same spelling: both exit 0, nothing lost. */
async function writeThenVerify(t: Test, server: string, file: string): Promise<void> {
  const written = await runCli(['write', '--server', server, '--file', file, '--duration', '0.2', '--size', '8MiB'], 60_000)
  t.equal(written.code, 0, `write --server ${server}: ${written.stderr}`)
  t.match(written.stdout, /records synced and acknowledged/, server)
  t.match(
    written.stdout,
    `plugcheck verify --server ${shellQuote(server, 'posix')} `,
    'the verify command printed uses the same spelling, quoted for the shell',
  )
  const verified = await runInProcess(['verify', '--server', server, '--file', file, '--json'])
  t.equal(verified.code, 0, `verify --server ${server}: ${verified.stderr}`)
  if (verified.code !== 0) return
  const report = JSON.parse(verified.stdout)
  t.equal(report.runs.length, 1, server)
  t.ok(report.runs[0].acked > 0, `${server}: ${report.runs[0].acked} acked`)
  t.equal(report.runs[0].lost + report.runs[0].torn + report.runs[0].corrupt, 0, `${server}: every acked record intact`)
}

/** lo's name, and an interface with a link-local address (name, index, address) if there is one. */
function localInterfaces(): { loopbackName: string | undefined; linkLocal: { name: string; index: number; address: string } | undefined } {
  const all = networkInterfaces()
  let loopbackName: string | undefined
  let linkLocal: { name: string; index: number; address: string } | undefined
  for (const [name, entries] of Object.entries(all)) {
    for (const entry of entries ?? []) {
      if (entry.family === 'IPv6' && entry.address === '::1') loopbackName = name
      if (entry.family === 'IPv6' && /^fe[89ab]/i.test(entry.address) && (entry.scopeid ?? 0) > 0 && linkLocal === undefined) {
        linkLocal = { name, index: entry.scopeid!, address: entry.address }
      }
    }
  }
  return { loopbackName, linkLocal }
}

t.test('every loopback spelling writes and verifies through a dual-stack listener', async (t) => {
  const dir = tempDir(t)
  const port = await startDualStackListener(t, join(dir, 'listener'))
  const { loopbackName } = localInterfaces()
  const servers = [`[::ffff:127.0.0.1]:${port}`, `[::1]:${port}`, `127.0.0.1:${port}`, `localhost:${port}`]
  if (loopbackName === undefined) t.fail('no interface has ::1, which the IPv6 loopback tests need')
  else servers.push(`[::1%${loopbackName}]:${port}`)
  // The kernel ignores the scope of ::1 (Linux tcp_v6_connect reads sin6_scope_id only for
  // link-local destinations), so a numeric scope on it must pass through harmlessly too.
  servers.push(`[::1%1]:${port}`)
  for (const [i, server] of servers.entries()) await writeThenVerify(t, server, join(dir, `data-${i}.plugcheck`))
})

/** The interface this test makes where no interface has a link-local address, and its address. */
const ownInterface = { name: 'plugchk0', peer: 'plugchk1', address: 'fe80::a11c:1' }

/** `ip ARGS` (iproute2); throws with its stderr. */
function ip(args: readonly string[]): void {
  execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] })
}

/**
 * The interfaces this test may make, tried in order: a dummy needs the dummy module, a veth pair
 * (removed with either end) only the veth one. nodad makes the address usable at once.
 */
const interfaceKinds: readonly (readonly string[])[] = [
  ['type', 'dummy'],
  ['type', 'veth', 'peer', 'name', ownInterface.peer],
]

/**
 * An interface of this machine with a link-local address; where none has one, plugchk0 is made with
 * fe80::a11c:1 (as root; removed at teardown). Existing interfaces are never touched.
 */
function linkLocalInterface(t: Test): { name: string; index: number; address: string } {
  const existing = localInterfaces().linkLocal
  if (existing !== undefined) return existing
  // A plugchk0 left by a run that was killed before its teardown is this test's own.
  if (existsSync(`/sys/class/net/${ownInterface.name}`)) ip(['link', 'del', ownInterface.name])
  const failures: string[] = []
  for (const kind of interfaceKinds) {
    try {
      ip(['link', 'add', ownInterface.name, ...kind])
    } catch (error) {
      failures.push(`${kind[1]}: ${String((error as { stderr?: Buffer }).stderr ?? error).trim()}`)
      continue
    }
    t.teardown(() => ip(['link', 'del', ownInterface.name]))
    if (kind[1] === 'veth') ip(['link', 'set', ownInterface.peer, 'up'])
    ip(['link', 'set', ownInterface.name, 'up'])
    ip(['-6', 'addr', 'add', `${ownInterface.address}/64`, 'dev', ownInterface.name, 'nodad'])
    const index = Number(readFileSync(`/sys/class/net/${ownInterface.name}/ifindex`, 'utf8'))
    return { name: ownInterface.name, index, address: ownInterface.address }
  }
  throw new Error(
    `no interface here has an IPv6 link-local address, and none could be made (${failures.join('; ')})\n` +
      'hint: run the suite as root with iproute2 installed (apt-get install iproute2; .ci/run does)',
  )
}

t.test("this machine's own link-local address, scoped by interface name and by index", async (t) => {
  const linkLocal = linkLocalInterface(t)
  const dir = tempDir(t)
  const port = await startDualStackListener(t, join(dir, 'listener'))
  await writeThenVerify(t, `[${linkLocal.address}%${linkLocal.name}]:${port}`, join(dir, 'by-name.plugcheck'))
  // Node's own connect drops a numeric scope on POSIX (libuv reads it with if_nametoindex); verify
  // must reach the same address the writer did.
  await writeThenVerify(t, `[${linkLocal.address}%${linkLocal.index}]:${port}`, join(dir, 'by-index.plugcheck'))
})

t.test('a scope naming no interface is a usage error for write and verify', async (t) => {
  const dir = tempDir(t)
  const server = '[fe80::1%nosuch]:5400'
  const expected = /^plugcheck: --server \[fe80::1%nosuch\]:5400: no network interface "nosuch"\nhint: interfaces here: /
  const written = await runCli(
    ['write', '--server', server, '--file', join(dir, 'data.plugcheck'), '--duration', '0.2', '--size', '8MiB'],
    60_000,
  )
  t.equal(written.code, 2, written.stderr)
  t.match(written.stderr, expected)
  const verified = await runInProcess(['verify', '--server', server, '--file', join(dir, 'data.plugcheck')])
  t.equal(verified.code, 2, verified.stderr)
  t.match(verified.stderr, expected)
})
