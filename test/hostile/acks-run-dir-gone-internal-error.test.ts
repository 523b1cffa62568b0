/**
 * verify --acks DIR --file PATH, where PATH's run is in DIR's catalog but its directory under runs/ was
 * removed: the store names the run ("the run's directory is gone ... its queries are refused") and
 * must refuse that run's query with that damage (exit 3), as the listener on DIR does ("the listener
 * at ... failed: could not read DIR/runs/RUNID: the run's directory is gone"). Instead verify --acks
 * crashes: "plugcheck: internal error: Error: query() of evicted runs: the listener uses
 * queryAsync()" with a stack trace (the catalogued run is restored as evicted, and the synchronous
 * query() checks evicted before damaged). The same in the tree before the reorganisation.
 */
import t from 'tap'
import { mkdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { AckStore } from '../../src/store/ack-store.js'
import { runCli, tempDir } from '../fixtures/cli.js'
import { craftMeta, range, writeDataFile } from '../fixtures/crafted-run.js'
import { runIdOf } from '../fixtures/peer.js'
import { recordRun } from '../fixtures/store-fixture.js'

t.test('verify --acks on a catalogued run whose directory is gone: the damage named, exit 3, no internal error', async (t) => {
  const base = tempDir(t)
  const dir = join(base, 'listener')
  mkdirSync(dir, { recursive: true })
  const store = await AckStore.open(dir)
  const meta = craftMeta(runIdOf(0x47001), join(base, 'a.dat'))
  await recordRun(store, meta, 30, 'duration', { peer: '127.0.0.1' })
  await store.close()
  writeDataFile(meta, range(1, 30), { sizeSlots: meta.slotCount })
  const before = await runCli(['verify', '--acks', dir, '--file', meta.path, '--run', meta.runId])
  t.equal(before.code, 0, `whole: PASS (got ${before.code}: ${before.stderr})`)

  rmSync(join(dir, 'runs', meta.runId), { recursive: true })
  for (const args of [['--run', meta.runId], []]) {
    const r = await runCli(['verify', '--acks', dir, '--file', meta.path, ...args])
    t.equal(r.code, 3, `damaged listener data: exit 3 (got ${r.code})`)
    t.notMatch(r.stderr, /internal error/, `no internal error: ${r.stderr}`)
    t.notMatch(r.stderr, /\n\s+at /, 'no stack trace')
    t.match(r.stderr, /the run's directory is gone/, 'the damage is named')
    t.notMatch(r.stdout, /PASS|FAIL/, 'no verdict')
  }
})
