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
  const runs =
    (run: object, claims: object[] = [craftClaim(honest)]) =>
    () => ({ type: 'runs', runs: [run], claims })

  const refused: Array<[string, () => object | Buffer, RegExp]> = [
    ['an ack span 1..2^53', runs({ ...honest, spans: [[1, 2 ** 53, honest.announcedMs + 1, honest.announcedMs + 2]] }), /sent a bad frame/],
    [
      'a span not starting at seq 1',
      runs({ ...honest, spans: [[5, 10, honest.announcedMs + 1, honest.announcedMs + 2]] }),
      /sent a bad frame: invalid message at runs\.0\.spans\.0: span starts at seq 5/,
    ],
    [
      'seqs no writer can have written (5e15, acknowledged in 2199)',
      runs({ ...honest, spans: [[1, 5e15, honest.announcedMs + 1, year2199Ms]] }),
      /the listener sent seq 5000000000000000 for run 9000000000000001, more than any writer can have written/,
    ],
    [
      'an overwrite run of 2^40 slots',
      runs({ ...honest, meta: { ...meta, pattern: 'overwrite', slotCount: 2 ** 40 } }),
      /sent a bad frame: invalid message at runs\.0\.meta\.slotCount/,
    ],
    [
      '65 claims',
      runs(
        honest,
        Array.from({ length: 65 }, () => craftClaim(honest)),
      ),
      /sent a bad frame: invalid message at claims/,
    ],
    [
      'a run of another path',
      runs({ ...honest, meta: { ...meta, requestedPath: '/elsewhere', path: '/elsewhere' } }),
      /sent run 9000000000000001 \(.*:\/elsewhere\), which is not the latest run/,
    ],
    ['an HTTP reply', () => Buffer.from('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n'), /the listener at .* sent a bad frame/],
    ['a frame that is not msgpack', () => Buffer.from([0, 0, 0, 2, 0xc1, 0xc1]), /sent a bad frame: frame is not valid msgpack/],
    [
      'a frame nested 100,000 maps deep',
      () => rawFrame(Buffer.concat([Buffer.alloc(100_000 * 3, Buffer.from([0x81, 0xa1, 0x61])), Buffer.from([1])])),
      /sent a bad frame/,
    ],
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
    const wide = {
      ...honest,
      meta: { ...meta, pattern: 'overwrite' as const, slotCount: 2 ** 20 },
      spans: [[1, 1e12, honest.announcedMs + 1, year2199Ms]],
    }
    const server = await fakeListener(t, runs(wide))
    const disagreed = await runCli(['verify', '--server', server, '--file', file], 60_000)
    t.equal(disagreed.code, 3)
    t.match(
      disagreed.stderr,
      'pattern is "overwrite" at the listener, "append" in the file; slotCount is 1048576 at the listener, 1000 in the file',
    )
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
  const slow = await runCli(
    ['verify', '--server', `127.0.0.1:${(silent.address() as AddressInfo).port}`, '--file', file, '--listener-timeout', '0.5'],
    60_000,
  )
  t.equal(slow.code, 3)
  t.match(slow.stderr, /did not answer within 0\.5 s/)
  t.ok(Date.now() - started < 20_000, '--listener-timeout bounds the wait')
})

/** A span-page's bytes as the wire defines them: toSeq, firstAckMs, lastAckMs of each span, little-endian doubles. */
function pageBytes(spans: ReadonlyArray<readonly [number, number, number]>): Buffer {
  const bytes = Buffer.alloc(spans.length * 24)
  spans.forEach((span, i) => {
    span.forEach((value, j) => {
      bytes.writeDoubleLE(value, i * 24 + j * 8)
    })
  })
  return bytes
}

/**
 * A long run's spans come page by page (protocol 4: the runs reply leaves them out, ackedThroughSeq
 * says how far they go). Verify reads them only for the windows of lost ranges, and checks every span
 * of every page: anything a listener cannot have recorded is a one-line error (exit 3), never a verdict.
 */
t.test("a long run's span pages from a hostile listener", async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'data')
  const meta = craftMeta('9000000000000001', file)
  writeDataFile(meta, range(1, 8), { sizeSlots: 10 }) // seqs 9 and 10 lost
  const pagedThrough = (throughSeq: number) => () => ({
    type: 'runs',
    runs: [{ ...craftRun(meta, throughSeq), spans: [], ackedThroughSeq: throughSeq }],
    claims: [craftClaim(craftRun(meta, throughSeq))],
  })
  const runs = pagedThrough(10)
  const paged = craftRun(meta, 10)
  const at = paged.announcedMs
  const page = (afterSeq: number, spans: Array<[number, number, number]>, runId = meta.runId) => ({
    type: 'span-page',
    runId,
    afterSeq,
    spans: pageBytes(spans),
  })

  /** Pages as a listener serves them from its spans: from the one holding afterSeq + 1, cut there; the seqs asked for recorded. */
  const servedFrom = (spans: Array<[number, number, number]>, asked: number[]) => (r: { afterSeq: number }) => {
    asked.push(r.afterSeq)
    return page(
      r.afterSeq,
      spans.filter(([toSeq]) => toSeq > r.afterSeq),
    )
  }

  await t.test('honest pages: the verdict, with the window of each lost range, read from the first lost seq on', async (t) => {
    for (const [name, spans, window] of [
      ['one span', [[10, at + 1000, at + 2000]], [at + 1000, at + 2000]],
      [
        'three spans',
        [
          [4, at + 1000, at + 1100],
          [8, at + 1200, at + 1300],
          [10, at + 1500, at + 1600],
        ],
        [at + 1500, at + 1600],
      ],
    ] as Array<[string, Array<[number, number, number]>, number[]]>) {
      const asked: number[] = []
      const server = await fakeListener(t, runs, servedFrom(spans, asked))
      const result = await runCli(['verify', '--server', server, '--file', file, '--json'], 60_000)
      t.equal(result.code, 1, `${name}: ${result.stderr}`)
      t.same(asked, [8], `${name}: one page, after seq 8 (seqs 9-10 were lost)`)
      const run = JSON.parse(result.stdout).runs[0]
      t.match(run, { acked: 10, intact: 8, lost: 2, lostRangeCount: 1 }, name)
      t.same(
        [run.lostRanges[0].fromSeq, run.lostRanges[0].toSeq, run.lostRanges[0].ackedFromMs, run.lostRanges[0].ackedToMs],
        [9, 10, ...window],
        `${name}: the window of seqs 9-10`,
      )
    }
  })

  const refused: Array<[string, (r: { afterSeq: number }) => object | Buffer | null, RegExp, number?]> = [
    [
      'a span acknowledged before its run was announced',
      (r) => page(r.afterSeq, [[10, at - 120_000, at]]),
      /sent bad spans of run 9000000000000001: span acknowledged before its run was announced/,
    ],
    [
      'a span past the last acknowledged seq',
      (r) => page(r.afterSeq, [[11, at + 1000, at + 2000]]),
      /sent bad spans of run 9000000000000001: span 9-11 goes past seq 10, the last acknowledged/,
    ],
    [
      'a span that runs backwards',
      (r) =>
        page(r.afterSeq, [
          [9, at + 1000, at + 1100],
          [8, at + 1200, at + 1300],
        ]),
      /sent bad spans of run 9000000000000001: span 10-8 runs backwards/,
    ],
    ['times that are not real', (r) => page(r.afterSeq, [[10, Number.NaN, at]]), /span 9-10 was acknowledged at no real time/],
    [
      'seqs no writer can have written by then',
      (r) => page(r.afterSeq, [[5_000_000, at + 1000, at + 1000]]),
      /sent bad spans of run 9000000000000001: seq 5000000 is more than a writer can have written by then/,
      5_000_000,
    ],
    [
      'an empty page',
      (r) => page(r.afterSeq, []),
      /sent bad spans of run 9000000000000001: no spans after seq 8, although the acks go to seq 10/,
    ],
    // A listener fills every page but the last: one that drips a seq a page could keep verify reading for ever.
    [
      'a short page before the last seq',
      (r) => page(r.afterSeq, [[r.afterSeq + 1, at + 1000, at + 1000]]),
      /sent bad spans of run 9000000000000001: a page of 1 spans stops at seq 9, before seq 10, the last acknowledged/,
    ],
    [
      'a page after another seq than asked',
      () => page(3, [[10, at + 1000, at + 2000]]),
      /sent spans of run 9000000000000001 after seq 3, asked for run 9000000000000001 after seq 8/,
    ],
    [
      'a page of another run',
      (r) => page(r.afterSeq, [[10, at + 1000, at + 2000]], '9000000000000002'),
      /sent spans of run 9000000000000002 after seq 8, asked for run 9000000000000001/,
    ],
    [
      'a page that is not whole spans',
      () => ({ type: 'span-page', runId: meta.runId, afterSeq: 0, spans: Buffer.alloc(25) }),
      /sent a bad frame: invalid message at spans: not whole spans/,
    ],
  ]
  for (const [name, answer, message, throughSeq] of refused) {
    await t.test(name, async (t) => {
      const server = await fakeListener(t, pagedThrough(throughSeq ?? 10), answer)
      const result = await runCli(['verify', '--server', server, '--file', file], 60_000)
      t.equal(result.code, 3, 'exit 3')
      t.match(result.stderr, message)
      t.equal(result.stderr.trim().split('\n').length, 1, 'one line')
      t.notMatch(result.stderr, /internal error|\n\s+at /)
      t.equal(result.stdout, '')
    })
  }

  await t.test('no page in answer: --listener-timeout bounds the wait', async (t) => {
    const server = await fakeListener(t, runs, () => null)
    const result = await runCli(['verify', '--server', server, '--file', file, '--listener-timeout', '0.5'], 60_000)
    t.equal(result.code, 3)
    t.match(result.stderr, /did not answer within 0\.5 s/)
  })

  await t.test('spans that end elsewhere than ackedThroughSeq says: a bad frame', async (t) => {
    const server = await fakeListener(t, () => ({
      type: 'runs',
      runs: [{ ...craftRun(meta, 10), ackedThroughSeq: 12 }],
      claims: [craftClaim(craftRun(meta, 10))],
    }))
    const result = await runCli(['verify', '--server', server, '--file', file], 60_000)
    t.equal(result.code, 3)
    t.match(result.stderr, /sent a bad frame: invalid message at runs\.0\.ackedThroughSeq: the spans end at seq 10, not 12/)
  })
})
