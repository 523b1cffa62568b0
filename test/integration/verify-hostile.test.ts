/**
 * A hostile listener: verify must turn absurd or malformed answers into a one-line error (exit 3) or
 * a correct verdict, in bounded time (each verify runs as a child killed after 60 s), never a hang,
 * a crash or a stack trace.
 */
import t from 'tap'
import { join } from 'node:path'
import { craftClaim, craftMeta, craftRun, fakeListener, range, writeDataFile } from '../fixtures/crafted-run.js'
import { createServer as createHttpServer } from 'node:http'
import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net'
import { runCli, startListener, tempDir } from '../fixtures/cli.js'

const year2199Ms = 7_226_582_400_000

/** A length-prefixed frame around raw msgpack bytes. */
function rawFrame(body: Buffer): Buffer {
  const header = Buffer.alloc(4)
  header.writeUInt32BE(body.length)
  return Buffer.concat([header, body])
}

t.test('absurd answers from a listener', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'data')
  const meta = craftMeta('9000000000000001', file)
  writeDataFile(meta, range(1, 10), { sizeSlots: 10 })
  const honest = craftRun(meta, 10)
  const runs = (run: object, claims: object[] = [craftClaim(honest)]) => () => ({ type: 'runs', runs: [run], claims })

  const refused: Array<[string, () => object | Buffer, RegExp]> = [
    ['an ack span 1..2^53', runs({ ...honest, spans: [[1, 2 ** 53, honest.announcedMs + 1, honest.announcedMs + 2]] }), /sent a bad frame/],
    ['a span not starting at seq 1', runs({ ...honest, spans: [[5, 10, honest.announcedMs + 1, honest.announcedMs + 2]] }), /sent a bad frame: invalid message at runs\.0\.spans\.0: span starts at seq 5/],
    ['seqs no writer can have written (5e15, acknowledged in 2199)', runs({ ...honest, spans: [[1, 5e15, honest.announcedMs + 1, year2199Ms]] }), /the listener sent seq 5000000000000000 for run 9000000000000001, more than any writer can have written/],
    ['an overwrite run of 2^40 slots', runs({ ...honest, meta: { ...meta, pattern: 'overwrite', slotCount: 2 ** 40 } }), /sent a bad frame: invalid message at runs\.0\.meta\.slotCount/],
    ['65 claims', runs(honest, Array.from({ length: 65 }, () => craftClaim(honest))), /sent a bad frame: invalid message at claims/],
    ['a run of another path', runs({ ...honest, meta: { ...meta, requestedPath: '/elsewhere', path: '/elsewhere' } }), /sent run 9000000000000001 \(.*:\/elsewhere\), which is not the latest run/],
    ['an HTTP reply', () => Buffer.from('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n'), /the listener at .* sent a bad frame/],
    ['a frame that is not msgpack', () => Buffer.from([0, 0, 0, 2, 0xc1, 0xc1]), /sent a bad frame: frame is not valid msgpack/],
    ['a frame nested 100,000 maps deep', () => rawFrame(Buffer.concat([Buffer.alloc(100_000 * 3, Buffer.from([0x81, 0xa1, 0x61])), Buffer.from([1])])), /sent a bad frame/],
  ]
  for (const [name, answer, message] of refused) {
    await t.test(name, async (t) => {
      const server = await fakeListener(t, answer)
      const result = await runCli(['verify', '--server', server, '--file', file], 60_000)
      t.equal(result.code, 3, 'exit 3')
      t.match(result.stderr, message)
      t.equal(result.stderr.trim().split('\n').length, 1, 'one line')
      t.notMatch(result.stderr, /internal error|\n\s+at /)
      t.equal(result.stdout, '')
    })
  }

  await t.test('append with 2^40 slots acknowledged through 2^44: a verdict, counted as ranges', async (t) => {
    const huge = { ...honest, meta: { ...meta, slotCount: 2 ** 40 }, spans: [[1, 2 ** 44, honest.announcedMs + 1, year2199Ms]] }
    const server = await fakeListener(t, runs(huge))
    // The file's superblock says 1000 slots: the listener's 2^40 is named, not judged.
    const disagreed = await runCli(['verify', '--server', server, '--file', file], 60_000)
    t.equal(disagreed.code, 3)
    t.match(disagreed.stderr, `slotCount is ${2 ** 40} at the listener, 1000 in the file`)
    // A file whose superblock says 2^40 too (records 1-10 in slots 0-9): judged.
    writeDataFile(huge.meta, range(1, 10), { sizeSlots: 10 })
    t.teardown(() => writeDataFile(meta, range(1, 10), { sizeSlots: 10 }))
    const result = await runCli(['verify', '--server', server, '--file', file, '--json'], 60_000)
    t.equal(result.code, 1)
    const run = JSON.parse(result.stdout).runs[0]
    // The last 2^40 seqs are judged; slot s holds seq 2^44 - 2^40 + s + 1. Only slots 0-9 are in the file, and they hold seqs 1-10.
    t.match(run, { acked: 2 ** 44, superseded: 2 ** 44 - 2 ** 40, lost: 2 ** 40, intact: 0, lostRangeCount: 2 })
    t.equal(run.lostRanges[0].count + run.lostRanges[1].count, 2 ** 40)
  })

  await t.test('overwrite with 2^20 slots acknowledged through 10^12: a verdict in bounded time', async (t) => {
    const wide = { ...honest, meta: { ...meta, pattern: 'overwrite' as const, slotCount: 2 ** 20 }, spans: [[1, 1e12, honest.announcedMs + 1, year2199Ms]] }
    const server = await fakeListener(t, runs(wide))
    const disagreed = await runCli(['verify', '--server', server, '--file', file], 60_000)
    t.equal(disagreed.code, 3)
    t.match(disagreed.stderr, 'pattern is "overwrite" at the listener, "append" in the file; slotCount is 1048576 at the listener, 1000 in the file')
    // A file whose superblock agrees (and holds no records): judged.
    writeDataFile(wide.meta, [], { sizeSlots: 10 })
    t.teardown(() => writeDataFile(meta, range(1, 10), { sizeSlots: 10 }))
    const result = await runCli(['verify', '--server', server, '--file', file, '--json'], 60_000)
    t.equal(result.code, 1)
    const run = JSON.parse(result.stdout).runs[0]
    t.match(run, { acked: 1e12, superseded: 1e12 - 2 ** 20, intact: 0 })
    t.equal(run.lost + run.corrupt + run.torn, 2 ** 20, 'every slot judged once')
    t.equal(run.lostRanges.length, Math.min(1000, run.lostRangeCount))
  })
})

t.test('verify names a stranger on the port and maps refusals to their exit codes', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'data')
  const http = createHttpServer((_request, response) => response.writeHead(400).end())
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    http.closeAllConnections()
    return new Promise((resolve) => http.close(resolve))
  })
  const stranger = await runCli(['verify', '--server', `127.0.0.1:${(http.address() as AddressInfo).port}`, '--file', file], 60_000)
  t.equal(stranger.code, 3)
  t.match(stranger.stderr, /the peer at 127\.0\.0\.1:\d+ is not a plugcheck listener \(it sent "HTTP\/1\.1 400 Bad Request"\)/)
  t.notMatch(stranger.stderr, /exceeds the/)

  const listener = await startListener(join(dir, 'listener'), ['--token', 'right'])
  t.teardown(() => listener.kill())
  const wrong = await runCli(['verify', '--server', listener.server, '--file', file, '--token', 'wrong'], 60_000)
  t.equal(wrong.code, 2, 'a wrong token is a configuration error')
  t.match(wrong.stderr, /refused: wrong or missing token/)
  const missing = await runCli(['verify', '--server', listener.server, '--file', file], 60_000)
  t.equal(missing.code, 2, 'a missing token too')
  const right = await runCli(['verify', '--server', listener.server, '--file', file, '--token', 'right'], 60_000)
  t.equal(right.code, 2, 'with the right token: no run found')
  t.match(right.stderr, /no run found/)

  const held = new Set<Socket>()
  const silent = createNetServer((socket) => void held.add(socket.on('error', () => undefined)))
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    for (const socket of held) socket.destroy()
    return new Promise((resolve) => silent.close(resolve))
  })
  const started = Date.now()
  const slow = await runCli(['verify', '--server', `127.0.0.1:${(silent.address() as AddressInfo).port}`, '--file', file, '--listener-timeout', '0.5'], 60_000)
  t.equal(slow.code, 3)
  t.match(slow.stderr, /did not answer within 0\.5 s/)
  t.ok(Date.now() - started < 20_000, '--listener-timeout bounds the wait')
})
