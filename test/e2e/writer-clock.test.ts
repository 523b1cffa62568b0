/**
 * Clocks in the field: NTP stepping a clock at boot, a VM resumed, a board without an RTC battery at
 * 1970. Real writers and agents run under libfaketime (LD_PRELOAD; FAKETIME_DONT_FAKE_MONOTONIC=1
 * leaves the monotonic clock alone, as a real step does), the listener on the true clock.
 *
 * - A writer whose wall clock steps by 3 days after it started and before it announced its run: its
 *   records' write times and its run's creation time came from two clock reads, 3 days apart, so
 *   an ordinary interrupted record (a newer overwrite cut mid-record) was judged corrupt, with a false
 *   "reordering" (exit 1). Every time of a run now derives from one base, the listener's clock.
 * - A writer at 1970 writes (its run times from the listener's clock) and says its clock is wrong.
 * - The agent's wait for the listener (5 minutes) measures monotonic time: a forward step of a day
 *   during the wait does not end it.
 * - An agent at 1970 verifies and reports its verdicts (stamped with the listener's time).
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { closeSync, existsSync, openSync, readSync, writeFileSync, writeSync } from 'node:fs'
import { createServer, connect, type Socket } from 'node:net'
import { join } from 'node:path'
import { listRuns } from '../../src/client/verify/listener-client.js'
import { parseEndpoint, type Endpoint } from '../../src/protocol/endpoint.js'
import { fillRecord, readU64, runKey, slotOf, slotOffsetBytes, writeTimeOffset } from '../../src/record/records.js'
import { protocolVersion } from '../../src/protocol/messages.js'
import {
  binPath,
  runInProcess,
  sleep,
  startFakeListener,
  startListener,
  startListenerOnPort,
  tempDir,
  waitFor,
  writeThenKill,
  type CliResult,
} from '../fixtures/cli.js'
import { runsEnded } from '../fixtures/runs-ended.js'

const fakeTimeLibrary = '/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1'

/** The environment that runs a child under libfaketime, its fake time read from specFile at every call. */
function fakeTimeEnv(specFile: string): NodeJS.ProcessEnv {
  if (!existsSync(fakeTimeLibrary)) throw new Error(`libfaketime is missing (${fakeTimeLibrary}): install the Debian package faketime`)
  return {
    ...process.env,
    LD_PRELOAD: fakeTimeLibrary,
    FAKETIME_TIMESTAMP_FILE: specFile,
    FAKETIME_NO_CACHE: '1',
    FAKETIME_DONT_FAKE_MONOTONIC: '1',
  }
}

interface Child {
  readonly exit: Promise<CliResult>
  out(): string
  err(): string
  kill(): void
}

function spawnFaked(args: readonly string[], specFile: string): Child {
  const child = spawn(process.execPath, [binPath, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: fakeTimeEnv(specFile) })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()))
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()))
  const exit = new Promise<CliResult>((resolve) => child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr })))
  return { exit, out: () => stdout, err: () => stderr, kill: () => child.kill('SIGKILL') }
}

/**
 * A TCP proxy to the listener that holds each client's bytes until release(): the writer has started
 * (its clock read) and waits for the welcome, as an agent waits at boot for a listener.
 */
async function holdingProxy(target: number): Promise<{ port: number; connected: Promise<void>; release(): void; close(): void }> {
  let release!: () => void
  const released = new Promise<void>((resolve) => (release = resolve))
  let connected!: () => void
  const firstConnection = new Promise<void>((resolve) => (connected = resolve))
  const sockets = new Set<Socket>()
  const server = createServer((client) => {
    sockets.add(client)
    connected()
    const upstream = connect(target, '127.0.0.1')
    sockets.add(upstream)
    const held: Buffer[] = []
    const hold = (c: Buffer): void => void held.push(c)
    client.on('data', hold)
    void released.then(() => {
      client.off('data', hold)
      for (const c of held) upstream.write(c)
      client.pipe(upstream)
      upstream.pipe(client)
    })
    for (const s of [client, upstream])
      s.on('error', () =>
        [client, upstream].forEach((x) => {
          x.destroy()
        }),
      )
    client.on('close', () => upstream.destroy())
    upstream.on('close', () => client.destroy())
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    port: (server.address() as { port: number }).port,
    connected: firstConnection,
    release,
    close: () => {
      for (const s of sockets) s.destroy()
      server.close()
    },
  }
}

const endpoint = (server: string): Endpoint => parseEndpoint(server) as Endpoint

interface RunJson {
  runId: string
  createdMs: number
  acked: number
  intact: number
  superseded: number
  interrupted: number
  lost: number
  torn: number
  corrupt: number
  verdict: string
}

for (const stepDays of [3, -3]) {
  t.test(
    `the writer's clock steps ${stepDays} days between its start and its announcement: an interrupted record is interrupted, verify passes`,
    async (t) => {
      const dir = tempDir(t)
      const listener = await startListener(join(dir, 'listener'))
      t.teardown(() => listener.kill())
      const proxy = await holdingProxy(listener.port)
      t.teardown(() => proxy.close())
      const spec = join(dir, 'faketime')
      writeFileSync(spec, '+0\n')
      const file = join(dir, 'data')
      const recordSize = 8192
      const slotCount = 63
      const writer = spawnFaked(
        [
          'write',
          '--server',
          `127.0.0.1:${proxy.port}`,
          '--file',
          file,
          '--pattern',
          'overwrite',
          '--size',
          `${(slotCount + 1) * 8}KiB`,
          '--duration',
          '2',
        ],
        spec,
      )
      t.teardown(() => writer.kill())
      await proxy.connected // the writer runs: its process started, it waits for the listener's welcome
      writeFileSync(spec, `${stepDays > 0 ? '+' : ''}${stepDays}d\n`)
      await sleep(200)
      proxy.release()
      const written = await writer.exit
      t.equal(written.code, 0, written.stderr)
      t.match(
        written.stderr,
        new RegExp(
          `plugcheck: note: this machine's clock is 3 days ${stepDays > 0 ? 'ahead of' : 'behind'} the listener's; the run's times come from the listener's clock`,
        ),
      )

      const before = await runInProcess(['verify', '--server', listener.server, '--file', file, '--json'])
      t.equal(before.code, 0, before.stdout.slice(0, 2000))
      const report = JSON.parse(before.stdout) as { runs: RunJson[]; claims: Array<{ runId: string; announcedMs: number }> }
      const run = report.runs[0]!
      const announcedMs = report.claims.find((c) => c.runId === run.runId)!.announcedMs
      t.ok(
        Math.abs(run.createdMs - announcedMs) < 60_000,
        `the run's creation time is the listener's (created ${new Date(run.createdMs).toISOString()}, announced ${new Date(announcedMs).toISOString()})`,
      )

      // The cut: the next write to the last acknowledged record's slot, torn after its first half. Its
      // write time is what the writer's clock gave the record before it (a record later, a few us on).
      const key = runKey(run.runId)
      const slot = slotOf(key, 'overwrite', run.acked, slotCount)
      const fd = openSync(file, 'r+')
      t.teardown(() => closeSync(fd))
      const last = Buffer.alloc(recordSize)
      readSync(fd, last, 0, recordSize, slotOffsetBytes(recordSize, slot))
      let newer = run.acked + 1
      while (slotOf(key, 'overwrite', newer, slotCount) !== slot) newer++
      const next = Buffer.alloc(recordSize)
      fillRecord(next, key, newer, slot, readU64(last, writeTimeOffset) + 50)
      writeSync(fd, next, 0, recordSize / 2, slotOffsetBytes(recordSize, slot))

      const after = await runInProcess(['verify', '--server', listener.server, '--file', file, '--json'])
      t.equal(after.code, 0, `a torn, never acknowledged overwrite is no failure: ${after.stdout.slice(0, 3000)}`)
      const judged = JSON.parse(after.stdout) as { verdict: string; runs: RunJson[] }
      t.equal(judged.verdict, 'pass')
      t.match(judged.runs[0], { interrupted: 1, lost: 0, torn: 0, corrupt: 0 })
    },
  )
}

t.test('a writer at 1970 (no RTC battery): it writes, says its clock is wrong, and its run passes', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const spec = join(dir, 'faketime')
  writeFileSync(spec, '@1970-01-02 00:00:00\n')
  const file = join(dir, 'data')
  const writer = spawnFaked(
    ['write', '--server', listener.server, '--file', file, '--method', 'fdatasync,none', '--duration', '1.5', '--size', '16MiB'],
    spec,
  )
  t.teardown(() => writer.kill())
  const written = await writer.exit
  t.equal(written.code, 0, written.stderr)
  t.match(
    written.stderr,
    /^plugcheck: note: this machine's clock says 1970-01-0[12], not a real time \(no battery-backed clock, or not set yet\); the run's times come from the listener's clock/m,
  )
  t.equal(written.stderr.match(/plugcheck: note:/g)?.length, 1, 'said once')

  const verified = await runInProcess(['verify', '--server', listener.server, '--file', file, '--json'])
  t.equal(verified.code, 4, `judged (the control lost nothing without a cut): ${verified.stdout.slice(0, 1500)}`)
  const report = JSON.parse(verified.stdout) as { runs: RunJson[] }
  for (const run of report.runs) {
    t.ok(Math.abs(run.createdMs - Date.now()) < 10 * 60_000, `created ${new Date(run.createdMs).toISOString()}: the listener's time`)
    t.ok(run.acked > 0)
    t.equal(run.intact + run.superseded, run.acked, 'every acknowledged record intact (or superseded: append wraps)')
  }
})

t.test("the agent's wait for the listener is monotonic: a forward step of a day does not end it", async (t) => {
  const dir = tempDir(t)
  // A port nobody listens on yet: the listener comes up on it later.
  const port = await new Promise<number>((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const p = (probe.address() as { port: number }).port
      probe.close(() => resolve(p))
    })
  })
  const spec = join(dir, 'faketime')
  writeFileSync(spec, '+0\n')
  const agent = spawnFaked(['agent', '--server', `127.0.0.1:${port}`, '--file', join(dir, 'data')], spec)
  t.teardown(() => agent.kill())
  await waitFor(
    `the agent waiting (${agent.err()})`,
    () => /waiting for the listener at 127\.0\.0\.1:\d+ \(0 s of 300\)/.test(agent.err()),
    60_000,
  )
  writeFileSync(spec, '+1d\n')
  await sleep(4000)
  t.notMatch(agent.err(), /could not be reached/, `still waiting 4 s after the step: ${agent.err()}`)
  const listener = await startListenerOnPort(join(dir, 'listener'), port)
  t.teardown(() => listener.kill())
  const result = await agent.exit
  t.equal(result.code, 0, result.stderr)
  t.match(result.stdout, /nothing to verify/)
})

t.test("an agent at 1970 verifies the last run and reports its verdicts, stamped with the listener's time", async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'data')
  await writeThenKill(listener.server, file, ['--size', '16MiB'], 200)
  await runsEnded(listener.server, file) // its last acks and its end taken in (the agent would find a live run)
  const spec = join(dir, 'faketime')
  writeFileSync(spec, '@1970-01-02 00:00:00\n')
  const agent = spawnFaked(['agent', '--server', listener.server, '--file', file, '--size', '16MiB'], spec)
  t.teardown(() => agent.kill())
  const result = await agent.exit
  t.equal(result.code, 0, `verify passes (a killed writer keeps the page cache), the verdict is reported: ${result.stderr}`)
  t.match(result.stdout, /reported 1 verdict to the listener/)
  const runs = (await listRuns(endpoint(listener.server), undefined, 10_000)).runs
  const verdict = runs[0]?.verdict
  t.equal(verdict?.verdict, 'pass')
  t.ok(
    verdict !== null && verdict !== undefined && Math.abs(verdict.atMs - Date.now()) < 10 * 60_000,
    `stamped ${verdict?.atMs === undefined ? '-' : new Date(verdict.atMs).toISOString()}: the listener's time`,
  )
})

t.test(
  "a listener of an older plugcheck sends no clock: this machine's is the base, with a warning; at 1970 the write is refused (exit 2)",
  async (t) => {
    const dir = tempDir(t)
    const old = await startFakeListener((message, reply) => {
      if (message.type === 'hello') reply({ type: 'welcome', protocol: protocolVersion, listenerId: 'older' })
      if (message.type === 'query') reply({ type: 'runs', runs: [], claims: [] }) // the write's question: no earlier run
      if (message.type === 'run') reply({ type: 'run-ok', runId: message.meta.runId })
    })
    t.teardown(() => old.close())
    const spec = join(dir, 'faketime')
    writeFileSync(spec, '+0\n')
    const file = join(dir, 'data')
    const writer = spawnFaked(['write', '--server', old.server, '--file', file, '--size', '16MiB'], spec)
    t.teardown(() => writer.kill())
    await waitFor(
      `the warning (${writer.err()})`,
      () =>
        /plugcheck: warning: the listener at 127\.0\.0\.1:\d+ \(an older plugcheck\) does not send its clock: the run's times come from this machine's clock/.test(
          writer.err(),
        ),
      60_000,
    )
    // The warning comes as the welcome arrives; the announcement follows it.
    await waitFor('the run announced', () => old.received.some((m) => m.type === 'run'), 60_000)
    const announced = old.received.find((m) => m.type === 'run')
    t.ok(
      announced !== undefined && announced.type === 'run' && Math.abs(announced.meta.createdMs - Date.now()) < 60_000,
      "the run is announced with this machine's time",
    )
    writer.kill()

    writeFileSync(spec, '@1970-01-02 00:00:00\n')
    const refused = await spawnFaked(['write', '--server', old.server, '--file', `${file}2`, '--size', '16MiB'], spec).exit
    t.equal(refused.code, 2, refused.stderr)
    t.match(
      refused.stderr,
      /^plugcheck: this machine's clock says 1970-01-0[12], not a real time \(no battery-backed clock, or not set yet\), and the listener at 127\.0\.0\.1:\d+ is an older plugcheck that does not send its own\nhint: set this machine's clock/m,
    )
    t.equal(old.received.filter((m) => m.type === 'run').length, 1, 'the refused write announced nothing')
    t.notOk(existsSync(`${file}2`), 'and created nothing')
  },
)
