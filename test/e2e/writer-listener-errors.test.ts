/**
 * The writer against peers that are not a healthy listener, over real TCP on 127.0.0.1: a stranger
 * (an HTTP server), refusals (token, a busy path, storage, the connection limit), a listener that
 * falls behind (flow control) or stops recording, and IPv6 spellings of the loopback address.
 */
import t from 'tap'
import { createServer } from 'node:http'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, spawnCli, startFakeListener, startListener, tempDir, waitFor, welcomeAndAccept } from '../fixtures/cli.js'
import { maxUnrecordedAcks } from '../../src/client/write/flow-control.js'
import type { ServerMessage } from '../../src/protocol/messages.js'

t.test('an HTTP server on the port: named as not a listener, exit 3', async (t) => {
  const http = createServer((_req, res) => res.end('hello'))
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => http.close(resolve)))
  const port = (http.address() as { port: number }).port
  const file = join(tempDir(t), 'data')
  const result = await runCli(['write', '--server', `127.0.0.1:${port}`, '--file', file, '--duration', '1'], 30_000)
  t.equal(result.code, 3, result.stderr)
  t.match(
    result.stderr,
    new RegExp(`plugcheck: the peer at 127\\.0\\.0\\.1:${port} is not a plugcheck listener \\(it sent "HTTP/1\\.1 400 Bad Request"\\)`),
  )
  t.notMatch(result.stderr, /exceeds/)
  t.notOk(existsSync(file), 'nothing written')
})

t.test("a wrong token is a configuration error: exit 2 with the listener's words", async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'), ['--token', 'right'])
  t.teardown(() => listener.kill())
  const file = join(dir, 'data')
  const result = await runCli(['write', '--server', listener.server, '--file', file, '--token', 'wrong', '--duration', '1'], 30_000)
  t.equal(result.code, 2, result.stderr)
  t.match(result.stderr, /plugcheck: the listener at 127\.0\.0\.1:\d+ refused: wrong or missing token/)
  t.match(result.stderr, /hint: pass the listener's --token with --token/)
  t.notOk(existsSync(file), 'nothing written')
})

t.test('refusals by code: path-busy exit 2, storage and limit exit 3, each with its message', async (t) => {
  const cases: Array<[ServerMessage & { type: 'error' }, 'hello' | 'run', number, RegExp]> = [
    [
      { type: 'error', code: 'path-busy', message: 'run 0123456789abcdef (connection from 10.0.0.7) is writing host:/x' },
      'run',
      2,
      /refused: run 0123456789abcdef \(connection from 10\.0\.0\.7\) is writing host:\/x/,
    ],
    [
      { type: 'error', code: 'storage', message: 'could not store the run: ENOSPC (no space left on device)' },
      'run',
      3,
      /the listener at .* failed: could not store the run: ENOSPC/,
    ],
    [
      { type: 'error', code: 'limit', message: '1024 connections (--max-connections) are open' },
      'hello',
      3,
      /the listener at .* refused the connection: 1024 connections \(--max-connections\) are open/,
    ],
    [
      { type: 'error', code: 'protocol-version', message: 'protocol 2 is not supported\u001b[2J' },
      'hello',
      2,
      /refused: protocol 2 is not supported \[2J$/m,
    ],
  ]
  for (const [error, on, code, message] of cases) {
    const fake = await startFakeListener((m, reply, socket) => {
      if (m.type === on) {
        reply(error)
        socket.end()
      } else welcomeAndAccept(m, reply)
    })
    const file = join(tempDir(t), 'data')
    const result = await runCli(['write', '--server', fake.server, '--file', file, '--duration', '1'], 30_000)
    await fake.close()
    t.equal(result.code, code, `${error.code}: exit ${code} (${result.stderr.trim()})`)
    t.match(result.stderr, message, `${error.code}: the listener's message`)
    t.equal(result.stderr.split('\n').filter((l) => l.startsWith('plugcheck:')).length, 1, `${error.code}: one line`)
    t.notOk(existsSync(file), `${error.code}: no data file`)
  }
})

t.test('each run announcement carries the writer environment: boot id and fingerprint', async (t) => {
  const fake = await startFakeListener((m, reply) => welcomeAndAccept(m, reply))
  t.teardown(() => fake.close())
  const dir = tempDir(t)
  const result = await runCli(
    [
      'write',
      '--server',
      fake.server,
      '--file',
      join(dir, 'data'),
      '--method',
      'fdatasync,none',
      '--duration',
      '0.3',
      '--listener-timeout',
      '0.5',
    ],
    30_000,
  )
  t.equal(result.code, 3, 'the fake listener never reports anything recorded')
  t.match(result.stderr, /did not confirm every ack as recorded within 0\.5 s/)
  const runs = fake.received.filter((m) => m.type === 'run')
  t.equal(runs.length, 2)
  const bootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()
  for (const run of runs) {
    if (run.type !== 'run') continue
    t.equal(run.writer?.bootId, bootId)
    t.equal(run.writer?.fingerprint?.target.path, dir, "fingerprint of the data file's directory")
    t.equal(run.writer?.fingerprint?.bootId, bootId)
  }
})

t.test('flow control: the writer waits for a listener that falls behind, and gives up only on a stall', async (t) => {
  // Records nothing until the writer is more than the bound ahead, then holds for 1.5 s, then
  // reports promptly. The writer must stop at the bound, wait, and go on. A second after the
  // release it is ended by SIGTERM (however long a loaded machine took to reach the bound): exit 143
  // with its summary, not a listener's stall (exit 3). Its --listener-timeout (10 s) is well above the
  // hold: a writer that gives up instead of waiting still exits 3, while one that waits is not failed
  // by a loaded machine running its timers late; one that does not stop at the bound shows in aheadMax.
  let acked = 0
  let recordedSent = 0
  let aheadMax = 0
  let holding: NodeJS.Timeout | undefined
  let released = false
  const fake = await startFakeListener((m, reply) => {
    welcomeAndAccept(m, reply)
    if (m.type === 'ack') {
      acked = m.toSeq
      aheadMax = Math.max(aheadMax, acked - recordedSent)
      if (released) {
        recordedSent = acked
        reply({ type: 'recorded', runId: m.runId, throughSeq: acked })
      } else if (acked > maxUnrecordedAcks && holding === undefined) {
        holding = setTimeout(() => {
          released = true
          recordedSent = acked
          reply({ type: 'recorded', runId: m.runId, throughSeq: acked })
        }, 1500)
      }
    }
    if (m.type === 'end') reply({ type: 'recorded', runId: m.runId, throughSeq: acked })
  })
  t.teardown(() => fake.close())
  const file = join(tempDir(t), 'data')
  const writer = spawnCli([
    'write',
    '--server',
    fake.server,
    '--file',
    file,
    '--method',
    'none',
    '--size',
    '64MiB',
    '--listener-timeout',
    '10',
  ])
  const result = { stdout: '', stderr: '' }
  writer.stdout!.on('data', (c: Buffer) => (result.stdout += c.toString()))
  writer.stderr!.on('data', (c: Buffer) => (result.stderr += c.toString()))
  const closed = new Promise<number | null>((resolve) => writer.on('close', (code) => resolve(code)))
  t.teardown(() => writer.kill('SIGKILL'))
  await waitFor('the listener to release the writer', () => released || writer.exitCode !== null, 120_000)
  await new Promise((resolve) => setTimeout(resolve, 1000))
  writer.kill('SIGTERM')
  t.equal(await closed, 143, result.stderr)
  t.ok(holding !== undefined, `the writer went past the bound (${acked} acks)`)
  // One housekeeping tick (50 ms) of writing can pass the bound before the writer notices.
  t.ok(aheadMax <= maxUnrecordedAcks + 50_000, `acks ran at most ${aheadMax} ahead of "recorded" (bound ${maxUnrecordedAcks})`)
  t.match(result.stdout, /records written \(never synced: the negative control\) and acknowledged/)

  // A listener that never reports anything recorded: the writer stops at the bound and fails after
  // --listener-timeout with the summary on stdout, instead of running on without limit.
  let stalledAcks = 0
  const stalled = await startFakeListener((m, reply) => {
    welcomeAndAccept(m, reply)
    if (m.type === 'ack') stalledAcks = m.toSeq
  })
  t.teardown(() => stalled.close())
  const stuck = await runCli(
    [
      'write',
      '--server',
      stalled.server,
      '--file',
      join(tempDir(t), 'data'),
      '--method',
      'none',
      '--size',
      '64MiB',
      '--listener-timeout',
      '1',
    ],
    60_000,
  )
  t.equal(stuck.code, 3, stuck.stderr)
  t.match(stuck.stderr, /plugcheck: the listener at 127\.0\.0\.1:\d+ recorded no acks for 1 s while [\d,]+ waited/)
  // A listener that records nothing and answers no list either: the summary cannot know what it holds.
  t.match(
    stuck.stdout,
    /records written .* and acknowledged; recorded by the listener: unknown, the listener stopped answering \(it had confirmed 0\): ask it with plugcheck runs --server/,
  )
  t.match(stuck.stdout, /after a power cut and reboot: plugcheck verify/)
  t.ok(stalledAcks > maxUnrecordedAcks && stalledAcks <= maxUnrecordedAcks + 50_000, `stopped at ${stalledAcks} acks`)
})

t.test('IPv6 loopback spellings reach the listener', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const mapped = await runCli(
    ['write', '--server', `[::ffff:127.0.0.1]:${listener.port}`, '--file', join(dir, 'a'), '--duration', '0.3', '--size', '8MiB'],
    30_000,
  )
  t.equal(mapped.code, 0, mapped.stderr)
  t.match(mapped.stdout, /records synced and acknowledged/)

  let fake
  try {
    // Confirms every ack at the end, as a listener does: through the last seq it got (never beyond: the writer refuses that).
    let ackedThrough = 0
    fake = await startFakeListener((m, reply) => {
      welcomeAndAccept(m, reply)
      if (m.type === 'ack') ackedThrough = Math.max(ackedThrough, m.toSeq)
      if (m.type === 'end') reply({ type: 'recorded', runId: m.runId, throughSeq: ackedThrough })
    }, '::1')
  } catch (error) {
    t.fail(`no IPv6 loopback here, which --server [::1] needs (${(error as Error).message})`)
    return
  }
  t.teardown(() => fake.close())
  const v6 = await runCli(['write', '--server', fake.server, '--file', join(dir, 'b'), '--duration', '0.3', '--size', '8MiB'], 30_000)
  t.equal(v6.code, 0, v6.stderr)
  t.ok(
    fake.received.some((m) => m.type === 'ack'),
    'acks arrived over ::1',
  )
})
