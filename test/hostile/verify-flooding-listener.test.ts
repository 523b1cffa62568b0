/**
 * A listener (buggy or hostile) that welcomes verify and then floods it with frames that answer
 * nothing (welcome frames, about 1.2 MiB a second, a link a tenth as fast as a LAN), never the runs reply. --listener-timeout bounds
 * every wait for an answer; the bytes of frames that were no answer must not count as "a large
 * answer still arriving". Today every MiB received restarts the wait, so verify waits for ever.
 * It must give up after about the timeout (exit 3), naming the listener.
 */
import t from 'tap'
import { createServer, type Socket } from 'node:net'
import { join } from 'node:path'
import { encodeFrame } from '../../src/protocol/framing.js'
import { protocolVersion } from '../../src/protocol/messages.js'
import { runCli, tempDir } from '../fixtures/cli.js'

t.test('a listener that floods frames that answer nothing: verify gives up after --listener-timeout', async (t) => {
  const sockets = new Set<Socket>()
  const timers = new Set<NodeJS.Timeout>()
  // The clock starts at verify's first bytes (its hello), not at its spawn: a loaded machine can take seconds to start the CLI.
  let helloAt: number | undefined
  const server = createServer((socket) => {
    sockets.add(socket)
    socket.on('error', () => {})
    const welcome = encodeFrame({ type: 'welcome', protocol: protocolVersion, listenerId: 'flood', nowMs: Date.now() })
    const burst = Buffer.concat(Array.from({ length: Math.ceil((120 * 1024) / welcome.length) }, () => welcome))
    socket.once('data', () => {
      helloAt ??= performance.now()
      socket.write(welcome)
      const timer = setInterval(() => socket.write(burst), 100)
      timers.add(timer)
      socket.on('close', () => clearInterval(timer))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(async () => {
    for (const timer of timers) clearInterval(timer)
    for (const socket of sockets) socket.destroy()
    await new Promise((resolve) => server.close(resolve))
  })
  const address = server.address() as { port: number }
  const dir = tempDir(t)
  const spawned = performance.now()
  const result = await runCli(
    ['verify', '--server', `127.0.0.1:${address.port}`, '--file', join(dir, 'data'), '--listener-timeout', '2'],
    60_000,
  )
  // A verify held for ever is killed 60 s after its spawn: far past the bound below even after a slow start.
  const seconds = (performance.now() - (helloAt ?? spawned)) / 1000
  t.equal(result.code, 3, `exit 3 (after ${seconds.toFixed(1)} s; -1: killed at 60 s) ${result.stderr.split('\n')[0]}`)
  t.ok(seconds < 15, `gave up within the timeout, not after ${seconds.toFixed(1)} s`)
  t.match(result.stderr, /127\.0\.0\.1:\d+/, 'the listener named')
})
