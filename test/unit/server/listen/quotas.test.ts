/**
 * Retention and quotas at announcement, over real TCP: a stranger (127.0.0.2) announcing runs until
 * the per-peer bound is refused with 'limit' naming the bound and its flag while an honest writer
 * (127.0.0.3) is still served and a live run keeps recording; total bounds on runs and bytes; the
 * free-space reserve; the writer-environment size bound; usage counted as files are written and
 * again at replay.
 */
import t from 'tap'
import { readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { Listener } from '../../../../src/server/listen/listener.js'
import { AckStore } from '../../../../src/store/ack-store.js'
import { quotaRefusal } from '../../../../src/server/listen/quotas.js'
import { peerKey } from '../../../../src/protocol/endpoint.js'
import { maxWriterEnvBytes } from '../../../../src/protocol/messages.js'
import { collectFingerprint } from '../../../../src/env/fingerprint.js'
import { nativePort } from '../../../../src/native/index.js'
import { runInProcess, tempDir } from '../../../fixtures/cli.js'
import { verdictOf } from '../../../fixtures/verdict-fixture.js'
import { Peer, bulkyFingerprint, largestFingerprint, runIdOf, runMeta } from '../../../fixtures/peer.js'

const stranger = '127.0.0.2'
const honest = '127.0.0.3'

/** Announces run n from address on a connection of its own; the listener's answer. */
async function announce(
  port: number,
  n: number,
  address: string,
  extra: object = {},
): Promise<{ peer: Peer; reply: { type: string; code?: string; message?: string } }> {
  return Peer.announce(port, runMeta(runIdOf(n)), extra, address)
}

/** Sum of the sizes of every file under runs/ (what usage().total.bytes must equal). */
function bytesOnDisk(dir: string): number {
  let bytes = 0
  for (const run of readdirSync(join(dir, 'runs')))
    for (const file of readdirSync(join(dir, 'runs', run))) bytes += statSync(join(dir, 'runs', run, file)).size
  return bytes
}

t.test('a stranger announcing runs is refused at the per-peer bound; an honest peer is served; a live run keeps recording', async (t) => {
  const lines: string[] = []
  const dir = tempDir(t)
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir, quotas: { maxRunsPerPeer: 5 }, log: (l) => lines.push(l) })
  t.teardown(() => listener.close())
  const port = listener.address().port
  // The stranger's first run stays live on its connection.
  const live = await announce(port, 1, stranger)
  t.equal(live.reply.type, 'run-ok')
  const peers = [live.peer]
  let accepted = 1
  let refusal: { type: string; code?: string; message?: string } | undefined
  for (let n = 2; n <= 20 && refusal === undefined; n++) {
    const { peer, reply } = await announce(port, n, stranger)
    peers.push(peer)
    if (reply.type === 'run-ok') accepted++
    else refusal = reply
  }
  t.equal(accepted, 5, 'exactly the bound was taken')
  t.match(refusal, {
    type: 'error',
    code: 'limit',
    message:
      /takes no new runs: it holds 5 runs from 127\.0\.0\.2, its bound per peer is 5 \(--max-runs-per-peer\); live runs keep recording/,
  })
  t.match(lines.join('\n'), /refused a run from 127\.0\.0\.2: .*--max-runs-per-peer/)

  const other = await announce(port, 100, honest)
  t.equal(other.reply.type, 'run-ok', 'another peer is served')
  peers.push(other.peer)

  live.peer.send({ type: 'ack', runId: runIdOf(1), fromSeq: 1, toSeq: 50 })
  t.match(await live.peer.next('recorded'), { throughSeq: 50 }, "the stranger's live run keeps recording past its bound")
  t.same(listener.store.usage().byPeer.get(stranger)?.runs, 5)
  for (const p of peers) p.close()
})

t.test('bounds in total: runs, then bytes; live runs grow past the byte bound', async (t) => {
  const dir = tempDir(t)
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir, quotas: { maxRuns: 3 } })
  t.teardown(() => listener.close())
  const port = listener.address().port
  const a = await announce(port, 1, stranger)
  const b = await announce(port, 2, honest)
  const c = await announce(port, 3, honest)
  t.same(
    [a, b, c].map((x) => x.reply.type),
    ['run-ok', 'run-ok', 'run-ok'],
  )
  const d = await announce(port, 4, '127.0.0.4')
  t.match(d.reply, { code: 'limit', message: /it holds 3 runs, its bound is 3 \(--max-runs\)/ })
  for (const p of [a, b, c, d]) p.peer.close()

  const bytesDir = tempDir(t)
  const small = await Listener.start({
    host: '127.0.0.1',
    port: 0,
    dir: bytesDir,
    quotas: { maxStoreBytes: 4096, maxStoreBytesPerPeer: 2048 },
  })
  t.teardown(() => small.close())
  const smallPort = small.address().port
  const first = await announce(smallPort, 1, stranger)
  t.equal(first.reply.type, 'run-ok')
  // Acks one at a time, each its own commit: the log grows until the peer's bytes pass its bound.
  for (let seq = 1; small.store.usage().byPeer.get(stranger)!.bytes < 2048; seq++) {
    first.peer.send({ type: 'ack', runId: runIdOf(1), fromSeq: seq, toSeq: seq })
    await first.peer.next('recorded')
  }
  const refused = await announce(smallPort, 2, stranger)
  t.match(refused.reply, {
    code: 'limit',
    message: /the runs from 127\.0\.0\.2 take [\d.]+ KiB, its bound per peer is 2 KiB \(--max-store-bytes-per-peer\)/,
  })
  const other = await announce(smallPort, 3, honest)
  t.equal(other.reply.type, 'run-ok', 'another peer is still under its own bound')
  await small.store.foldNow() // the journal's rounds reach the run files
  t.equal(
    small.store.usage().total.bytes,
    bytesOnDisk(bytesDir),
    'bytes on record are the bytes of the run files (what the journal holds counted as folded)',
  )
  let seq = small.store.lastAckedSeq(runIdOf(1))
  for (; small.store.usage().total.bytes < 4096; ) {
    seq++
    first.peer.send({ type: 'ack', runId: runIdOf(1), fromSeq: seq, toSeq: seq })
    await first.peer.next('recorded')
  }
  const full = await announce(smallPort, 4, '127.0.0.4')
  t.match(full.reply, { code: 'limit', message: /its runs take [\d.]+ KiB, its bound is 4 KiB \(--max-store-bytes\)/ })
  first.peer.send({ type: 'ack', runId: runIdOf(1), fromSeq: seq + 1, toSeq: seq + 1 })
  t.match(await first.peer.next('recorded'), { throughSeq: seq + 1 }, 'a live run keeps recording past the total bound')
  await small.store.foldNow()
  t.equal(small.store.usage().total.bytes, bytesOnDisk(bytesDir))
  for (const p of [first, refused, other, full]) p.peer.close()
})

t.test('usage is counted again at replay: the same runs and bytes per peer after a restart, verdicts included', async (t) => {
  const dir = tempDir(t)
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir })
  const port = listener.address().port
  const w = await announce(port, 1, stranger)
  w.peer.send({ type: 'ack', runId: runIdOf(1), fromSeq: 1, toSeq: 5 })
  await w.peer.next('recorded')
  w.peer.send({ type: 'end', runId: runIdOf(1), reason: 'duration' })
  await w.peer.next('recorded')
  const verifier = await Peer.open(port, stranger)
  verifier.send({ type: 'hello', protocol: 3, role: 'verifier' })
  verifier.send({ type: 'verdict', runId: runIdOf(1), result: verdictOf() })
  await verifier.next('verdict-ok')
  verifier.close()
  await listener.store.foldNow()
  t.equal(listener.store.usage().total.bytes, bytesOnDisk(dir), 'the verdict file counted as it is written')
  const h = await announce(port, 2, honest)
  w.peer.close()
  h.peer.close()
  await listener.close()
  const before = await AckStore.load(dir)
  const reopened = await AckStore.open(dir)
  t.teardown(() => reopened.close())
  const usage = reopened.usage()
  t.same(usage.total, { runs: 2, bytes: bytesOnDisk(dir) })
  t.same(usage.total, before.usage().total)
  t.same([...usage.byPeer.keys()].sort(), [stranger, honest])
  t.equal(usage.byPeer.get(stranger)!.runs, 1)
})

t.test('the free-space reserve refuses new runs with the free space and the reserve named; 0 refuses none', async (t) => {
  const dir = tempDir(t)
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir, reserve: { bytes: 2 ** 50 } })
  t.teardown(() => listener.close())
  const { peer, reply } = await announce(listener.address().port, 1, honest)
  t.match(reply, {
    code: 'limit',
    message: /takes no new runs: its disk has [\d.]+ [KMGT]iB free, under the reserve of 1024 TiB \(--reserve\); live runs keep recording/,
  })
  peer.close()
  const warnings: string[] = []
  const all = await Listener.start({
    host: '127.0.0.1',
    port: 0,
    dir: tempDir(t),
    reserve: { percent: 100 },
    onEvent: (e) => void (e.kind === 'warning' && warnings.push(e.message)),
  })
  t.teardown(() => all.close())
  t.match(
    warnings,
    [/^--reserve .* is the whole of .*'s file system \(.*\) or more: every new run will be refused \(lower --reserve\)$/],
    'said at start',
  )
  t.match(
    (await announce(all.address().port, 1, honest)).reply,
    { code: 'limit', message: /under the reserve of/ },
    'a reserve of 100 % refuses every new run',
  )
  const none = await Listener.start({ host: '127.0.0.1', port: 0, dir: tempDir(t), reserve: { bytes: 0 } })
  t.teardown(() => none.close())
  const ok = await announce(none.address().port, 1, honest)
  t.equal(ok.reply.type, 'run-ok')
  ok.peer.close()
})

t.test(
  "a writer environment over the bound is refused ('bad-frame', the bound named); the largest allowed and a real one are taken",
  async (t) => {
    const dir = tempDir(t)
    const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir })
    t.teardown(() => listener.close())
    const port = listener.address().port
    const over = await announce(port, 1, honest, { writer: { bootId: null, fingerprint: bulkyFingerprint } })
    t.match(over.reply, {
      code: 'bad-frame',
      message: new RegExp(`writer environment \\(fingerprint\\) is \\d+ bytes, over the bound of ${maxWriterEnvBytes} bytes`),
    })
    t.notOk(listener.store.hasRun(runIdOf(1)), 'nothing stored')
    const largest = await announce(port, 2, honest, { writer: { bootId: 'b'.repeat(36), fingerprint: largestFingerprint } })
    t.equal(largest.reply.type, 'run-ok', 'the largest fingerprint the bound allows')
    const real = collectFingerprint(dir, nativePort().fileSystemOf(dir))
    const measured = await announce(port, 3, honest, { writer: { bootId: null, fingerprint: real } })
    t.equal(measured.reply.type, 'run-ok', 'a real fingerprint')
    for (const p of [over, largest, measured]) p.peer.close()
  },
)

t.test('peer keys and the decision table', async (t) => {
  t.equal(peerKey('::ffff:10.1.2.3'), '10.1.2.3')
  t.equal(peerKey('10.1.2.3'), '10.1.2.3')
  t.equal(peerKey('2001:db8:1:2:aaaa::1'), '2001:db8:1:2::/64')
  t.equal(peerKey('2001:db8:1:2:bbbb:cccc:dddd:eeee'), '2001:db8:1:2::/64')
  t.equal(peerKey('::1'), '0:0:0:0::/64')
  // The store keeps usage by peer key (every address of a /64 together: the store test below).
  const byPeer = new Map([
    ['2001:db8:1:2::/64', { runs: 6, bytes: 20 }],
    ['10.0.0.1', { runs: 1, bytes: 10 }],
  ])
  const usage = { total: { runs: 7, bytes: 30 }, byPeer, ofPeer: (key: string) => byPeer.get(key) ?? { runs: 0, bytes: 0 } }
  const limits = { maxRuns: 100, maxRunsPerPeer: 6, maxStoreBytes: null, maxStoreBytesPerPeer: null }
  t.match(
    quotaRefusal(usage, '2001:db8:1:2::3', limits),
    /it holds 6 runs from 2001:db8:1:2::\/64, its bound per peer is 6/,
    'every address of a /64 counts together',
  )
  t.equal(quotaRefusal(usage, '10.0.0.1', limits), undefined)
  t.equal(quotaRefusal(usage, '10.0.0.9', { ...limits, maxRuns: 8 }), undefined)
  t.match(quotaRefusal(usage, '10.0.0.9', { ...limits, maxRuns: 7 }), /--max-runs\)/)
  t.match(quotaRefusal(usage, '10.0.0.9', { ...limits, maxStoreBytes: 30 }), /--max-store-bytes\)/)
  t.equal(quotaRefusal(usage, '10.0.0.9', { ...limits, maxStoreBytes: 31 }), undefined)
})

t.test('--reserve: a negative size or percentage, or one over 100 %, is a usage error naming it', async (t) => {
  for (const [value, says] of [
    ['-1%', /^plugcheck: --reserve -1% is negative: give a size or a percentage from 0 to 100%/],
    ['-5GiB', /^plugcheck: --reserve -5GiB is negative/],
    ['101%', /^plugcheck: --reserve 101% is over 100%/],
  ] as const) {
    const r = await runInProcess(['listen', '--port', '0', '--dir', tempDir(t), '--reserve', value])
    t.equal(r.code, 2, value)
    t.match(r.stderr, says, value)
  }
})

t.test('quota checks cost the same per announcement with 1,000 runs on record as with 100 (usage kept, not rebuilt)', async (t) => {
  /** Seconds for `checks` quota checks (the best of 3) on a store of `runs` runs from distinct addresses. */
  async function cost(runs: number, checks: number): Promise<number> {
    const store = await AckStore.open(tempDir(t))
    t.teardown(() => store.close())
    await Promise.all(
      Array.from({ length: runs }, (_, n) =>
        store.createRun(runMeta(runIdOf(n + 1)), Date.now(), { peer: `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}` }),
      ),
    )
    const limits = { maxRuns: 10 ** 8, maxRunsPerPeer: 10, maxStoreBytes: 2 ** 50, maxStoreBytesPerPeer: 2 ** 40 }
    let best = Infinity
    for (let trial = 0; trial < 3; trial++) {
      const started = performance.now()
      for (let i = 0; i < checks; i++) quotaRefusal(store.usage(), `::ffff:10.9.${(i >> 8) & 255}.${i & 255}`, limits)
      best = Math.min(best, performance.now() - started)
    }
    t.equal(store.usage().total.runs, runs)
    return best / 1000
  }
  // 1,000 and 100 runs (each closed store folds every run into runs/, ~7 ms a run here).
  const small = await cost(100, 20_000)
  const large = await cost(1_000, 20_000)
  t.ok(
    large < small * 4,
    `20,000 checks with 1,000 runs took ${large.toFixed(3)} s, with 100 runs ${small.toFixed(3)} s (10x the runs must not cost 10x)`,
  )
})
