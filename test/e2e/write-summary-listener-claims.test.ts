/**
 * What the write says when the listener claims more recorded than was acknowledged (ack-channel.ts
 * refuses such a 'recorded' report; run-end.ts refuses such a count in the runs list): the run's
 * line says why its count is unknown, and stderr names the violation. The counts themselves (never
 * more recorded than acknowledged) are held by test/hostile/summary-recorded-beyond-acknowledged.test.ts.
 */
import t from 'tap'
import { join } from 'node:path'
import { runCli, startFakeListener, tempDir, welcomeAndAccept } from '../fixtures/cli.js'
import { protocolVersion } from '../../src/protocol/messages.js'

t.test("a 'recorded' report beyond the acks sent: exit 3, naming the run, the seq and the last ack", async (t) => {
  const fake = await startFakeListener((m, reply) => {
    welcomeAndAccept(m, reply)
    // Honest for the first ten acks, then far ahead of anything sent (a seq or two ahead can be sent by the time it arrives).
    if (m.type === 'ack') reply({ type: 'recorded', runId: m.runId, throughSeq: m.toSeq < 10 ? m.toSeq : 1_000_000 })
  })
  t.teardown(() => fake.close())
  const result = await runCli([
    'write',
    '--server',
    fake.server,
    '--file',
    join(tempDir(t), 'p.dat'),
    '--method',
    'fdatasync',
    '--duration',
    '5',
  ])
  t.equal(result.code, 3, 'exit 3')
  t.match(
    result.stderr,
    /^plugcheck: the listener at 127\.0\.0\.1:\d+ reported run [0-9a-f]{16} recorded through seq 1000000, beyond the last seq acknowledged \(\d+\): a protocol violation$/m,
  )
  t.match(result.stdout, /^ {2}[\d,]+ records synced and acknowledged; recorded by the listener: unknown, /m, 'the count shown as unknown')
})

t.test('a runs list with more of the run than was acknowledged: the line says the listener listed more', async (t) => {
  let acks = 0
  const fake = await startFakeListener((m, reply, socket) => {
    if (m.type === 'hello' && m.role === 'verifier') {
      reply({ type: 'welcome', protocol: protocolVersion, listenerId: 'fake', nowMs: Date.now() })
      return
    }
    if (m.type === 'list') {
      const run = fake.received.find((r) => r.type === 'run')
      if (run?.type !== 'run') return
      const meta = run.meta
      const listed = { runId: meta.runId, groupId: meta.groupId, host: meta.host, path: meta.requestedPath, method: meta.method }
      reply({
        type: 'run-list',
        truncated: false,
        runs: [
          { ...listed, announcedMs: Date.now(), live: false, ackedThroughSeq: 1_000_000, steadyMs: null, verdict: null, campaign: null },
        ],
      })
      return
    }
    welcomeAndAccept(m, reply)
    if (m.type === 'ack' && ++acks === 20) {
      reply({ type: 'error', code: 'storage', message: 'could not record acks: ENOSPC (no space left on device)' })
      socket.end()
    }
  })
  t.teardown(() => fake.close())
  const result = await runCli([
    'write',
    '--server',
    fake.server,
    '--file',
    join(tempDir(t), 'p.dat'),
    '--method',
    'fdatasync',
    '--duration',
    '20',
  ])
  t.equal(result.code, 3, `exit 3 (${result.stderr.trim()})`)
  t.match(
    result.stdout,
    /^ {2}(\d+) records synced and acknowledged; recorded by the listener: unknown, the listener listed 1,000,000 recorded, more than were acknowledged \(a protocol violation\)/m,
  )
  t.notMatch(result.stdout, /1,000,000 recorded by the listener/, 'never shown as recorded')
})
