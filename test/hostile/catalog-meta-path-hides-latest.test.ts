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
import { AckStore } from '../../src/store/ack-store.js'
import { tempDir } from '../fixtures/cli.js'
import { entryOf, recraftCatalog, type CatalogValue } from '../fixtures/catalog-values.js'
import { runIdOf, runMeta } from '../fixtures/peer.js'
import { recordRun } from '../fixtures/store-fixture.js'

const path = '/data/db'
const older = runIdOf(0x43001)
const newer = runIdOf(0x43002)

/** runId on the path, acked 1..acked, its writer vanished. */
function record(store: AckStore, runId: string, acked: number): Promise<void> {
  return recordRun(store, runMeta(runId, { createdMs: Date.now() - 1000, requestedPath: path, path }), acked, 'vanished')
}

t.test("the newest run's requested path changed in the catalog: the path's latest run is still the newest, or refused", async (t) => {
  const dir = tempDir(t)
  const first = await AckStore.open(dir)
  await record(first, older, 50)
  await record(first, newer, 9)
  await first.close()
  recraftCatalog(dir, (entries) => {
    const entry = entryOf(entries, newer)
    entry.meta = { ...(entry.meta as CatalogValue), requestedPath: '/data/elsewhere' }
  })
  const truth = await AckStore.load(dir)
  t.match(truth.query('testhost', path), [{ meta: { runId: newer } }], 'verify --acks (the files): the newer run is the latest of the path')

  const store = await AckStore.open(dir)
  t.teardown(() => store.close())
  const during = await store.queryAsync('testhost', path).then(
    (runs) => runs.map((r) => r.meta.runId),
    (error: { exitCode?: number }) => error.exitCode,
  )
  t.notSame(during, [older], 'before the background check: not the older run in place of the newest')
  t.ok(
    during === 3 || JSON.stringify(during) === JSON.stringify([newer]),
    `before the check: the newest run, or refused with exit 3 (got ${JSON.stringify(during)})`,
  )
  await store.startScrub()
  const after = await store.queryAsync('testhost', path).then(
    (runs) => runs.map((r) => r.meta.runId),
    (error: { exitCode?: number }) => error.exitCode,
  )
  t.ok(
    after === 3 || JSON.stringify(after) === JSON.stringify([newer]),
    `after the check: the newest run, or refused with exit 3 (got ${JSON.stringify(after)})`,
  )
  t.notMatch(
    store.warnings.join('\n'),
    /could not read .*meta\.msgpack/,
    'meta.msgpack, whole with its checksum, is not named as the damaged file',
  )
  t.match(store.warnings.join('\n'), /catalog\.msgpack/, 'the catalog is named as what disagrees with the run files')
})
