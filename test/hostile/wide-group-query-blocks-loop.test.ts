/**
 * A group of 64 runs (write --jobs 16 with 4 methods, or anyone: announcements and queries need no
 * token) whose runs each hold a few thousand spans, under maxInlineSpans, so every span goes inline
 * in one protocol 4 runs reply: ~190,000 spans built and encoded in one go on the listener's only
 * thread. Eight verifiers asking at once must not hold the event loop (issue 16: "never blocks
 * the event loop for more than a few milliseconds"): hellos of other clients are still answered
 * within 250 ms.
 * The spans are made by a listener under libfaketime at 100x (wall and monotonic clocks), so a round
 * of acks every 2 ms of real time is 200 ms of the listener's: every ack starts a new span, as over
 * ~10 minutes. It is then stopped and started again on the real clock, and the group is queried there.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { connect } from 'node:net'
import { existsSync } from 'node:fs'
import { unpack } from 'msgpackr'
import { encodeFrame } from '../../src/protocol/framing.js'
import { maxInlineSpans, type ServerMessage } from '../../src/protocol/messages.js'
import { binPath, tempDir } from '../fixtures/cli.js'
import { Peer, runIdOf, runMeta } from '../fixtures/peer.js'

const libfaketime = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1'

t.test('verifiers of a wide group do not stall hellos', async (t) => {
  t.ok(existsSync(libfaketime), `${libfaketime} is installed (apt-get install faketime)`)
  const dir = tempDir(t)
  const start = async (env: NodeJS.ProcessEnv): Promise<{ port: number; stop: (signal: NodeJS.Signals) => Promise<void> }> => {
    const child = spawn(process.execPath, [binPath, 'listen', '--host', '127.0.0.1', '--port', '0', '--dir', dir], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env,
    })
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
    const stop = async (signal: NodeJS.Signals): Promise<void> => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal)
      await exited
    }
    t.teardown(() => stop('SIGKILL'))
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
    return { port, stop }
  }
  const fast = await start({ ...process.env, LD_PRELOAD: libfaketime, FAKETIME: '+0 x100' })
  let port = fast.port

  const groupId = '00000000001600a0'
  const runIds = Array.from({ length: 64 }, (_, i) => runIdOf(0x1600b0 + i))
  // The listener's hello deadline (10 s) runs 100x fast too: 0.1 s real, which a loaded machine can miss
  // between accepting the connection and reading the hello sent with it. Such a refusal ('no hello
  // within') is met by connecting again, a few times at most (as evidence-long-run.test.ts asks again);
  // any other refusal, or none of the 64 runs accepted, fails below.
  const openWriter = async (): Promise<Peer> => {
    for (let attempt = 1; ; attempt++) {
      const peer = await Peer.open(port)
      peer.send({ type: 'hello', protocol: 4, role: 'writer' })
      for (const [i, runId] of runIds.entries()) {
        peer.send({ type: 'run', meta: runMeta(runId, { groupId, host: 'box', requestedPath: '/data/db', path: `/data/db.${i}` }) })
      }
      const answered = (): ServerMessage | undefined => peer.messages.find((m) => m.type === 'welcome' || m.type === 'error')
      for (const by = Date.now() + 20_000; answered() === undefined && !peer.closed && Date.now() < by; )
        await new Promise((resolve) => setTimeout(resolve, 10))
      const answer = answered()
      if (answer?.type !== 'error' || attempt >= 5 || !/no hello within/.test(answer.message)) return peer
      peer.close()
    }
  }
  const writer = await openWriter()
  t.teardown(() => writer.close())
  for (let i = 0; i < 64; i++) await writer.next('run-ok', 20_000)
  const rounds = 3000
  // How far each run is recorded, from the listener's recorded messages (taken as they come).
  const recordedThrough = new Map<string, number>()
  const takeRecorded = (): void => {
    for (const m of writer.messages)
      if (m.type === 'recorded') recordedThrough.set(m.runId, Math.max(recordedThrough.get(m.runId) ?? 0, m.throughSeq))
    writer.messages.length = 0
  }
  for (let seq = 1; seq <= rounds; seq++) {
    for (const runId of runIds) writer.send({ type: 'ack', runId, fromSeq: seq, toSeq: seq })
    takeRecorded()
    await new Promise((resolve) => setTimeout(resolve, 2))
  }
  // Every ack recorded before the stop (the listener says so per run), not a fixed second.
  for (let waited = 0; runIds.some((id) => recordedThrough.get(id) !== rounds) && !writer.closed && waited < 30_000; waited += 20) {
    await new Promise((resolve) => setTimeout(resolve, 20))
    takeRecorded()
  }
  t.notOk(writer.closed, 'the writer is still served')
  // Stopped, and started again on the real clock: verify runs after the cut, on a listener that read the runs back.
  writer.close()
  await fast.stop('SIGTERM')
  port = (await start(process.env)).port

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

  const idle: number[] = []
  for (let i = 0; i < 20; i++) {
    idle.push(await rawHello())
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  t.ok(Math.max(...idle) < 1000, `hellos before the queries (the listener answers at all): worst ${Math.max(...idle)} ms`)

  /** The frames complete so far (their bodies): the welcome, then the runs reply. */
  const frameBodies = (chunks: Buffer[]): Buffer[] => {
    const bytes = Buffer.concat(chunks)
    const bodies: Buffer[] = []
    for (let at = 0; at + 4 <= bytes.length && at + 4 + bytes.readUInt32BE(at) <= bytes.length; at += 4 + bytes.readUInt32BE(at)) {
      bodies.push(bytes.subarray(at + 4, at + 4 + bytes.readUInt32BE(at)))
    }
    return bodies
  }
  /** The same frames decoded (once each reply is whole: a runs reply is megabytes). */
  const framesOf = (chunks: Buffer[]): Array<Record<string, unknown>> =>
    frameBodies(chunks).map((body) => unpack(body) as Record<string, unknown>)
  /** One round: eight verifiers query at once while hellos are timed; their frames and the hellos' latencies. */
  const round = async (): Promise<{ replyBytes: number[]; received: Buffer[][]; errors: string[]; latencies: number[] }> => {
    // Eight verifiers, each collecting its frames as raw bytes (the welcome, then the runs reply).
    const replyBytes = [0, 0, 0, 0, 0, 0, 0, 0]
    const received: Buffer[][] = replyBytes.map(() => [])
    const errors: string[] = []
    const verifiers = await Promise.all(
      replyBytes.map(async (_, i) => {
        const socket = connect({ host: '127.0.0.1', port })
        await new Promise((resolve) => socket.once('connect', resolve))
        socket.on('data', (c: Buffer) => {
          replyBytes[i]! += c.length
          received[i]!.push(c)
        })
        socket.on('error', (e) => errors.push(`verifier ${i}: ${e.message}`))
        socket.write(encodeFrame({ type: 'hello', protocol: 4, role: 'verifier' }))
        return socket
      }),
    )
    t.teardown(() => {
      for (const s of verifiers) s.destroy()
    })
    // Each verifier welcomed before the queries go out.
    for (let waited = 0; received.some((c) => frameBodies(c).length < 1) && waited < 20_000; waited += 10)
      await new Promise((resolve) => setTimeout(resolve, 10))
    const queriedAt = Date.now()
    for (const socket of verifiers) socket.write(encodeFrame({ type: 'query', host: 'box', requestedPath: '/data/db' }))
    const hellos: Promise<number>[] = []
    while (Date.now() - queriedAt < 4000) {
      hellos.push(rawHello())
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    const latencies = await Promise.all(hellos)
    for (let waited = 0; received.some((c) => frameBodies(c).length < 2) && waited < 20_000; waited += 50)
      await new Promise((resolve) => setTimeout(resolve, 50))
    return { replyBytes, received, errors, latencies }
  }
  // A machine loaded by other work can hold a hello for a moment in any round; a listener that blocks its
  // event loop to build the replies holds them in every round. So the best of up to three rounds is judged.
  const tries: Array<Awaited<ReturnType<typeof round>>> = []
  while (tries.length < 3 && (tries.length === 0 || Math.max(...tries.at(-1)!.latencies) >= 250)) tries.push(await round())
  const { replyBytes, received, errors } = tries.at(-1)!
  t.same(errors, [], 'no verifier connection failed')
  // The reply carries every run, at most maxInlineSpans spans inline over all of them; the other runs come without spans, to be paged.
  for (const [i, chunks] of received.entries()) {
    const reply = framesOf(chunks)[1] as { type: string; runs: Array<{ spans: unknown[]; ackedThroughSeq: number }> } | undefined
    t.equal(reply?.type, 'runs', `verifier ${i} got its reply (${replyBytes[i]} bytes)`)
    const runs = reply?.runs ?? []
    t.equal(runs.length, 64, 'every run of the group')
    t.ok(
      runs.every((r) => r.ackedThroughSeq === rounds),
      'each acknowledged through the last round',
    )
    const inline = runs.reduce((n, r) => n + r.spans.length, 0)
    t.ok(inline <= maxInlineSpans, `${inline} spans inline, at most ${maxInlineSpans} in one reply`)
    t.ok(
      runs.some((r) => r.spans.length === 0),
      'the others are left to pages',
    )
  }
  const worsts = tries.map((r) => Math.max(...r.latencies))
  t.ok(
    Math.min(...worsts) < 250,
    `every hello answered within 250 ms while the group's replies were built, in one of ${tries.length} rounds (worst per round: ${worsts.join(', ')} ms)`,
  )
})
