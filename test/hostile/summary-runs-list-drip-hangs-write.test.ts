/**
 * When the write's connection did not confirm every ack (here the listener refused mid-run: its disk
 * filled), the summary asks the listener what it holds on a new connection, bounded by
 * maxHeldQueryMs (5 s): a listener that does not answer makes it say "unknown ... ask it with
 * plugcheck runs". A listener that answers the list with frames that are no answer (a 'recorded'
 * every 300 ms, never the run-list) holds the write for ever: each frame after the welcome restarts
 * the wait for the answer (listener-client.ts Conversation.take calls awaitAnswer for any message).
 * The write must give up on the list within its bound, print the summary with the recorded count
 * unknown, and exit 3 as the listener's refusal says.
 */
import t from 'tap'
import { join } from 'node:path'
import { runCli, startFakeListener, tempDir, welcomeAndAccept } from '../fixtures/cli.js'
import { protocolVersion } from '../../src/protocol/messages.js'
import { maxHeldQueryMs } from '../../src/client/write/run-end.js'

t.test('a listener that drips non-answers to the runs list: the write still ends, recorded unknown, exit 3', async (t) => {
  const timers = new Set<NodeJS.Timeout>()
  t.teardown(() => {
    for (const timer of timers) clearInterval(timer)
  })
  let acks = 0
  // The clock starts at the summary's list request, not at the write's spawn: a loaded machine can take
  // seconds to start the CLI and write the 20 records before the refusal.
  let listedMs: number | undefined
  const fake = await startFakeListener((m, reply, socket) => {
    if (m.type === 'hello' && m.role === 'verifier') {
      reply({ type: 'welcome', protocol: protocolVersion, listenerId: 'fake', nowMs: Date.now() })
      return
    }
    if (m.type === 'list') {
      listedMs ??= Date.now()
      const timer = setInterval(() => {
        if (socket.destroyed) clearInterval(timer)
        else reply({ type: 'recorded', runId: '0123456789abcdef', throughSeq: 1 })
      }, 300)
      timers.add(timer)
      return
    }
    welcomeAndAccept(m, reply)
    if (m.type === 'ack' && ++acks === 20) {
      reply({ type: 'error', code: 'storage', message: 'could not record acks: ENOSPC (no space left on device)' })
      socket.end()
    }
  })
  t.teardown(() => fake.close())
  const file = join(tempDir(t), 'p.dat')
  const startedMs = Date.now()
  // A write held for ever is killed 60 s after its spawn: far past the bound below even after a slow start.
  const result = await runCli(['write', '--server', fake.server, '--file', file, '--method', 'fdatasync', '--duration', '60'], 60_000)
  const tookMs = Date.now() - (listedMs ?? startedMs)
  t.ok(
    tookMs < maxHeldQueryMs + 12_000,
    `the write ended within its bound on the list (${tookMs} ms after asking; killed after 60 s: code ${result.code})`,
  )
  t.equal(result.code, 3, `exit 3: the listener failed (${result.stderr.trim()})`)
  t.match(result.stderr, /the listener at 127\.0\.0\.1:\d+ failed: could not record acks: ENOSPC/)
  t.match(
    result.stdout,
    /^ {2}[\d,]+ records synced and acknowledged; recorded by the listener: unknown, .*ask it with plugcheck runs --server 127\.0\.0\.1:\d+$/m,
    'the summary says the recorded count is unknown and how to ask',
  )
})
