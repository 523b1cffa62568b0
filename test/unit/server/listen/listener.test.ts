/**
 * The listener against bad peers, over real TCP on 127.0.0.1: garbage, oversized and out-of-order
 * frames each get an error reply naming the problem and a closed connection, while another client's
 * run goes on and nothing stored is harmed.
 */
import t from 'tap'
import { join } from 'node:path'
import { Listener } from '../../../../src/server/listen/listener.js'
import { AckStore } from '../../../../src/store/ack-store.js'
import { tempDir } from '../../../fixtures/cli.js'
import { Peer, runMeta } from '../../../fixtures/peer.js'

const meta = (runId: string) => runMeta(runId)

t.test('bad frames are refused, the good client is unaffected', async (t) => {
  const dir = tempDir(t)
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir })
  t.teardown(() => listener.close())
  const port = listener.address().port

  const good = await Peer.open(port)
  good.send({ type: 'hello', protocol: 2, role: 'writer' })
  await good.next('welcome')
  good.send({ type: 'run', meta: meta('00000000000000aa') })
  await good.next('run-ok')
  good.send({ type: 'ack', runId: '00000000000000aa', fromSeq: 1, toSeq: 10 })

  const cases: Array<[string, (p: Peer) => void, string, RegExp]> = [
    ['garbage bytes', (p) => p.socket.write(Buffer.from([0, 0, 0, 3, 0xc1, 0xc1, 0xc1])), 'bad-frame', /not valid msgpack/],
    ['an oversized frame', (p) => p.socket.write(Buffer.from([0x10, 0, 0, 0])), 'too-large', /exceeds the 65536-byte limit/],
    ['a frame the schema rejects', (p) => p.send({ type: 'ack', runId: 'nothex', fromSeq: -1 }), 'bad-frame', /invalid message/],
    [
      'an ack before hello',
      (p) => p.send({ type: 'ack', runId: '00000000000000aa', fromSeq: 11, toSeq: 11 }),
      'out-of-order',
      /ack before hello/,
    ],
    [
      "an ack for another connection's run",
      (p) => {
        p.send({ type: 'hello', protocol: 2, role: 'writer' })
        p.send({ type: 'ack', runId: '00000000000000aa', fromSeq: 11, toSeq: 11 })
      },
      'unknown-run',
      /did not announce/,
    ],
    [
      'acks out of order',
      (p) => {
        p.send({ type: 'hello', protocol: 2, role: 'writer' })
        p.send({ type: 'run', meta: meta('00000000000000bb') })
        p.send({ type: 'ack', runId: '00000000000000bb', fromSeq: 1, toSeq: 5 })
        p.send({ type: 'ack', runId: '00000000000000bb', fromSeq: 3, toSeq: 3 })
      },
      'out-of-order',
      /expected seq 6 next/,
    ],
    [
      'a second announcement of a run',
      (p) => {
        p.send({ type: 'hello', protocol: 2, role: 'writer' })
        p.send({ type: 'run', meta: meta('00000000000000aa') })
      },
      'out-of-order',
      /already announced/,
    ],
    ['a wrong protocol version', (p) => p.send({ type: 'hello', protocol: 99, role: 'writer' }), 'protocol-version', /protocol 99/],
  ]
  for (const [name, misbehave, code, message] of cases) {
    const bad = await Peer.open(port)
    misbehave(bad)
    const error = await bad.next('error')
    t.match(error, { type: 'error', code, message }, `${name}: error reply`)
    t.ok(await bad.waitClosed(), `${name}: connection closed`)
  }

  // The good client carries on, in order, and its acks are durable.
  good.send({ type: 'ack', runId: '00000000000000aa', fromSeq: 11, toSeq: 20 })
  good.send({ type: 'end', runId: '00000000000000aa', reason: 'duration' })
  // Waited on the listener's replies, not a fixed time: a lost ack leaves no recorded through seq 20
  // (next() throws at its bound), a recorded beyond it would be a seq never sent.
  let recordedThrough = 0
  while (recordedThrough < 20) recordedThrough = ((await good.next('recorded', 20_000)) as { throughSeq: number }).throughSeq
  t.equal(recordedThrough, 20, 'every ack of the good client recorded')
  // The end goes with the next round, maybe one after the acks': the store read below must find it
  // on disk, so its round is waited for (bounded; a lost end then fails the match below).
  const endDeadlineMs = Date.now() + 20_000
  while (listener.store.recorded('00000000000000aa')?.ended !== true && Date.now() < endDeadlineMs)
    await new Promise((resolve) => setTimeout(resolve, 20))
  t.notOk(good.closed)
  good.socket.destroy()

  const stored = (await AckStore.load(dir)).query('testhost', '/data/00000000000000aa')
  t.match(stored, [{ meta: { runId: '00000000000000aa' }, end: { reason: 'duration' } }])
  const seqs = stored[0]!.spans.flatMap(([from, to]) => Array.from({ length: to - from + 1 }, (_, i) => from + i))
  t.same(
    seqs,
    Array.from({ length: 20 }, (_, i) => i + 1),
    'seqs 1-20 stored, each once, in order',
  )
  const other = (await AckStore.load(dir)).query('testhost', '/data/00000000000000bb')
  t.match(other[0]?.spans, [[1, 5]], 'the refused run kept only what was accepted before the bad frame')
})

t.test('a token is required when set', async (t) => {
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: tempDir(t), token: 's3cret' })
  t.teardown(() => listener.close())
  const wrong = await Peer.open(listener.address().port)
  wrong.send({ type: 'hello', protocol: 2, role: 'verifier', token: 'guess' })
  t.match(await wrong.next('error'), { code: 'unauthorized' })
  const right = await Peer.open(listener.address().port)
  right.send({ type: 'hello', protocol: 2, role: 'verifier', token: 's3cret' })
  t.match(await right.next('welcome'), { type: 'welcome' })
  right.socket.destroy()
})

t.test('a torn ack log tail is ignored at replay; everything before it is kept', async (t) => {
  const dir = tempDir(t)
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir })
  const peer = await Peer.open(listener.address().port)
  peer.send({ type: 'hello', protocol: 2, role: 'writer' })
  peer.send({ type: 'run', meta: meta('00000000000000cc') })
  await peer.next('run-ok')
  for (let seq = 1; seq <= 100; seq++) peer.send({ type: 'ack', runId: '00000000000000cc', fromSeq: seq, toSeq: seq })
  for (;;) {
    const r = (await peer.next('recorded')) as { throughSeq: number }
    if (r.throughSeq === 100) break
  }
  peer.socket.destroy()
  await listener.close()
  const { appendFileSync } = await import('node:fs')
  appendFileSync(join(dir, 'runs', '00000000000000cc', 'acks.log'), Buffer.from([40, 0, 0, 0, 1, 2, 3]))
  const store = await AckStore.load(dir)
  t.match(store.warnings, [/ignored 7 bytes of a torn ack log tail/])
  const spans = store.query('testhost', '/data/00000000000000cc')[0]!.spans
  t.equal(
    spans.reduce((n, [a, b]) => n + b - a + 1, 0),
    100,
  )
  t.equal(spans.at(-1)![1], 100)
})
