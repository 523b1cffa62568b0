/**
 * A run's spans stay within the cap (maxStoredSpans, what a reply may carry; lowered here): past it,
 * neighbouring spans are merged, at replay and while the run is live. The seqs covered stay exact, so
 * verify judges a run with more log entries than the cap exactly (no exit 3 for an oversized reply),
 * and a merged span's time window still holds the real ack times of its seqs.
 */
import { performance } from 'node:perf_hooks'
import t, { type Test } from 'tap'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Packr } from 'msgpackr'
import { Listener } from '../../../../src/server/listen/listener.js'
import { AckStore, frameLogEntry } from '../../../../src/store/ack-store.js'
import { storedRunSchema, type AckSpan } from '../../../../src/protocol/messages.js'
import { craftMeta, range, writeDataFile } from '../../../fixtures/crafted-run.js'
import { runInProcess, tempDir } from '../../../fixtures/cli.js'
import { Peer, runIdOf, runMeta } from '../../../fixtures/peer.js'

const entry = frameLogEntry
const packr = new Packr({ useRecords: false, int64AsType: 'number', mapsAsObjects: true })

const entries = 1000
const cap = 64
const gapMs = 200 // more than spanWindowMs: each entry its own span before merging
const slackMs = gapMs / 4

/** A listener directory with one run whose log holds one entry per seq 1..entries, 200 ms apart. */
function craftStore(dir: string, file: string): { meta: ReturnType<typeof craftMeta>; announcedMs: number } {
  const announcedMs = Date.now() - 3_600_000
  const meta = craftMeta(runIdOf(0xc1), file, { slotCount: 2000, createdMs: announcedMs })
  const runDir = join(dir, 'runs', meta.runId)
  mkdirSync(runDir, { recursive: true })
  const log = range(1, entries).map((seq) =>
    entry({ k: 'ack', fromSeq: seq, toSeq: seq, firstMs: announcedMs + seq * gapMs, lastMs: announcedMs + seq * gapMs }),
  )
  writeFileSync(
    join(runDir, 'acks.log'),
    Buffer.concat([...log, entry({ k: 'end', reason: 'duration', atMs: announcedMs + (entries + 1) * gapMs })]),
  )
  writeFileSync(join(runDir, 'meta.msgpack'), packr.pack({ meta, announcedMs, announceIndex: 1, peer: '127.0.0.1' }))
  return { meta, announcedMs }
}

/** Every seq once, in order, and each seq's real ack time inside its span's window. */
function checkSpans(t: Test, spans: readonly AckSpan[], through: number, timeOf: (seq: number) => number): void {
  t.ok(spans.length <= cap && spans.length > 1, `${spans.length} spans, within the cap of ${cap}`)
  let expected = 1
  let windowsHold = true
  for (const [from, to, firstMs, lastMs] of spans) {
    if (from !== expected) break
    // A quarter of the gap of slack: ack stamps follow the monotonic clock from the announcement, whose
    // pairing with the wall clock is read twice (here and in the listener), each by two calls a loaded
    // machine can preempt between. A window off by one ack would be off by a whole gap.
    if (timeOf(from) < firstMs - slackMs || timeOf(to) > lastMs + slackMs) windowsHold = false
    expected = to + 1
  }
  t.equal(expected, through + 1, `seqs 1-${through} covered exactly, contiguous`)
  t.ok(windowsHold, 'each span window holds the ack times of its seqs')
}

t.test('a replayed log with more entries than the cap: spans merged, seqs exact, verify judges exactly', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'data')
  const { meta, announcedMs } = craftStore(dir, file)
  const store = await AckStore.load(dir, { maxSpans: cap })
  const [run] = store.query(meta.host, file)
  checkSpans(t, run!.spans, entries, (seq) => announcedMs + seq * gapMs)
  t.ok(storedRunSchema.safeParse(run).success, 'the stored run is a valid reply')
  t.same(store.warnings, [])

  // Seqs 500, 501 and 777 lost; verify over TCP against a listener with the lowered cap.
  writeDataFile(
    meta,
    range(1, entries).filter((seq) => seq !== 500 && seq !== 501 && seq !== 777),
    { sizeSlots: entries },
  )
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir, maxStoredSpans: cap })
  t.teardown(() => listener.close())
  const verify = await runInProcess(['verify', '--server', `127.0.0.1:${listener.address().port}`, '--file', file, '--json'])
  t.equal(verify.code, 1, verify.stderr)
  const report = JSON.parse(verify.stdout)
  t.match(report.runs[0], { verdict: 'fail', acked: entries, lost: 3, lostRangeCount: 2 })
  t.match(report.runs[0].lostRanges, [
    { fromSeq: 500, toSeq: 501, count: 2 },
    { fromSeq: 777, toSeq: 777, count: 1 },
  ])
})

t.test('a live run past the cap: spans merged as acks arrive, the reply stays valid', async (t) => {
  const dir = tempDir(t)
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir, maxStoredSpans: cap })
  t.teardown(() => listener.close())
  const runId = runIdOf(0xc2)
  const writer = await Peer.writer(listener.address().port, runMeta(runId))
  const realNow = Date.now
  const realPerfNow = performance.now.bind(performance)
  const startMs = realNow()
  const startPerfMs = realPerfNow()
  let step = 0
  // The listener's clocks (wall and monotonic: ack stamps follow the monotonic one) advance 200 ms between acks.
  Date.now = () => startMs + step * gapMs
  performance.now = () => startPerfMs + step * gapMs
  t.teardown(() => {
    Date.now = realNow
    performance.now = realPerfNow
  })
  const acks = 300
  try {
    for (let seq = 1; seq <= acks; seq++) {
      step = seq
      writer.send({ type: 'ack', runId, fromSeq: seq, toSeq: seq })
      let recorded = 0
      while (recorded < seq) recorded = ((await writer.next('recorded')) as { throughSeq: number }).throughSeq
    }
  } finally {
    Date.now = realNow
    performance.now = realPerfNow
  }
  const verifier = await Peer.open(listener.address().port)
  verifier.send({ type: 'hello', protocol: 2, role: 'verifier' })
  verifier.send({ type: 'query', host: 'testhost', requestedPath: `/data/${runId}` })
  const reply = (await verifier.next('runs')) as { runs: Array<{ spans: AckSpan[] }> }
  checkSpans(t, reply.runs[0]!.spans, acks, (seq) => startMs + seq * gapMs)
  verifier.close()
  writer.close()
})
