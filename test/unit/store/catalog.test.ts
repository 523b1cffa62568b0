/**
 * <dir>/catalog.msgpack: a listener restarts from it without replaying every run's log; a catalog
 * missing or damaged is a warning and a full replay (the run files are the authority); a catalogued
 * run whose files lost what was recorded is named by the background check and its queries refused,
 * as verify --acks refuses it; a crash at any point between a fold, the catalog and the deletion of
 * the fold's segment loses no recorded ack.
 */
import t, { type Test } from 'tap'
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { Packr } from 'msgpackr'
import { AckStore, frameLogEntry } from '../../../src/store/ack-store.js'
import { tempDir } from '../../fixtures/cli.js'
import { entryOf, readCatalogValues, recraftCatalog, writeCatalogValues, type CatalogValue } from '../../fixtures/catalog-values.js'
import { runIdOf, runMeta } from '../../fixtures/peer.js'
import { verdictOf } from '../../fixtures/verdict-fixture.js'

const packr = new Packr({ useRecords: false, mapsAsObjects: true })

/** count ended runs crafted as an older listener stored them (no catalog), run i acked 1..i%7+1. */
function craftRuns(dir: string, count: number): void {
  const nowMs = Date.now()
  for (let i = 0; i < count; i++) {
    const runId = runIdOf(0x20000 + i)
    const runDir = join(dir, 'runs', runId)
    mkdirSync(runDir, { recursive: true })
    const acked = (i % 7) + 1
    writeFileSync(
      join(runDir, 'acks.log'),
      Buffer.concat([
        frameLogEntry({ k: 'ack', fromSeq: 1, toSeq: acked, firstMs: nowMs - 50_000, lastMs: nowMs - 40_000 }),
        frameLogEntry({ k: 'end', reason: 'duration', atMs: nowMs - 39_000 }),
      ]),
    )
    writeFileSync(
      join(runDir, 'meta.msgpack'),
      packr.pack({
        meta: runMeta(runId, { createdMs: nowMs - 60_000, requestedPath: `/data/${runId}` }),
        announcedMs: nowMs - 60_000,
        announceIndex: i + 1,
        peer: '127.0.0.1',
      }),
    )
  }
}

async function openTimed(dir: string): Promise<{ store: AckStore; ms: number }> {
  const started = performance.now()
  const store = await AckStore.open(dir)
  return { store, ms: performance.now() - started }
}

/** Every run's summary and stored acks, as a verifier would get them. */
async function everything(store: AckStore): Promise<unknown[]> {
  const all: unknown[] = []
  for (const summary of store.summaries()) all.push(summary, await store.queryAsync(summary.host, summary.path, summary.runId))
  return all
}

/**
 * count crafted runs, opened once (which writes their catalog) after prepare: the directory, and every
 * run and ack as that store answered them (what each later start must answer).
 */
async function cataloguedRuns(
  t: Test,
  count: number,
  prepare?: (store: AckStore) => Promise<unknown>,
): Promise<{ dir: string; before: unknown[] }> {
  const dir = tempDir(t)
  craftRuns(dir, count)
  const first = await AckStore.open(dir)
  await prepare?.(first)
  const before = await everything(first)
  await first.close()
  return { dir, before }
}

t.test('a restart on 5,000 runs reads the catalog, not their logs, and answers the same', async (t) => {
  const dir = tempDir(t)
  const runs = 5_000
  craftRuns(dir, runs)
  const first = await openTimed(dir)
  t.equal(first.store.replayedLogCount, runs, 'no catalog: every log replayed')
  t.match(first.store.warnings.join('\n'), /catalog\.msgpack is missing: every run's log is replayed/, 'the missing catalog is said')
  const before = await everything(first.store)
  await first.store.close()
  // The best of three starts from the catalog (each closed but the last) against the one full replay:
  // a loaded machine may stall any one start, and a stalled replay is only slower. A start that read
  // every log anyway would take about as long as the replay every time, not a third of it.
  const catalogMs: number[] = []
  const replayed: number[] = []
  const warned: string[][] = []
  let second = await openTimed(dir)
  for (;;) {
    catalogMs.push(second.ms)
    replayed.push(second.store.replayedLogCount)
    warned.push(second.store.warnings)
    if (catalogMs.length === 3) break
    await second.store.close()
    second = await openTimed(dir)
  }
  const last = second.store
  t.teardown(() => last.close())
  t.same(replayed, [0, 0, 0], 'from the catalog: no log replayed, at any of the three starts')
  t.same(warned, [[], [], []], 'no warning')
  const bestMs = Math.min(...catalogMs)
  t.ok(
    bestMs * 3 < first.ms,
    `start from the catalog ${bestMs.toFixed(0)} ms (best of ${catalogMs.map((ms) => ms.toFixed(0)).join(', ')}), full replay ${first.ms.toFixed(0)} ms`,
  )
  t.same(await everything(second.store), before, 'every run answered as before the restart')
  await second.store.startScrub()
  t.same(second.store.warnings, [], 'the background check finds every run as catalogued')
  t.equal(second.store.residentSpanCount() <= runs, true, 'spans read back for the queries only, within the cache')
})

t.test('a damaged or unreadable catalog: a warning naming it, a full replay, then a new catalog', async (t) => {
  const cases: Array<[string, (path: string) => void, RegExp]> = [
    [
      'a bit flipped',
      (p) => {
        const bytes = readFileSync(p)
        bytes[bytes.length - 3]! ^= 0x10
        writeFileSync(p, bytes)
      },
      /does not match its checksum/,
    ],
    ['cut short', (p) => truncateSync(p, 40), /does not match its checksum|not valid/],
    ['empty', (p) => truncateSync(p, 0), /does not start with a catalog header/],
  ]
  for (const [name, damage, problem] of cases) {
    await t.test(name, async (t) => {
      const { dir, before } = await cataloguedRuns(t, 30)
      const catalog = join(dir, 'catalog.msgpack')
      damage(catalog)
      const second = await AckStore.open(dir)
      t.equal(second.replayedLogCount, 30, 'every log replayed')
      t.match(
        second.warnings.join('\n'),
        new RegExp(`${catalog} is not usable \\(.*(${problem.source})`),
        'a warning names the catalog and what is wrong',
      )
      t.same(await everything(second), before, 'the same runs and acks')
      await second.close()
      const third = await AckStore.open(dir)
      t.equal(third.replayedLogCount, 0, 'a new catalog was written')
      await third.close()
    })
  }
})

t.test(
  'a catalogued run whose log lost bytes, or whose directory is gone: named, its queries refused, verify --acks refuses',
  async (t) => {
    const dir = tempDir(t)
    craftRuns(dir, 10)
    await (await AckStore.open(dir)).close()
    const shortRun = runIdOf(0x20006) // acked 1..7
    const goneRun = runIdOf(0x20005)
    const log = join(dir, 'runs', shortRun, 'acks.log')
    const logBytes = readFileSync(log).length
    const copy = tempDir(t)
    truncateSync(log, logBytes - frameLogEntry({ k: 'end', reason: 'duration', atMs: Date.now() }).length)
    rmSync(join(dir, 'runs', goneRun), { recursive: true })
    for (const name of ['runs', 'journal']) mkdirSync(join(copy, name), { recursive: true })
    // verify --acks reads a copy: every run replayed, and held against the catalog.
    copyFileSync(join(dir, 'catalog.msgpack'), join(copy, 'catalog.msgpack'))
    for (const runId of readdirSync(join(dir, 'runs'))) {
      mkdirSync(join(copy, 'runs', runId))
      for (const file of readdirSync(join(dir, 'runs', runId)))
        copyFileSync(join(dir, 'runs', runId, file), join(copy, 'runs', runId, file))
    }

    const store = await AckStore.open(dir)
    t.teardown(() => store.close())
    t.equal(store.replayedLogCount, 0)
    const gone = new RegExp(
      `could not read ${join(dir, 'runs', goneRun)}: the run's directory is gone, but the listener recorded 6 acknowledged records of it`,
    )
    t.match(store.warnings.join('\n'), gone, 'the gone directory is named at start')
    await t.rejects(
      store.queryAsync('testhost', `/data/${goneRun}`, goneRun),
      { exitCode: 3, message: gone },
      "the gone run's queries are refused",
    )
    await store.startScrub()
    const short = new RegExp(
      `could not read ${log}: its whole commits end at byte ${readFileSync(log).length} \\(.*acks through seq 7, no end\\), but the listener recorded .* in ${logBytes} bytes \\(acks through seq 7, and its end\\)`,
    )
    t.match(store.warnings.join('\n'), short, 'the background check names the short log and its byte')
    await t.rejects(
      store.queryAsync('testhost', `/data/${shortRun}`, shortRun),
      { exitCode: 3, message: short },
      "the short run's queries are refused",
    )
    const other = runIdOf(0x20001)
    t.match(await store.queryAsync('testhost', `/data/${other}`, other), [{ ackedThroughSeq: 2 }], 'other runs are answered')
    await t.rejects(
      AckStore.load(copy),
      { exitCode: 3, message: /could not read .*: its whole commits end at byte/ },
      'verify --acks refuses the short log too',
    )
    // Without the short run: the gone one is named and refused alone, as the listener does; the others are judged.
    rmSync(join(copy, 'runs', shortRun), { recursive: true })
    const offline = await AckStore.load(copy)
    const goneInCopy = (runId: string): RegExp =>
      new RegExp(
        `run ${runId}: could not read ${join(copy, 'runs', runId)}: the run's directory is gone, but the listener recorded \\d+ acknowledged records of it`,
      )
    t.match(offline.warnings.join('\n'), goneInCopy(goneRun), 'verify --acks names the gone run in a warning')
    t.match(offline.warnings.join('\n'), goneInCopy(shortRun))
    await t.rejects(
      offline.queryAsync('testhost', `/data/${goneRun}`, goneRun),
      { exitCode: 3, message: /the run's directory is gone/ },
      "verify --acks refuses the gone run's queries",
    )
    t.match(await offline.queryAsync('testhost', `/data/${other}`, other), [{ ackedThroughSeq: 2 }], 'verify --acks answers the other runs')
    await offline.close()
  },
)

t.test('a crash between a fold, its catalog and the deletion of its segment loses no recorded ack', async (t) => {
  for (const point of ['after the fold, before the catalog', 'after the catalog, before the segment goes'] as const) {
    await t.test(point, async (t) => {
      const dir = tempDir(t)
      craftRuns(dir, 3)
      const store = await AckStore.open(dir)
      const runId = runIdOf(0x30000)
      const nowMs = Date.now()
      await store.createRun(runMeta(runId, { createdMs: nowMs - 1000, requestedPath: `/data/${runId}` }), nowMs - 1000)
      for (let seq = 1; seq <= 40; seq++) store.appendAck(runId, seq, seq, Date.now())
      store.endRun(runId, 'duration', undefined, Date.now())
      await new Promise<void>((resolve) => store.on('recorded', (id, through) => void (id === runId && through === 40 && resolve())))
      // The state on disk at the crash point: the segment (not deleted yet) and, before the catalog, the old catalog.
      const journal = join(dir, 'journal')
      const saved = readdirSync(journal).map((name) => [name, readFileSync(join(journal, name))] as const)
      const oldCatalog = readFileSync(join(dir, 'catalog.msgpack'))
      await store.foldNow()
      const expected = await everything(store)
      await store.close()
      for (const name of readdirSync(journal)) rmSync(join(journal, name))
      for (const [name, bytes] of saved) writeFileSync(join(journal, name), bytes)
      if (point === 'after the fold, before the catalog') writeFileSync(join(dir, 'catalog.msgpack'), oldCatalog)
      const restarted = await AckStore.open(dir)
      t.teardown(() => restarted.close())
      t.match(
        await restarted.queryAsync('testhost', `/data/${runId}`, runId),
        [{ ackedThroughSeq: 40, end: { reason: 'duration' } }],
        'every recorded ack answered',
      )
      t.same(
        (await everything(restarted)).filter((_, i) => i % 2 === 0),
        expected.filter((_, i) => i % 2 === 0),
        'the same runs',
      )
      await restarted.startScrub()
      t.same(
        restarted.warnings.filter((w) => !/torn/.test(w)),
        [],
        'nothing found damaged',
      )
    })
  }
})

t.test('a verdict stored after the catalog was written is read from its file by the background check', async (t) => {
  const dir = tempDir(t)
  craftRuns(dir, 3)
  const first = await AckStore.open(dir)
  await first.close()
  const oldCatalog = readFileSync(join(dir, 'catalog.msgpack'))
  const runId = runIdOf(0x20002) // acked 1..3
  const second = await AckStore.open(dir)
  await second.recordVerdict(runId, verdictOf({ acked: 3, intact: 3, lost: 0, lostRanges: [], verdict: 'pass', lossWindowMs: null }))
  await second.close()
  writeFileSync(join(dir, 'catalog.msgpack'), oldCatalog) // a crash before the next catalog
  const third = await AckStore.open(dir)
  t.teardown(() => third.close())
  await third.startScrub()
  t.match(
    third.summaries().find((s) => s.runId === runId),
    { verdict: { verdict: 'pass', acked: 3 } },
    'the stored verdict is shown',
  )
})

t.test('a catalog whose checksum holds but whose content no listener writes: refused, a full replay, never fewer acks', async (t) => {
  const sixAcks = runIdOf(0x20005) // acked 1..6
  const cases: Array<[string, (entries: CatalogValue[], header: CatalogValue) => void, RegExp]> = [
    ['an absurd seq', (e) => void (entryOf(e, sixAcks).lastAckedSeq = 2 ** 52), /has acks past what a writer can write by its last ack/],
    [
      'fewer acks than a duplicate of its entry says',
      (e) => void e.push({ ...entryOf(e, sixAcks), lastAckedSeq: 1 }),
      /holds run [0-9a-f]{16} a second time/,
    ],
    ['a huge byte count', (e) => void (entryOf(e, sixAcks).logBytes = 2 ** 52), /has a file size no listener writes/],
    ['more commits than acks', (e) => void (entryOf(e, sixAcks).commits = 9), /has more commits than its acks, steady and end make/],
    ['more spans than acks', (e) => void (entryOf(e, sixAcks).spanCount = 7), /has more spans than acks/],
    [
      'a verdict counting more acks than the run has',
      (e) =>
        void Object.assign(entryOf(e, sixAcks), {
          verdict: verdictOf({ acked: 9, intact: 9, lost: 0, lostRanges: [], verdict: 'pass', lossWindowMs: null }),
          verdictBytes: 300,
        }),
      /has a verdict that counted more acks than the run has/,
    ],
    [
      'an announcement after the last on record',
      (e, h) => void (entryOf(e, sixAcks).announceIndex = (h.lastAnnounceIndex as number) + 1),
      /was announced after the last announcement on record/,
    ],
    [
      "a last announcement past its entries' highest",
      (_e, h) => void (h.lastAnnounceIndex = Number.MAX_SAFE_INTEGER),
      /says the last announcement was number 9007199254740991, past its entries' highest \(10\)/,
    ],
    [
      'two runs announced as one',
      (e) => void (entryOf(e, sixAcks).announceIndex = entryOf(e, runIdOf(0x20004)).announceIndex),
      /has announcement index \d+, as an earlier run has/,
    ],
    ['a negative count', (e) => void (entryOf(e, sixAcks).commits = -1), / is not valid/],
    ['a wrong type', (e) => void (entryOf(e, sixAcks).lastAckedSeq = '6'), / is not valid/],
    [
      'another run in its metadata',
      (e) => void (entryOf(e, sixAcks).id = runIdOf(0x20004)),
      /\(run [0-9a-f]{16}\) describes another run in its metadata/,
    ],
  ]
  for (const [name, craft, problem] of cases) {
    await t.test(name, async (t) => {
      const { dir, before } = await cataloguedRuns(t, 10)
      recraftCatalog(dir, craft)
      const second = await AckStore.open(dir)
      t.equal(second.replayedLogCount, 10, 'every log replayed')
      t.match(
        second.warnings.join('\n'),
        new RegExp(
          `${join(dir, 'catalog.msgpack')} is not usable \\(its (entry \\d+|header).*${problem.source}.*\\): every run's log is replayed`,
        ),
        'a warning names the catalog and what is wrong',
      )
      t.same(await everything(second), before, 'the same runs and acks as the run files hold')
      await second.startScrub()
      t.same(second.warnings.length, 1, 'the background check finds nothing else')
      await second.close()
      const third = await AckStore.open(dir)
      t.teardown(() => third.close())
      t.same([third.replayedLogCount, third.warnings], [0, []], 'a new catalog was written and is used')
    })
  }
})

t.test('a restart after a clean stop leaves the catalog as it is (nothing changed, nothing written)', async (t) => {
  const dir = tempDir(t)
  craftRuns(dir, 10)
  await (await AckStore.open(dir)).close()
  const second = await AckStore.open(dir)
  await second.close()
  const catalogBytes = readFileSync(join(dir, 'catalog.msgpack'))
  const third = await AckStore.open(dir)
  t.teardown(() => third.close())
  t.equal(third.catalogWriteCount, 0, 'no catalog written at the start')
  t.same(readFileSync(join(dir, 'catalog.msgpack')), catalogBytes, 'the same bytes')
  t.equal(third.replayedLogCount, 0)
})

t.test('a catalog of format 1 (entries as maps, before records) is read as it is, then written again as format 2', async (t) => {
  const { dir, before } = await cataloguedRuns(t, 10)
  const { header, entries } = readCatalogValues(dir)
  writeCatalogValues(dir, header, entries, 1)
  const second = await AckStore.open(dir)
  t.same([second.replayedLogCount, second.warnings], [0, []], 'read from the catalog of format 1: no log replayed, no warning')
  t.same(await everything(second), before, 'every run answered as before')
  await second.close()
  t.same(readCatalogValues(dir), { header: { ...header, version: 2 }, entries }, 'written again as format 2, the same entries')
  const third = await AckStore.open(dir)
  t.teardown(() => third.close())
  t.same([third.replayedLogCount, third.warnings], [0, []])
  t.same(await everything(third), before, 'every run answered as before')
})

t.test('a catalog of format 2 round-trips: 5,000 entries in slices, every field as written', async (t) => {
  const verdict = verdictOf({ acked: 3, intact: 3, lost: 0, lostRanges: [], verdict: 'pass', lossWindowMs: null })
  const { dir, before } = await cataloguedRuns(t, 5_000, (store) => store.recordVerdict(runIdOf(0x20002), verdict))
  const { header, entries } = readCatalogValues(dir)
  t.equal(entries.length, 5_000)
  t.match(
    entries.find((e) => e.id === runIdOf(0x20002)),
    { verdict: { verdict: 'pass', acked: 3 }, lastAckedSeq: 3, peer: '127.0.0.1' },
    'an entry holds what the run holds',
  )
  const second = await AckStore.open(dir)
  t.teardown(() => second.close())
  t.same([second.replayedLogCount, second.warnings], [0, []])
  t.same(await everything(second), before, 'every run answered as before the restart')
  t.same(header.lastAnnounceIndex, 5_000)
})

t.test(
  'a catalog that holds fewer acks of a run than its files, plausibly: the run is taken from its files, never answered with fewer',
  async (t) => {
    const { dir, before } = await cataloguedRuns(t, 10)
    const sixAcks = runIdOf(0x20005) // acked 1..6
    recraftCatalog(dir, (entries) => void Object.assign(entries.find((e) => e.id === sixAcks)!, { lastAckedSeq: 4 }))
    const second = await AckStore.open(dir)
    t.equal(second.replayedLogCount, 0, 'nothing in the entry is impossible: the catalog is used')
    t.match(
      await second.queryAsync('testhost', `/data/${sixAcks}`, sixAcks),
      [{ ackedThroughSeq: 6 }],
      'a query is answered from the files: 6 acks',
    )
    t.match(
      second.warnings.join('\n'),
      new RegExp(
        `run ${sixAcks}: .*catalog\\.msgpack recorded 0 commits in \\d+ bytes \\(acks through seq 4\\) where its files hold 0 commits in \\d+ bytes \\(acks through seq 6\\): the run is taken from its files`,
      ),
      'the catalog is named',
    )
    await second.startScrub()
    t.same(await everything(second), before, 'every run as its files hold it')
    await second.close()
    const third = await AckStore.open(dir)
    t.teardown(() => third.close())
    t.match(
      third.summaries().find((s) => s.runId === sixAcks),
      { ackedThroughSeq: 6 },
      "the catalog written again holds the files' acks",
    )
    const offline = await AckStore.load(dir)
    t.match(
      offline.summaries().find((s) => s.runId === sixAcks),
      { ackedThroughSeq: 6 },
      'verify --acks reads the files and does not refuse the run',
    )
  },
)
