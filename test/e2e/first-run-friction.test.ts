/**
 * A new user's first-run friction (issue 18's log): each message a command gives names what the user
 * must type next, and a refused start leaves nothing behind and prints nothing but the refusal.
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { type AddressInfo, createServer } from 'node:net'
import { join } from 'node:path'
import t from 'tap'
import { listenOutcome, runCli, runInProcess, startListener, tempDir, waitFor } from '../fixtures/cli.js'

t.test('report on an empty listener directory: the hint names every flag listen --campaign needs', async (t) => {
  const dir = t.testdir({ runs: {} })
  const none = await runInProcess(['report', '--dir', dir])
  t.equal(none.code, 2)
  const hint =
    /\nhint: .*a campaign starts with (plugcheck listen --campaign NAME --cycles N --cut-command CMD --cut-after MIN-MAX)\n$/.exec(
      none.stderr,
    )
  t.ok(hint, `the hint names --cut-after: ${none.stderr}`)
  // The hinted command, its placeholders filled in, starts a campaign rather than being refused.
  const store = join(tempDir(t), 'ld')
  const started = await listenOutcome([
    '--host',
    '127.0.0.1',
    '--port',
    '0',
    '--dir',
    store,
    '--campaign',
    'lab1',
    '--cycles',
    '3',
    '--cut-command',
    'true',
    '--cut-after',
    '30-90',
  ])
  t.equal(started.outcome, 'listening', `the hinted flags are enough: ${started.stderr}`)
})

t.test('listen --help says --cut-command and --cut-after are required with --campaign', async (t) => {
  const help = await runCli(['listen', '--help'])
  t.equal(help.code, 0)
  const flat = help.stdout.replace(/\s+/g, ' ')
  t.match(flat, /--campaign .*needs --cut-command and --cut-after/)
  t.match(flat, /--cut-command campaign \(required with --campaign\)/)
  t.match(flat, /--cut-after campaign \(required with --campaign\)/)
})

t.test('a stored campaign restarted with another --cycles: the refusal alone, before any "listening" line', async (t) => {
  const store = join(tempDir(t), 'ld')
  const flags = (cycles: string) => ['--host', '127.0.0.1', '--port', '0', '--dir', store, '--campaign', 'lab1', '--cycles', cycles]
  const campaign = ['--cut-command', 'true', '--cut-after', '30-90', '--seed', '7']
  const first = await startListener(store, ['--campaign', 'lab1', '--cycles', '3', ...campaign])
  await waitFor('the campaign file', () => existsSync(join(store, 'campaigns', 'lab1.json')))
  await first.kill('SIGTERM')
  const stored = readFileSync(join(store, 'campaigns', 'lab1.json'), 'utf8')
  const entries = readdirSync(store).sort()

  const other = await runCli(['listen', ...flags('5'), ...campaign])
  t.equal(other.code, 2, other.stderr)
  t.equal(other.stdout, '', 'no "listening on" line')
  t.equal(
    other.stderr,
    `plugcheck: campaign lab1 in ${join(store, 'campaigns', 'lab1.json')} was started with other options: --cycles 5, stored 3\n` +
      `hint: resume it with --campaign lab1 --cycles 3 --cut-command 'true' --cut-after 30-90 --reboot-timeout 600 --seed 7, or give the new campaign another --campaign name\n`,
    'the refusal and its hint, nothing else',
  )
  t.equal(readFileSync(join(store, 'campaigns', 'lab1.json'), 'utf8'), stored, 'the stored campaign is unchanged')
  t.same(readdirSync(store).sort(), entries, 'nothing new in the directory')
})

t.test('--server given as a URL: every command that takes it names the HOST:PORT to give instead (exit 2)', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'data.dat')
  const url = 'http://10.77.0.1:5400'
  for (const args of [
    ['write', '--server', url, '--file', file],
    ['agent', '--server', url, '--file', file],
    ['verify', '--server', url, '--file', file],
    ['runs', '--server', url],
  ]) {
    const result = await runInProcess(args)
    t.equal(result.code, 2, args[0]!)
    t.equal(result.stderr, 'plugcheck: --server takes HOST[:PORT], not a URL: --server 10.77.0.1:5400\n', args[0]!)
  }
  t.same(readdirSync(dir), [], 'no data file made')
})

t.test('a misspelt --method is named with the method it may have meant, exit 2 (write, agent, demo)', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'data.dat')
  const known =
    'known: fsync, fdatasync, open_sync, open_datasync, fsync_writethrough, barrier_fsync, flush_data_only, pwritev2_dsync, none'
  const cases: Array<[string[], string]> = [
    [['write', '--server', '127.0.0.1:1', '--file', file, '--method', 'fdatasnyc'], 'unknown method fdatasnyc (did you mean fdatasync?)'],
    [
      ['agent', '--server', '127.0.0.1:1', '--file', file, '--method', 'fsync,open-sync'],
      'unknown method open-sync (did you mean open_sync?)',
    ],
    [['demo', '--method', 'FDATASYNC'], 'unknown method FDATASYNC (did you mean fdatasync?)'],
    [['write', '--server', '127.0.0.1:1', '--file', file, '--method', 'bogus'], 'unknown method bogus'],
  ]
  for (const [args, message] of cases) {
    const result = await runInProcess(args)
    t.equal(result.code, 2, args.join(' '))
    t.equal(result.stderr, `plugcheck: ${message} (${known})\n`, args.join(' '))
  }
  t.same(readdirSync(dir), [], 'no data file made')
})

t.test('listen on a port another program holds: the hint names the port, and nothing it made is left behind', async (t) => {
  const holder = createServer()
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => holder.close(resolve)))
  const port = (holder.address() as AddressInfo).port
  const root = tempDir(t)
  const listen = (dir: string) => runCli(['listen', '--host', '127.0.0.1', '--port', String(port), '--dir', dir])
  const refusal =
    `plugcheck: could not listen on 127.0.0.1:${port}: EADDRINUSE (address already in use)\n` +
    `hint: another program listens on ${port}: stop it, or choose --port\n`

  const fresh = await listen(join(root, 'x', 'other'))
  t.equal(fresh.code, 3, fresh.stderr)
  t.equal(fresh.stdout, '')
  t.equal(fresh.stderr, refusal)
  t.same(readdirSync(root), [], 'the directory it made (and its parent) is gone')

  // A directory of the user's: what was there stays, byte for byte; what the start added goes.
  const mine = join(root, 'mine')
  mkdirSync(join(mine, 'keep'), { recursive: true })
  writeFileSync(join(mine, 'notes.txt'), 'my notes\n')
  const existing = await listen(mine)
  t.equal(existing.code, 3, existing.stderr)
  t.equal(existing.stderr, refusal)
  t.same(readdirSync(mine).sort(), ['keep', 'notes.txt'], 'only what was there before')
  t.equal(readFileSync(join(mine, 'notes.txt'), 'utf8'), 'my notes\n')

  // A listener's directory: its store is kept whole, and still opens.
  const store = join(root, 'store')
  const listener = await startListener(store)
  const before = readdirSync(store).sort()
  await listener.kill('SIGTERM')
  const taken = await listen(store)
  t.equal(taken.code, 3, taken.stderr)
  t.same(readdirSync(store).sort(), before, "the store's entries are all still there")
  const again = await startListener(store)
  await again.kill('SIGTERM')
  t.pass('the store opens again')
})
