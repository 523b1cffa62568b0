/**
 * verify-dripping-listener.test.ts holds a listener that drips welcomes: the wait for the answer is
 * no longer reset by them. Every other frame still resets it: Conversation.take (listener-client.ts)
 * restarts the wait for any message after the welcome, whether or not it answers the request. A
 * listener (buggy or hostile) that answers verify's query with a 'recorded' frame every 300 ms,
 * never the runs reply, holds verify for ever despite --listener-timeout 2 (and the write's summary,
 * which asks the runs list the same way: summary-runs-list-drip-hangs-write.test.ts). verify must give
 * up after the timeout: exit 3, naming the listener.
 */
import t from 'tap'
import { join } from 'node:path'
import { runCli, startFakeListener, tempDir } from '../fixtures/cli.js'
import { protocolVersion } from '../../src/protocol/messages.js'

t.test("a listener that answers verify's query with 'recorded' frames only: verify gives up after --listener-timeout", async (t) => {
  const timers = new Set<NodeJS.Timeout>()
  t.teardown(() => {
    for (const timer of timers) clearInterval(timer)
  })
  // The clock starts at verify's hello, not at its spawn: a loaded machine can take seconds to start the CLI.
  let helloAt: number | undefined
  const fake = await startFakeListener((m, reply, socket) => {
    if (m.type === 'hello') {
      helloAt ??= performance.now()
      reply({ type: 'welcome', protocol: protocolVersion, listenerId: 'fake', nowMs: Date.now() })
      return
    }
    const timer = setInterval(() => {
      if (socket.destroyed) clearInterval(timer)
      else reply({ type: 'recorded', runId: '0123456789abcdef', throughSeq: 1 })
    }, 300)
    timers.add(timer)
  })
  t.teardown(() => fake.close())
  const spawned = performance.now()
  const result = await runCli(['verify', '--server', fake.server, '--file', join(tempDir(t), 'data'), '--listener-timeout', '2'], 60_000)
  // A verify held for ever is killed 60 s after its spawn: far past the bound below even after a slow start.
  const seconds = (performance.now() - (helloAt ?? spawned)) / 1000
  t.equal(result.code, 3, `exit 3 (after ${seconds.toFixed(1)} s; -1: killed at 60 s) ${result.stderr.split('\n')[0]}`)
  t.ok(seconds < 15, `gave up within the timeout, not after ${seconds.toFixed(1)} s`)
  t.match(result.stderr, /127\.0\.0\.1:\d+/, 'the listener named')
})
