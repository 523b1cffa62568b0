/**
 * A catalog whose checksum holds but whose entries say another announcement order, campaign or end
 * reason than the runs' files (meta.msgpack, acks.log): the background check holds only the metadata,
 * announcedMs and the counts against the files, so the listener keeps judging by the catalog's word
 * (the wrong run is "latest" for a path, a campaign's run is left out) after the check, and writes
 * the wrong values into every catalog after. The run files are the authority: after the check the
 * listener must answer what verify --acks (a full replay) answers.
 */
import t, { type Test } from 'tap'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Packr } from 'msgpackr'
import { AckStore, frameLogEntry } from '../../src/store/ack-store.js'
import { tempDir } from '../fixtures/cli.js'
import { entryOf as byId, recraftCatalog, type CatalogValue as Entry } from '../fixtures/catalog-values.js'
import { runIdOf, runMeta } from '../fixtures/peer.js'

const packr = new Packr({ useRecords: false, mapsAsObjects: true })

const older = runIdOf(0x41001) // announced first, acked 1..50, all kept
const newer = runIdOf(0x41002) // announced last on the same path, acked 1..9
const path = '/data/db'

function craftRun(dir: string, runId: string, announceIndex: number, acked: number, nowMs: number, extra: object = {}): void {
  const runDir = join(dir, 'runs', runId)
  mkdirSync(runDir, { recursive: true })
  writeFileSync(
    join(runDir, 'acks.log'),
    Buffer.concat([
      frameLogEntry({
        k: 'ack',
        fromSeq: 1,
        toSeq: acked,
        firstMs: nowMs - 50_000 + announceIndex,
        lastMs: nowMs - 40_000 + announceIndex,
      }),
      frameLogEntry({ k: 'end', reason: 'vanished', atMs: nowMs - 39_000 + announceIndex }),
    ]),
  )
  const announcedMs = nowMs - 60_000 + announceIndex
  writeFileSync(
    join(runDir, 'meta.msgpack'),
    packr.pack({
      meta: runMeta(runId, { createdMs: announcedMs, requestedPath: path, path }),
      announcedMs,
      announceIndex,
      peer: '127.0.0.1',
      ...extra,
    }),
  )
}

async function setUp(t: Test, craft: (entries: Entry[]) => void): Promise<{ dir: string; store: AckStore; truth: AckStore }> {
  const dir = tempDir(t)
  const nowMs = Date.now()
  craftRun(dir, older, 1, 50, nowMs)
  craftRun(dir, newer, 2, 9, nowMs, { campaign: { name: 'nightly', cycle: 3 } })
  await (await AckStore.open(dir)).close() // writes the catalog from the files
  recraftCatalog(dir, craft)
  const truth = await AckStore.load(dir)
  const store = await AckStore.open(dir)
  t.teardown(() => store.close())
  await store.startScrub()
  return { dir, store, truth }
}

t.test('announcement order swapped in the catalog: after the check, the latest run of the path is the one its files say', async (t) => {
  const { store, truth } = await setUp(t, (entries) => {
    const a = byId(entries, older)
    const b = byId(entries, newer)
    ;[a.announceIndex, b.announceIndex] = [b.announceIndex, a.announceIndex]
  })
  t.match(truth.query('testhost', path), [{ meta: { runId: newer } }], 'verify --acks (the files): the newer run is the latest')
  t.match(
    await store.queryAsync('testhost', path),
    [{ meta: { runId: newer } }],
    'the listener after its background check: the same run is the latest (not the older one the catalog put last)',
  )
  t.equal(store.summaries()[0]?.runId, newer, 'runs lists the newer run first')
  t.ok(store.warnings.length > 0, 'the catalog that disagrees with the run files is named in a warning')
})

t.test(
  'campaign tag, address and end reason dropped or changed in the catalog: after the check, taken from meta.msgpack and acks.log',
  async (t) => {
    const { store, truth } = await setUp(t, (entries) => {
      const b = byId(entries, newer)
      delete b.campaign
      b.peer = '10.9.9.9'
      b.end = { ...(b.end as Entry), reason: 'duration' }
    })
    t.same(
      truth.summaries('nightly').map((s) => s.runId),
      [newer],
      'verify --acks (the files): the run is in campaign nightly',
    )
    t.same(
      store.summaries('nightly').map((s) => s.runId),
      [newer],
      'the listener after its background check: the run is in campaign nightly',
    )
    t.match(
      store.summaries().find((s) => s.runId === newer),
      { end: { reason: 'vanished' }, campaign: { name: 'nightly', cycle: 3 }, peer: '127.0.0.1' },
      'its end reason, campaign and address (who may store its verdict) as its files hold them',
    )
  },
)
