/**
 * A catalog whose checksum holds but whose entry gives the newest run of a path another requested
 * path than its sealed meta.msgpack (written by this listener, checksum intact). The listener picks
 * "the latest run for this host and path" by the catalog's metadata, so a verify of that path is
 * answered with the older run (all its acks kept) and the newest run, the one a cut hit, is never
 * judged; the background check then blames meta.msgpack (whole, its checksum holds) as damaged.
 * The run files are the authority: the latest run of the path is the one its files say (as
 * verify --acks answers), or the query is refused (exit 3) - never the older run in its place.
 */
import t from 'tap'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Packr } from 'msgpackr'
import { AckStore } from '../../src/server/ack-store.js'
import { seal, unseal } from '../../src/server/sealed-file.js'
import { tempDir } from '../fixtures/cli.js'
import { runIdOf, runMeta } from '../server/peer.js'

const packr = new Packr({ useRecords: false, mapsAsObjects: true })
type Entry = Record<string, unknown>
const path = '/data/db'
const older = runIdOf(0x43001)
const newer = runIdOf(0x43002)

function recraft(dir: string, craft: (entries: Entry[]) => void): void {
  const file = unseal('catalog', readFileSync(join(dir, 'catalog.msgpack')))
  if (file.kind !== 'sealed') throw new Error('not a sealed catalog')
  const [header, ...slices] = new Packr({ useRecords: true, mapsAsObjects: true }).unpackMultiple(file.body) as [Entry, ...Entry[][]]
  const entries = slices.flat()
  craft(entries)
  const body = [packr.pack({ ...header, version: 2, runs: entries.length }), new Packr({ useRecords: true, mapsAsObjects: true }).pack(entries)]
  writeFileSync(join(dir, 'catalog.msgpack'), seal('catalog', Buffer.concat(body)))
}

async function record(store: AckStore, runId: string, acked: number): Promise<void> {
  const nowMs = Date.now()
  await store.createRun(runMeta(runId, { createdMs: nowMs - 1000, requestedPath: path, path }), nowMs - 1000)
  const recorded = new Promise<void>((resolve) => store.on('recorded', (id, through) => void (id === runId && through === acked && resolve())))
  for (let seq = 1; seq <= acked; seq++) store.appendAck(runId, seq, seq, Date.now())
  store.endRun(runId, 'vanished', undefined, Date.now())
  await recorded
}

t.test("the newest run's requested path changed in the catalog: the path's latest run is still the newest, or refused", async (t) => {
  const dir = tempDir(t)
  const first = await AckStore.open(dir)
  await record(first, older, 50)
  await record(first, newer, 9)
  await first.close()
  recraft(dir, (entries) => {
    const entry = entries.find((e) => e.id === newer)!
    entry.meta = { ...(entry.meta as Entry), requestedPath: '/data/elsewhere' }
  })
  const truth = await AckStore.load(dir)
  t.match(truth.query('testhost', path), [{ meta: { runId: newer } }], 'verify --acks (the files): the newer run is the latest of the path')

  const store = await AckStore.open(dir)
  t.teardown(() => store.close())
  const during = await store.queryAsync('testhost', path).then((runs) => runs.map((r) => r.meta.runId), (error: { exitCode?: number }) => error.exitCode)
  t.notSame(during, [older], 'before the background check: not the older run in place of the newest')
  t.ok(during === 3 || JSON.stringify(during) === JSON.stringify([newer]), `before the check: the newest run, or refused with exit 3 (got ${JSON.stringify(during)})`)
  await store.startScrub()
  const after = await store.queryAsync('testhost', path).then((runs) => runs.map((r) => r.meta.runId), (error: { exitCode?: number }) => error.exitCode)
  t.ok(after === 3 || JSON.stringify(after) === JSON.stringify([newer]), `after the check: the newest run, or refused with exit 3 (got ${JSON.stringify(after)})`)
  t.notMatch(store.warnings.join('\n'), /could not read .*meta\.msgpack/, 'meta.msgpack, whole with its checksum, is not named as the damaged file')
  t.match(store.warnings.join('\n'), /catalog\.msgpack/, 'the catalog is named as what disagrees with the run files')
})
