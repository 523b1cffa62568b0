/**
 * Protocol 3 at the listener, over real TCP on 127.0.0.1: steady (the writer's own run, the first one
 * stored), verdicts (a run on record, durable before verdict-ok, the latest replacing an earlier one),
 * the run list (newest first, bounded in runs and bytes, truncated said) and campaign-query. What it
 * stores survives a SIGKILL of the listener and reads back offline (AckStore.load); a damaged
 * verdict.msgpack is reported at start, never dropped in silence; hostile verdicts are refused.
 */
import t from 'tap'
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Packr } from 'msgpackr'
import { Listener } from '../../../../src/server/listen/listener.js'
import { maxVerdictsPerConnection, maxQueriesPerConnection } from '../../../../src/server/listen/listener-options.js'
import { AckStore, frameLogEntry } from '../../../../src/store/ack-store.js'
import { seal } from '../../../../src/store/sealed-file.js'
import {
  maxListedRuns,
  protocolVersion,
  type RunSummary,
  type ServerMessage,
  type StoredVerdict,
} from '../../../../src/protocol/messages.js'
import { startListener, tempDir } from '../../../fixtures/cli.js'
import { Peer, bulkyFingerprint, runIdOf, runMeta } from '../../../fixtures/peer.js'
import { verdictOf } from '../../../fixtures/verdict-fixture.js'

const packr = new Packr({ useRecords: false, mapsAsObjects: true })

async function open(port: number, role: 'writer' | 'verifier', extra: object = {}, localAddress?: string): Promise<Peer> {
  const peer = await Peer.open(port, localAddress)
  peer.send({ type: 'hello', protocol: protocolVersion, role, ...extra })
  await peer.next('welcome')
  return peer
}

async function list(port: number, campaign?: string): Promise<{ runs: RunSummary[]; truncated: boolean }> {
  const verifier = await open(port, 'verifier')
  verifier.send({ type: 'list', ...(campaign === undefined ? {} : { campaign }) })
  const reply = (await verifier.next('run-list', 20_000)) as Extract<ServerMessage, { type: 'run-list' }>
  verifier.close()
  return reply
}

async function refusal(peer: Peer, timeoutMs = 5000): Promise<{ code: string; message: string }> {
  const error = (await peer.next('error', timeoutMs)) as Extract<ServerMessage, { type: 'error' }>
  t.ok(await peer.waitClosed(), 'the connection is closed after the error')
  return error
}

t.test('steady and a verdict are stored with the campaign tag, listed, and survive a SIGKILL of the listener', async (t) => {
  const dir = tempDir(t)
  const first = await startListener(dir)
  t.teardown(() => first.kill())
  const runId = runIdOf(0x301)
  const writer = await open(first.port, 'writer')
  writer.send({
    type: 'run',
    meta: runMeta(runId, { host: 'box', requestedPath: '/mnt/test/p.dat' }),
    campaign: { name: 'ssd-a', cycle: 2 },
  })
  await writer.next('run-ok')
  writer.send({ type: 'ack', runId, fromSeq: 1, toSeq: 5 })
  await writer.next('recorded')
  writer.send({ type: 'steady', runId })
  writer.send({ type: 'steady', runId }) // only the first counts, and a second is no error
  writer.send({ type: 'query', host: 'box', requestedPath: '/mnt/test/p.dat' }) // a reply: both steadies were handled
  await writer.next('runs')

  const before = await list(first.port)
  t.equal(before.runs.length, 1)
  const listed = before.runs[0]!
  t.match(listed, {
    runId,
    host: 'box',
    path: '/mnt/test/p.dat',
    method: 'fdatasync',
    live: true,
    ackedThroughSeq: 5,
    verdict: null,
    campaign: { name: 'ssd-a', cycle: 2 },
  })
  t.type(listed.steadyMs, 'number', 'steady recorded')
  t.equal(before.truncated, false)

  // The cut: the writer's connection goes (a verdict for a live run is refused).
  writer.close()
  for (let i = 0; i < 200 && (await list(first.port)).runs[0]!.live; i++) await new Promise((resolve) => setTimeout(resolve, 25))
  const verifier = await open(first.port, 'verifier')
  const earlier = verdictOf({ verdict: 'pass', lost: 0, intact: 5, lostRanges: [], lossWindowMs: null })
  const latest = verdictOf()
  verifier.send({ type: 'verdict', runId, result: earlier })
  verifier.send({ type: 'verdict', runId, result: latest })
  t.match(await verifier.next('verdict-ok'), { runId })
  t.match(await verifier.next('verdict-ok'), { runId })
  // verdict-ok means durable: kill the listener at once, without a chance to flush anything.
  await first.kill('SIGKILL')
  verifier.close()

  const second = await startListener(dir)
  t.teardown(() => second.kill())
  const after = await list(second.port)
  t.equal(after.runs.length, 1)
  t.match(after.runs[0], { runId, live: false, ackedThroughSeq: 5, steadyMs: listed.steadyMs, campaign: { name: 'ssd-a', cycle: 2 } })
  t.same(after.runs[0]!.verdict, latest, 'the latest verdict replaced the earlier one, whole')
  t.same(
    (await list(second.port, 'ssd-a')).runs.map((r) => r.runId),
    [runId],
    'listed under its campaign',
  )
  t.same((await list(second.port, 'other')).runs, [], 'not under another campaign')

  const offline = await AckStore.load(dir)
  t.same(
    offline.summaries().map((s) => ({ ...s })),
    after.runs,
    'the same summaries offline',
  )
  const records = offline.runRecords()
  t.equal(records.length, 1)
  t.same(records[0]!.summary.verdict, latest)
  t.same(
    records[0]!.run.spans.map((s) => [s[0], s[1]]),
    [[1, 5]],
    'the acks beside it',
  )
})

t.test('hostile verdicts, steadies, lists and campaign queries are refused with an error frame', async (t) => {
  const dir = tempDir(t)
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir })
  t.teardown(() => listener.close())
  const port = listener.address().port
  const runId = runIdOf(0x310)
  const writer = await open(port, 'writer')
  writer.send({ type: 'run', meta: runMeta(runId) })
  await writer.next('run-ok')
  writer.send({ type: 'ack', runId, fromSeq: 1, toSeq: 5 })
  await writer.next('recorded')
  writer.send({ type: 'end', runId, reason: 'duration' })

  const cases: Array<[string, (p: Peer) => void, 'writer' | 'verifier', string, RegExp]> = [
    [
      'a verdict for a run the listener does not hold',
      (p) => p.send({ type: 'verdict', runId: runIdOf(0x3ff), result: verdictOf() }),
      'verifier',
      'unknown-run',
      /does not hold/,
    ],
    [
      'a verdict on a writer connection',
      (p) => p.send({ type: 'verdict', runId, result: verdictOf() }),
      'writer',
      'out-of-order',
      /writer connection/,
    ],
    [
      'a verdict counting more acks than were recorded',
      (p) => p.send({ type: 'verdict', runId, result: verdictOf({ acked: 6, intact: 4 }) }),
      'verifier',
      'bad-frame',
      /counts 6 acknowledged records, the listener holds 5/,
    ],
    [
      'a verdict whose counts exceed its acks',
      (p) => p.send({ type: 'verdict', runId, result: verdictOf({ intact: 5 }) }),
      'verifier',
      'bad-frame',
      /add up to 7/,
    ],
    [
      'a lost range past the acks',
      (p) => p.send({ type: 'verdict', runId, result: verdictOf({ lostRanges: [[4, 9]] }) }),
      'verifier',
      'bad-frame',
      /lost range 4-9/,
    ],
    [
      'a pass with every acknowledged record lost',
      (p) => p.send({ type: 'verdict', runId, result: verdictOf({ verdict: 'pass', intact: 0, lost: 5, lostRanges: [[1, 5]] }) }),
      'verifier',
      'bad-frame',
      /the verdict for run 0000000000000310 says pass with 5 of 5 acknowledged records lost, 0 torn, 0 corrupt: a pass needs acknowledged records, none lost/,
    ],
    [
      'a fail with nothing lost and the superblock found',
      (p) =>
        p.send({
          type: 'verdict',
          runId,
          result: verdictOf({ intact: 5, lost: 0, lostRanges: [], lossWindowMs: null, superblockValid: true }),
        }),
      'verifier',
      'bad-frame',
      /says fail with 0 of 5 .*a fail needs/,
    ],
    [
      'an inconclusive run that acknowledged records',
      (p) =>
        p.send({
          type: 'verdict',
          runId,
          result: verdictOf({ verdict: 'inconclusive', intact: 5, lost: 0, lostRanges: [], lossWindowMs: null }),
        }),
      'verifier',
      'bad-frame',
      /inconclusive only when nothing was acknowledged/,
    ],
    [
      'counts that do not add up to acked',
      (p) => p.send({ type: 'verdict', runId, result: verdictOf({ superseded: 0, interrupted: 1 }) }),
      'verifier',
      'bad-frame',
      /add up to 6, not to the 5 acknowledged/,
    ],
    [
      'a verdict of absurd size',
      (p) => p.send({ type: 'verdict', runId, result: verdictOf({ summary: 'x'.repeat(70_000) }) }),
      'verifier',
      'too-large',
      /limit/,
    ],
    [
      'a verdict that is not one',
      (p) => p.send({ type: 'verdict', runId, result: { verdict: 'great', acked: -1 } }),
      'verifier',
      'bad-frame',
      /invalid/,
    ],
    [
      'a steady for a run this connection did not announce',
      (p) => p.send({ type: 'steady', runId }),
      'writer',
      'unknown-run',
      /did not announce/,
    ],
    ['a steady on a verifier connection', (p) => p.send({ type: 'steady', runId }), 'verifier', 'out-of-order', /verifier connection/],
    ['a list on a writer connection', (p) => p.send({ type: 'list' }), 'writer', 'out-of-order', /writer connection/],
    [
      'a list of a campaign with an impossible name',
      (p) => p.send({ type: 'list', campaign: '../x' }),
      'verifier',
      'bad-frame',
      /campaign name/,
    ],
  ]
  for (const [name, act, role, code, message] of cases) {
    const peer = await open(port, role)
    act(peer)
    const error = await refusal(peer)
    t.equal(error.code, code, `${name}: ${code}`)
    t.match(error.message, message, `${name}: ${error.message.slice(0, 200)}`)
  }
  // A steady after the writer's own end.
  writer.send({ type: 'steady', runId })
  t.match(await refusal(writer), { code: 'out-of-order', message: /after its end/ })

  // Without --token only the address that announced the run may report its verdict (127.0.0.2 plays another machine).
  const stranger = await open(port, 'verifier', {}, '127.0.0.2')
  stranger.send({ type: 'verdict', runId, result: verdictOf() })
  t.match(await refusal(stranger), { code: 'unauthorized', message: /announced from 127\.0\.0\.1; only that address/ })
  t.equal(listener.store.summaries()[0]!.verdict, null, 'nothing refused was stored')

  // What verify sends for a file whose superblock was lost while every record survived: a fail, accepted.
  const lostSuperblock = verdictOf({
    intact: 5,
    lost: 0,
    lostRanges: [],
    lossWindowMs: null,
    superseded: 0,
    interrupted: 0,
    superblockValid: false,
  })
  const honest = await open(port, 'verifier')
  honest.send({ type: 'verdict', runId, result: lostSuperblock })
  t.match(await honest.next('verdict-ok'), { runId })
  t.same(listener.store.summaries()[0]!.verdict, lostSuperblock)
  honest.close()

  // At most maxVerdictsPerConnection verdicts on one connection, like queries.
  const flood = await open(port, 'verifier')
  for (let i = 0; i <= maxVerdictsPerConnection; i++) flood.send({ type: 'verdict', runId, result: verdictOf() })
  const floodStartMs = Date.now()
  t.match(await refusal(flood, 300_000), { code: 'limit', message: new RegExp(`more than ${maxVerdictsPerConnection} verdicts`) })
  t.equal(
    flood.messages.filter((m) => m.type === 'verdict-ok').length,
    maxVerdictsPerConnection,
    'every verdict before the limit was stored and confirmed',
  )
  t.comment(`${maxVerdictsPerConnection} verdicts stored (each fsynced, renamed, directory fsynced) in ${Date.now() - floodStartMs} ms`)

  // Lists and campaign queries count as queries.
  const asker = await open(port, 'verifier')
  for (let i = 0; i <= maxQueriesPerConnection; i++) asker.send(i % 2 === 0 ? { type: 'list' } : { type: 'campaign-query' })
  t.match(await refusal(asker), { code: 'limit', message: /queries on one connection/ })
  t.equal(asker.messages.length, maxQueriesPerConnection, 'one answer per allowed query')
  t.same(
    asker.messages.find((m) => m.type === 'campaign-state'),
    { type: 'campaign-state', campaign: null },
    'no campaign: null',
  )
})

t.test('with --token any holder of the token may report a verdict; campaign-query answers from the campaign', async (t) => {
  const dir = tempDir(t)
  const state = { name: 'ssd-a', cycles: 3, cycle: 2, phase: 'waiting-for-agent' as const }
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir, token: 's3cret', campaignState: () => state })
  t.teardown(() => listener.close())
  const port = listener.address().port
  const runId = runIdOf(0x320)
  const writer = await open(port, 'writer', { token: 's3cret' })
  writer.send({ type: 'run', meta: runMeta(runId) })
  await writer.next('run-ok')
  writer.close()
  for (let i = 0; i < 200 && listener.isLive(runId); i++) await new Promise((resolve) => setTimeout(resolve, 25))
  const verifier = await open(port, 'verifier', { token: 's3cret' }, '127.0.0.2')
  verifier.send({
    type: 'verdict',
    runId,
    result: verdictOf({ acked: 0, intact: 0, lost: 0, lostRanges: [], lossWindowMs: null, verdict: 'inconclusive' }),
  })
  t.match(await verifier.next('verdict-ok'), { runId })
  verifier.send({ type: 'campaign-query' })
  t.same(await verifier.next('campaign-state'), { type: 'campaign-state', campaign: state })
})

/**
 * Crafts count ended runs straight into a store directory (what an older listener would have stored:
 * no checksums, a log of single entries), each with verdict if given and the acks it counts.
 */
function craftRuns(dir: string, count: number, verdict?: StoredVerdict): void {
  const nowMs = Date.now()
  for (let i = 0; i < count; i++) {
    const runId = runIdOf(0x10000 + i)
    const runDir = join(dir, 'runs', runId)
    mkdirSync(runDir, { recursive: true })
    const acked = verdict?.acked ?? 0
    writeFileSync(
      join(runDir, 'acks.log'),
      acked === 0 ? '' : frameLogEntry({ k: 'ack', fromSeq: 1, toSeq: acked, firstMs: nowMs - 50_000, lastMs: nowMs - 40_000 }),
    )
    // An older listener's meta file: no campaign tag.
    writeFileSync(
      join(runDir, 'meta.msgpack'),
      packr.pack({
        meta: runMeta(runId, { createdMs: nowMs - 60_000 }),
        announcedMs: nowMs - 60_000,
        announceIndex: i + 1,
        peer: '127.0.0.1',
      }),
    )
    if (verdict !== undefined) writeFileSync(join(runDir, 'verdict.msgpack'), packr.pack({ runId, result: verdict }))
  }
}

t.test('the run list is bounded: at most maxListedRuns runs and a byte budget, newest first, truncated said', async (t) => {
  const dir = tempDir(t)
  craftRuns(dir, maxListedRuns + 1)
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir })
  t.teardown(() => listener.close())
  const { runs, truncated } = await list(listener.address().port)
  t.equal(runs.length, maxListedRuns)
  t.equal(truncated, true)
  t.equal(runs[0]!.runId, runIdOf(0x10000 + maxListedRuns), 'the newest announcement first')
  t.equal(runs.at(-1)!.runId, runIdOf(0x10001), 'the oldest left out')
  t.equal(runs[0]!.campaign, null, 'an older meta file without a campaign tag replays')

  // Verdicts with ~49 KB fingerprints: a thousand would be ~50 MB; the reply stays within its budget.
  const bulkyDir = tempDir(t)
  craftRuns(bulkyDir, 400, verdictOf({ fingerprint: bulkyFingerprint as StoredVerdict['fingerprint'] }))
  const bulky = await Listener.start({ host: '127.0.0.1', port: 0, dir: bulkyDir })
  t.teardown(() => bulky.close())
  const verifier = await open(bulky.address().port, 'verifier')
  verifier.send({ type: 'list' })
  const reply = (await verifier.next('run-list', 30_000)) as Extract<ServerMessage, { type: 'run-list' }>
  const replyBytes = verifier.socket.bytesRead
  t.ok(reply.runs.length > 100 && reply.runs.length < 400, `${reply.runs.length} of 400 runs listed`)
  t.equal(reply.truncated, true)
  t.ok(replyBytes <= 16 * 1024 * 1024 + 4096, `the reply is ${replyBytes} bytes`)
  t.same(reply.runs[0]!.verdict!.fingerprint, bulkyFingerprint, 'verdicts are listed whole')
  verifier.close()
})

function flipped(bytes: Buffer, at: number): Buffer {
  const copy = Buffer.from(bytes)
  copy[at]! ^= 0x01
  return copy
}

t.test('a damaged verdict.msgpack is reported at start and the run shows no verdict; the acks are served', async (t) => {
  const damages: Array<[string, (path: string) => void, RegExp]> = [
    [
      'cut in half',
      (p) => writeFileSync(p, packr.pack({ runId: runIdOf(0x10000), result: verdictOf() }).subarray(0, 40)),
      /not valid msgpack/,
    ],
    [
      'a field out of bounds',
      (p) => writeFileSync(p, packr.pack({ runId: runIdOf(0x10000), result: { ...verdictOf(), acked: -3 } })),
      /field result\.acked is not valid/,
    ],
    [
      "another run's verdict",
      (p) => writeFileSync(p, packr.pack({ runId: runIdOf(0x999), result: verdictOf() })),
      /verdict of run 0000000000000999/,
    ],
    ['a directory', (p) => mkdirSync(p), /not a regular file/],
    [
      'a bit flipped in a sealed one',
      (p) => writeFileSync(p, flipped(seal('verdict', packr.pack({ runId: runIdOf(0x10000), result: verdictOf() })), 40)),
      /it does not match its checksum \(damaged\)/,
    ],
    [
      'a pass over lost records, checksum and all',
      (p) => writeFileSync(p, seal('verdict', packr.pack({ runId: runIdOf(0x10000), result: verdictOf({ verdict: 'pass' }) }))),
      /the verdict says pass with 2 of 5 acknowledged records lost, 0 torn, 0 corrupt: a pass needs/,
    ],
    // Unsealed (no checksum vouches for it): the verdict is what is damaged. A sealed one proves the
    // log lost recorded acks, a refusal (test/hostile/torn-tail-after-verdict.test.ts).
    [
      'more records than the run acknowledged, unsealed',
      (p) => writeFileSync(p, packr.pack({ runId: runIdOf(0x10000), result: verdictOf({ acked: 6, intact: 4 }) })),
      /counts 6 acknowledged records, the listener holds 5/,
    ],
  ]
  for (const [name, damage, why] of damages) {
    const dir = tempDir(t)
    craftRuns(dir, 1, verdictOf())
    rmSync(join(dir, 'runs', runIdOf(0x10000), 'verdict.msgpack'))
    damage(join(dir, 'runs', runIdOf(0x10000), 'verdict.msgpack'))
    const store = await AckStore.load(dir)
    t.equal(store.warnings.length, 1, `${name}: one warning`)
    t.match(store.warnings[0], why, `${name}: ${store.warnings[0]}`)
    t.match(store.warnings[0], /verdict\.msgpack is damaged|verdict\.msgpack/, `${name}: names the file`)
    t.equal(store.summaries()[0]!.verdict, null, `${name}: no verdict shown`)
    // The listener starts on it, says so, and takes a new verdict in its place.
    const events: string[] = []
    const listener = await Listener.start({
      host: '127.0.0.1',
      port: 0,
      dir,
      onEvent: (e) => e.kind === 'warning' && events.push(e.message),
    })
    // (An older listener's directory has no catalog: said first, every log replayed.)
    t.match(events, [/catalog\.msgpack is missing/, why], `${name}: the listener warns at start`)
    await listener.close()
  }
})

t.test('a sealed verdict that counted more acks than the log holds: the log is damaged, a refusal naming it', async (t) => {
  const dir = tempDir(t)
  craftRuns(dir, 1, verdictOf())
  const runDir = join(dir, 'runs', runIdOf(0x10000))
  writeFileSync(
    join(runDir, 'verdict.msgpack'),
    seal('verdict', packr.pack({ runId: runIdOf(0x10000), result: verdictOf({ acked: 6, intact: 4 }) })),
  )
  const message = new RegExp(
    `could not read ${join(runDir, 'acks.log')}: it holds 5 acknowledged records, but the run's verdict stored after them \\(.*verdict\\.msgpack, checksummed\\) counted 6`,
  )
  await t.rejects(AckStore.load(dir), { exitCode: 3, message }, 'the store refuses to load')
  await t.rejects(Listener.start({ host: '127.0.0.1', port: 0, dir }), { exitCode: 3, message }, 'the listener refuses to start')
})

t.test(
  'a not-judged verdict never replaces a judged one; it is stored over nothing or another not-judged, and a judged one replaces it',
  async (t) => {
    const dir = tempDir(t)
    craftRuns(dir, 2, verdictOf())
    const [judgedRun, otherRun] = [runIdOf(0x10000), runIdOf(0x10001)]
    rmSync(join(dir, 'runs', otherRun, 'verdict.msgpack'))
    const notJudged = verdictOf({
      verdict: 'not-judged',
      acked: 0,
      intact: 0,
      lost: 0,
      lostRanges: [],
      lossWindowMs: null,
      summary: 'NOT JUDGED',
    })
    const store = await AckStore.open(dir)
    await store.recordVerdict(judgedRun, notJudged)
    await store.recordVerdict(otherRun, notJudged)
    await store.close()
    const reloaded = await AckStore.load(dir)
    const verdictOfRun = (s: AckStore, runId: string) => s.summaries().find((r) => r.runId === runId)!.verdict?.verdict
    t.equal(verdictOfRun(reloaded, judgedRun), 'fail', 'the stored fail stays, across a restart')
    t.equal(verdictOfRun(reloaded, otherRun), 'not-judged', 'over no verdict, not-judged is stored')
    const again = await AckStore.open(dir)
    await again.recordVerdict(otherRun, verdictOf())
    await again.recordVerdict(otherRun, notJudged)
    await again.close()
    t.equal(verdictOfRun(await AckStore.load(dir), otherRun), 'fail', 'a judged verdict replaces not-judged, and is kept after it')
  },
)
