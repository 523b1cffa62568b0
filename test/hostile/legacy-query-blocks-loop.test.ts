/**
 * A protocol 3 verifier (an older plugcheck, or anyone: no token is needed to say hello and query)
 * (two of them here) ask for a long group that still fits one legacy reply (2 runs of 499,000 spans, under
 * maxLegacyReplySpans). The listener must not block its event loop for more than a few milliseconds
 * while it answers (issue 16: "never blocks the event loop"): hellos of other clients are answered
 * promptly and an honest writer beside it keeps getting 'recorded' well under a second.
 * Real child listener on 127.0.0.1; the query's reply is read as raw bytes (this process decodes nothing large).
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { connect } from 'node:net'
import { join } from 'node:path'
import { encodeFrame } from '../../src/protocol/framing.js'
import { craftLongRun } from '../fixtures/long-run-store.js'
import { binPath, tempDir } from '../fixtures/cli.js'
import { Peer, runIdOf, runMeta } from '../fixtures/peer.js'

t.test('a legacy query of a long group does not stall hellos or an honest writer', async (t) => {
  const dir = tempDir(t)
  const long = craftLongRun({ dir, file: join(dir, 'data'), methods: ['fdatasync', 'fsync'], spansPerRun: 499_000 })
  const child = spawn(process.execPath, [binPath, 'listen', '--host', '127.0.0.1', '--port', '0', '--dir', dir], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  t.teardown(async () => {
    child.kill('SIGKILL')
    await exited
  })
  let out = ''
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not listening: ${out}`)), 30_000)
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString()
      const match = /listening on 127\.0\.0\.1:(\d+)/.exec(out)
      if (match !== null) {
        clearTimeout(timer)
        resolve(Number(match[1]))
      }
    })
  })

  const rawHello = (): Promise<number> =>
    new Promise((resolve) => {
      const start = Date.now()
      const socket = connect({ host: '127.0.0.1', port })
      socket.on('error', () => resolve(Infinity))
      socket.on('connect', () => socket.write(encodeFrame({ type: 'hello', protocol: 4, role: 'verifier' })))
      socket.once('data', () => {
        resolve(Date.now() - start)
        socket.destroy()
      })
    })

  const writerRun = runIdOf(0x16)
  const writer = await Peer.writer(port, runMeta(writerRun))
  t.teardown(() => writer.close())

  // Two old verifiers: hello (protocol 3) and the query; each ~29 MB reply is counted, not decoded.
  const replyBytes = [0, 0]
  let lastReplyData = 0
  const verifiers = await Promise.all(
    replyBytes.map(async (_, i) => {
      const socket = connect({ host: '127.0.0.1', port })
      await new Promise((resolve) => socket.once('connect', resolve))
      socket.on('data', (c: Buffer) => {
        replyBytes[i]! += c.length
        lastReplyData = Date.now()
      })
      socket.write(encodeFrame({ type: 'hello', protocol: 3, role: 'verifier' }))
      return socket
    }),
  )
  t.teardown(() =>
    verifiers.forEach((s) => {
      s.destroy()
    }),
  )
  await new Promise((resolve) => setTimeout(resolve, 200))
  const start = Date.now()
  for (const socket of verifiers) socket.write(encodeFrame({ type: 'query', host: long.metas[0]!.host, requestedPath: join(dir, 'data') }))

  const hellos: Promise<number>[] = []
  const helloTimer = setInterval(() => hellos.push(rawHello()), 25)
  const ackLatencies: number[] = []
  let seq = 0
  while (Date.now() - start < 6000) {
    seq++
    const sent = Date.now()
    writer.send({ type: 'ack', runId: writerRun, fromSeq: seq, toSeq: seq })
    for (;;) {
      const recorded = (await writer.next('recorded', 15_000)) as { throughSeq: number }
      if (recorded.throughSeq >= seq) break
    }
    ackLatencies.push(Date.now() - sent)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  clearInterval(helloTimer)
  const helloLatencies = await Promise.all(hellos)
  for (let waited = 0; Math.min(...replyBytes) < 20_000_000 && waited < 20_000; waited += 50)
    await new Promise((resolve) => setTimeout(resolve, 50))
  t.ok(Math.min(...replyBytes) > 20_000_000, `the old verifiers got their replies (${replyBytes.join(', ')} bytes)`)
  const worstHello = Math.max(...helloLatencies)
  const worstAck = Math.max(...ackLatencies)
  // The stall this guards against held hellos for as long as a reply took to build, which is most of
  // the time the replies took (30.5 s on a week-long group): a bound of a third of that time catches it
  // however slow the machine is, and never less than 1 s, which leaves room for a loaded 2-core machine's
  // scheduling and the collector of two 28 MB replies.
  const repliesMs = lastReplyData - start
  const bound = Math.max(1000, Math.round(repliesMs / 3))
  t.ok(worstHello < bound, `every hello answered within ${bound} ms while the ${repliesMs} ms of replies went (worst ${worstHello} ms)`)
  t.ok(worstAck < bound, `the honest writer's acks recorded within ${bound} ms meanwhile (worst ${worstAck} ms)`)
})
