/**
 * A run's spans in the listener (SpanTable, 24 bytes a span) and the pages a protocol 4 verifier
 * reads them in. The table is checked against the array-of-spans rule it replaced (an oracle kept
 * here: merge within 100 ms of a span's first ack, halve pairwise past the cap) on seeded random acks;
 * pages against the spans they come from: contiguous, cut at afterSeq and throughSeq with their
 * windows, at most maxSpansPerPage. Over TCP: a long run's spans are left out of a protocol 4 runs
 * reply and paged; a protocol 3 verifier still gets them whole; bad requests are refused.
 */
import t from 'tap'
import { join } from 'node:path'
import { SpanTable } from '../../../../src/store/span-table.js'
import { Listener } from '../../../../src/server/listen/listener.js'
import { maxSpanPagesPerConnection } from '../../../../src/server/listen/listener-options.js'
import { readSpanPage } from '../../../../src/protocol/span-page.js'
import { maxInlineSpans, maxSpansPerPage, protocolVersion, type AckSpan, type ServerMessage } from '../../../../src/protocol/messages.js'
import { craftLongRun, seqsPerSpan } from '../../../fixtures/long-run-store.js'
import { runInProcess, tempDir } from '../../../fixtures/cli.js'
import { seededRandom } from '../../../fixtures/lab/seeded.js'
import { Peer } from '../../../fixtures/peer.js'

/** The rule SpanTable replaced, on arrays: the oracle. */
function oracleAdd(spans: AckSpan[], fromSeq: number, toSeq: number, firstMs: number, lastMs: number, maxSpans: number): void {
  const last = spans.at(-1)
  if (last !== undefined && last[1] + 1 === fromSeq && lastMs - last[2] <= 100) {
    last[1] = toSeq
    last[3] = Math.max(last[3], lastMs)
    return
  }
  spans.push([fromSeq, toSeq, firstMs, lastMs])
  if (spans.length <= maxSpans) return
  let out = 0
  for (let i = 0; i < spans.length; i += 2) {
    const a = spans[i]!
    const b = spans[i + 1]
    spans[out++] = b === undefined ? a : [a[0], b[1], Math.min(a[2], b[2]), Math.max(a[3], b[3])]
  }
  spans.length = out
}

/** Decodes a page that follows afterSeq (checked as verify checks it). */
function decode(page: Uint8Array, afterSeq: number, throughSeq: number, announcedMs: number): AckSpan[] {
  const spans: AckSpan[] = []
  const result = readSpanPage(page, afterSeq, throughSeq, announcedMs, (from, to, first, last) => spans.push([from, to, first, last]))
  if ('problem' in result) throw new Error(result.problem)
  return spans
}

t.test('SpanTable keeps exactly the spans the array rule kept, in 24 bytes a span', async (t) => {
  const random = seededRandom(15)
  for (const maxSpans of [2, 3, 64, 1000]) {
    const table = new SpanTable()
    const oracle: AckSpan[] = []
    let seq = 0
    let atMs = 1_700_000_000_000
    for (let i = 0; i < 5000; i++) {
      const count = 1 + Math.floor(random() * 50)
      atMs += Math.floor(random() * 250) // some within the 100 ms window, some not
      const lastMs = atMs + Math.floor(random() * 3)
      table.add(seq + 1, seq + count, atMs, lastMs, maxSpans)
      oracleAdd(oracle, seq + 1, seq + count, atMs, lastMs, maxSpans)
      seq += count
    }
    t.same(table.toArray(), oracle, `cap ${maxSpans}: the same ${oracle.length} spans`)
    t.equal(table.throughSeq, seq)
    t.equal(table.lastAckMs, oracle.at(-1)![3])
  }
  t.throws(() => new SpanTable().add(2, 3, 1, 1, 10), /does not follow seq 0/, 'seqs must follow each other')
})

t.test('pages: contiguous, cut at afterSeq and throughSeq with their windows, at most maxCount spans', async (t) => {
  const table = new SpanTable()
  const announcedMs = 1_700_000_000_000
  for (let i = 0; i < 1000; i++) table.add(i * 10 + 1, i * 10 + 10, announcedMs + i * 200, announcedMs + i * 200 + 5, 100_000)
  const spans = table.toArray()
  // Every (afterSeq, throughSeq, maxCount) read as verify reads: page after page until throughSeq.
  const cases: Array<[afterSeq: number, throughSeq: number, maxCount: number]> = [
    [0, 10_000, 64],
    [0, 10_000, 100_000],
    [4, 9_997, 7],
    [15, 16, 1],
    [9_999, 10_000, 3],
  ]
  for (const [afterSeq, throughSeq, maxCount] of cases) {
    const read: AckSpan[] = []
    let through: number = afterSeq
    while (through < throughSeq) {
      const page = table.page(through, throughSeq, maxCount)
      t.ok(page.length / 24 <= maxCount, 'at most maxCount spans')
      read.push(...decode(page, through, throughSeq, announcedMs))
      through = read.at(-1)![1]
    }
    const expected = spans
      .filter((s) => s[1] > afterSeq && s[0] <= throughSeq)
      .map((s): AckSpan => [Math.max(s[0], afterSeq + 1), Math.min(s[1], throughSeq), s[2], s[3]])
    t.same(read, expected, `after ${afterSeq} through ${throughSeq}, ${maxCount} a page`)
  }
  t.equal(table.page(10_000, 10_000, 10).length, 0, 'nothing after the last seq')
})

t.test('over TCP: a long run is paged to a protocol 4 verifier, whole to a protocol 3 one; bad requests are refused', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'data')
  const spans = 2 * maxSpansPerPage + 100
  const long = craftLongRun({ dir, file, methods: ['fdatasync'], spansPerRun: spans })
  const [meta] = long.metas
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir })
  t.teardown(() => listener.close())
  const port = listener.address().port
  const open = async (protocol: number, role: 'verifier' | 'writer' = 'verifier'): Promise<Peer> => {
    const peer = await Peer.open(port)
    peer.send({ type: 'hello', protocol, role })
    await peer.next('welcome')
    return peer
  }

  const verifier = await open(protocolVersion)
  verifier.send({ type: 'query', host: meta!.host, requestedPath: file })
  const reply = (await verifier.next('runs')) as Extract<ServerMessage, { type: 'runs' }>
  t.match(
    reply.runs[0],
    { spans: [], ackedThroughSeq: long.throughSeq },
    `more than ${maxInlineSpans} spans: left out, ackedThroughSeq says how far they go`,
  )
  const read: AckSpan[] = []
  let pages = 0
  for (let afterSeq = 0; afterSeq < long.throughSeq; afterSeq = read.at(-1)![1]) {
    verifier.send({ type: 'spans', runId: meta!.runId, afterSeq, throughSeq: long.throughSeq })
    const page = (await verifier.next('span-page')) as Extract<ServerMessage, { type: 'span-page' }>
    t.match(page, { runId: meta!.runId, afterSeq })
    read.push(...decode(page.spans, afterSeq, long.throughSeq, long.announcedMs))
    pages++
  }
  t.equal(pages, 3, `${spans} spans in 3 pages of at most ${maxSpansPerPage}`)
  t.equal(read.length, spans)
  t.ok(
    read.every(([from, to, first, last]) => to - from + 1 === seqsPerSpan && first === long.ackedMs(from) && last === first),
    'every span as stored',
  )

  verifier.send({ type: 'spans', runId: meta!.runId, afterSeq: 0, throughSeq: long.throughSeq + 1 })
  t.match(await verifier.next('error'), {
    code: 'bad-frame',
    message: new RegExp(`through seq ${long.throughSeq + 1}, but its acks go to seq ${long.throughSeq}`),
  })
  const stranger = await open(protocolVersion)
  stranger.send({ type: 'spans', runId: '00000000000000aa', afterSeq: 0, throughSeq: 5 })
  t.match(await stranger.next('error'), { code: 'unknown-run' })
  const writer = await open(protocolVersion, 'writer')
  writer.send({ type: 'spans', runId: meta!.runId, afterSeq: 0, throughSeq: 5 })
  t.match(await writer.next('error'), { code: 'out-of-order', message: /spans asked on a writer connection/ })
  t.ok(
    maxSpanPagesPerConnection >= Math.ceil((7 * 24 * 36_000) / maxSpansPerPage) * 64,
    'a connection may read every page of a group of 64 week-long runs',
  )

  const old = await open(3)
  old.send({ type: 'query', host: meta!.host, requestedPath: file })
  const whole = (await old.next('runs', 20_000)) as Extract<ServerMessage, { type: 'runs' }>
  t.equal(whole.runs[0]!.spans.length, spans, 'protocol 3: every span in the reply, as before')
  t.same(whole.runs[0]!.spans, read, 'the same spans as the pages')
  for (const peer of [verifier, stranger, writer, old]) peer.close()
})

t.test('verify --acks reads a long run from the directory page by page too', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'data')
  const spans = maxInlineSpans + 1000
  const lostSeq = spans * seqsPerSpan - 3000
  const long = craftLongRun({ dir, file, methods: ['fdatasync'], spansPerRun: spans, slotCount: 4000, lostSeqs: new Set([lostSeq]) })
  const result = await runInProcess(['verify', '--acks', dir, '--file', file, '--json'])
  t.equal(result.code, 1, result.stderr)
  const run = JSON.parse(result.stdout).runs[0]
  t.match(run, { acked: long.throughSeq, lost: 1, lostRangeCount: 1 })
  t.same(
    [run.lostRanges[0].fromSeq, run.lostRanges[0].ackedFromMs, run.lostRanges[0].ackedToMs],
    [lostSeq, long.ackedMs(lostSeq), long.ackedMs(lostSeq)],
    'the lost seq with the window of its span, read from the table',
  )
})
