/**
 * The catalog is a cache of the run files: a crafted one, even with a valid checksum, never makes the
 * listener answer other than what the files hold once its background check has replayed them
 * (README). The check compares the meta, the counts and whether the run ended, but not how it
 * ended: a catalog entry saying the run ended 'storage-lost' (or 'file-changed') where its log says
 * 'duration' is answered as such for good (and written back to every later catalog), and verify's
 * verdict turns on that reason (judge.ts: storage-lost; verify.ts: file-changed), where a restart
 * without the catalog and `verify --acks` on a copy of the directory answer 'duration'. With the CLI
 * (listener restarted on the crafted catalog, reason 'file-changed'): verify through the listener says
 * "NOT JUDGED: ... ended because crafted." (exit 2); `verify --acks DIR` on the same directory: PASS (exit 0).
 */
import t from 'tap'
import { cpSync } from 'node:fs'
import { AckStore } from '../../src/store/ack-store.js'
import { encodeCatalog, readCatalog, writeCatalog, type CatalogEntry } from '../../src/store/catalog.js'
import { tempDir } from '../fixtures/cli.js'
import { runIdOf, runMeta } from '../fixtures/peer.js'

t.test("a catalog entry with another end reason than the run's log is not answered once the files are checked", async (t) => {
  const dir = tempDir(t, 'plugcheck-catalog-end-')
  const store = await AckStore.open(dir)
  const runId = runIdOf(0xa1a00)
  const meta = runMeta(runId)
  await store.createRun(meta, Date.now())
  const done = new Promise<void>((resolve) => store.once('recorded', () => resolve()))
  store.appendAck(runId, 1, 10, Date.now())
  await done
  store.endRun(runId, 'duration', undefined, Date.now())
  store.release(runId, Date.now())
  await store.close()

  const catalog = await readCatalog(dir)
  if (catalog === 'missing' || 'problem' in catalog) throw new Error('no catalog written')
  const entry = catalog.entries.find((e) => e.id === runId)!
  t.equal(entry.end?.reason, 'duration', 'the catalog holds the run as ended by duration')
  const crafted: CatalogEntry[] = catalog.entries.map((e) =>
    e.id === runId ? { ...e, end: { reason: 'file-changed', detail: 'crafted', atMs: e.end!.atMs } } : e,
  )
  await writeCatalog(dir, await encodeCatalog(catalog.lastAnnounceIndex, crafted, (e) => e))

  const copy = tempDir(t, 'plugcheck-catalog-end-copy-')
  cpSync(dir, copy, { recursive: true })
  const checked = (await AckStore.load(copy)).query(meta.host, meta.requestedPath, runId)[0]!
  t.equal(checked.end?.reason, 'duration', 'verify --acks on a copy: ended by duration, as its log says')

  const reopened = await AckStore.open(dir)
  t.teardown(() => reopened.close())
  await reopened.startScrub()
  const [answer] = await reopened.queryAsync(meta.host, meta.requestedPath, runId)
  t.equal(answer!.ackedThroughSeq, 10)
  t.equal(
    answer!.end?.reason,
    checked.end?.reason,
    `the listener, its files checked, answers the end its log holds (answered ${JSON.stringify(answer!.end)}; warnings: ${JSON.stringify(reopened.warnings)})`,
  )
})

t.test(
  "a catalog entry differing from the run's files in steady, order or origin: the background check takes the run from its files and writes the catalog again",
  async (t) => {
    const dir = tempDir(t, 'plugcheck-catalog-origin-')
    const store = await AckStore.open(dir)
    const runId = runIdOf(0xa1a01)
    const meta = runMeta(runId)
    await store.createRun(meta, Date.now(), { peer: '127.0.0.1', authenticated: false })
    const done = new Promise<void>((resolve) => store.once('recorded', () => resolve()))
    store.appendAck(runId, 1, 10, Date.now())
    store.recordSteady(runId, Date.now())
    await done
    store.endRun(runId, 'duration', undefined, Date.now())
    await store.close()

    const catalog = await readCatalog(dir)
    if (catalog === 'missing' || 'problem' in catalog) throw new Error('no catalog written')
    const entry = catalog.entries.find((e) => e.id === runId)!
    t.ok(entry.steadyMs !== null, 'the run was steady')
    // A steady at another time is not less than the files hold (a steady missing from them would be damage: a refusal).
    const crafted: CatalogEntry = {
      ...entry,
      peer: '10.6.6.6',
      authenticated: true,
      steadyMs: entry.steadyMs! + 1,
      campaign: { name: 'crafted', cycle: 1 },
    }
    await writeCatalog(
      dir,
      await encodeCatalog(
        catalog.lastAnnounceIndex,
        catalog.entries.map((e) => (e.id === runId ? crafted : e)),
        (e) => e,
      ),
    )

    const reopened = await AckStore.open(dir)
    t.equal(
      reopened.summaries().find((s) => s.runId === runId)?.peer,
      '10.6.6.6',
      "before the check, the catalog's entry is shown (README)",
    )
    await reopened.startScrub()
    const summary = reopened.summaries().find((s) => s.runId === runId)!
    const claim = reopened.claims(meta.host, meta.requestedPath).find((c) => c.runId === runId)!
    t.equal(summary.peer, '127.0.0.1', 'the peer meta.msgpack holds')
    t.equal(claim.authenticated, false, 'authenticated as meta.msgpack holds')
    t.equal(summary.steadyMs, entry.steadyMs, 'steady when the log says')
    t.equal(summary.campaign, null, 'no campaign, as meta.msgpack holds')
    t.match(
      reopened.warnings.join('\n'),
      new RegExp(
        `run ${runId}: .*catalog\\.msgpack recorded .*; it differs in steady .*peer .*authenticated .*campaign .*: the run is taken from its files, and the catalog written again`,
      ),
      'a warning names the catalog and the fields',
    )
    await reopened.close()
    const rewritten = await readCatalog(dir)
    if (rewritten === 'missing' || 'problem' in rewritten) throw new Error('no catalog written again')
    const again = rewritten.entries.find((e) => e.id === runId)!
    t.same(
      { peer: again.peer, authenticated: again.authenticated, steadyMs: again.steadyMs, campaign: again.campaign },
      { peer: '127.0.0.1', authenticated: false, steadyMs: entry.steadyMs, campaign: undefined },
      'the catalog written again holds the files',
    )
  },
)
