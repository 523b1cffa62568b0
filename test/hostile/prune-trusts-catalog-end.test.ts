/**
 * `runs --prune` opens the directory with its catalog and selects from the catalog's entries without
 * holding them against the run files first (the background check never runs there, and it would not
 * look at an end's time or reason anyway). A catalog whose checksum holds but whose entry says a run
 * ended long ago as 'duration', where acks.log says it vanished an hour ago (a cut still to judge),
 * makes the prune delete that run for good, while --dry-run (a full replay of the files) says it
 * would prune nothing. The run files are the authority: nothing is pruned, as --dry-run says.
 */
import t from 'tap'
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Packr } from 'msgpackr'
import { AckStore, frameLogEntry } from '../../src/store/ack-store.js'
import { runCli, startListener, tempDir, waitFor } from '../fixtures/cli.js'
import { entryOf, recraftCatalog, type CatalogValue as Entry } from '../fixtures/catalog-values.js'
import { runIdOf, runMeta } from '../fixtures/peer.js'
import { verdictOf } from '../fixtures/verdict-fixture.js'

const packr = new Packr({ useRecords: false, mapsAsObjects: true })
const dayMs = 24 * 3_600_000

const crafts: Array<[string, (entry: Entry, nowMs: number) => void]> = [
  [
    'an old ordinary end where the log says a fresh vanish',
    (entry, nowMs) => void (entry.end = { reason: 'duration', atMs: nowMs - 40 * dayMs }),
  ],
  [
    'an old end and a stored verdict where the run has none (unjudged)',
    (entry, nowMs) => {
      entry.end = { ...(entry.end as Entry), atMs: nowMs - 40 * dayMs }
      entry.verdict = verdictOf({ acked: 20, intact: 20, lost: 0, lostRanges: [], verdict: 'pass', lossWindowMs: null })
      entry.verdictBytes = 300
    },
  ],
]

/** A listener's directory with one run, vanished 1 h ago and unjudged, whose catalog entry is crafted; its directory. */
async function craftedDirectory(dir: string, craft: (entry: Entry, nowMs: number) => void): Promise<string> {
  const nowMs = Date.now()
  const runId = runIdOf(0x42001)
  const runDir = join(dir, 'runs', runId)
  mkdirSync(runDir, { recursive: true })
  mkdirSync(join(dir, 'journal'), { recursive: true })
  // Announced 2 h ago, acked 1..20, its writer vanished 1 h ago (a cut), no verdict yet.
  writeFileSync(
    join(runDir, 'acks.log'),
    Buffer.concat([
      frameLogEntry({ k: 'ack', fromSeq: 1, toSeq: 20, firstMs: nowMs - 7_000_000, lastMs: nowMs - 3_700_000 }),
      frameLogEntry({ k: 'end', reason: 'vanished', atMs: nowMs - 3_600_000 }),
    ]),
  )
  writeFileSync(
    join(runDir, 'meta.msgpack'),
    packr.pack({
      meta: runMeta(runId, { createdMs: nowMs - 7_200_000 }),
      announcedMs: nowMs - 7_200_000,
      announceIndex: 1,
      peer: '127.0.0.1',
    }),
  )
  await (await AckStore.open(dir)).close() // the catalog, written from the files
  recraftCatalog(dir, (entries) => {
    craft(entryOf(entries, runId), nowMs)
  })
  return runDir
}

for (const [name, craft] of crafts)
  t.test(`a catalog entry saying ${name}: runs --prune keeps the run, as --dry-run says`, async (t) => {
    const dir = tempDir(t)
    const runDir = await craftedDirectory(dir, craft)

    const dry = await runCli(['runs', '--prune', '--older-than', '30d', '--dir', dir, '--dry-run', '--json'])
    t.equal(dry.code, 0, `dry run exit 0 (${dry.stderr})`)
    t.match(JSON.parse(dry.stdout), { runs: 0 }, '--dry-run (the run files): nothing would be pruned')

    const real = await runCli(['runs', '--prune', '--older-than', '30d', '--dir', dir, '--json'])
    t.ok(existsSync(join(runDir, 'acks.log')), 'the vanished, unjudged run is still on disk after the prune')
    t.match(JSON.parse(real.stdout || '{}'), { runs: 0 }, 'the prune pruned nothing, as --dry-run said')
    t.match(real.stderr, /catalog/, 'the catalog that disagrees with the run files is named')
  })

for (const [name, craft] of crafts)
  t.test(`a catalog entry saying ${name}: listen --retain keeps the run`, async (t) => {
    const dir = tempDir(t)
    const runDir = await craftedDirectory(dir, craft)
    const listener = await startListener(dir, ['--retain', '30d'])
    t.teardown(() => listener.kill())
    // Retention waits for the background check, which takes the run from its files naming the catalog
    // (or the retention tick names it, when it holds the run against its files first).
    await waitFor(
      'a warning naming the catalog',
      () => /catalog\.msgpack (says .*where its files say|recorded .*where its files hold .*differs in end)/.test(listener.stderr()),
      20_000,
    ).catch((error: Error) => t.fail(error.message))
    t.ok(existsSync(join(runDir, 'acks.log')), 'the vanished, unjudged run is still on disk')
    t.notMatch(listener.stderr(), /pruned \d/, 'nothing was pruned')
  })
