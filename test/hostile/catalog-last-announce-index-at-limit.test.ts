/**
 * A catalog whose checksum holds and whose header says the last announcement index is
 * Number.MAX_SAFE_INTEGER (a count its schema accepts; no entry breaks a rule): the listener takes it
 * as its announcement counter, so the next run announced is stored with index 2^53, an index its own
 * meta.msgpack schema refuses, and the one after it with 2^53 again (2^53 + 1 is not a double). The
 * runs recorded after that catalog are then unreadable: the next start refuses the directory (exit 3,
 * meta.msgpack "damaged"), and every recorded ack is unanswerable. A catalog is a cache: one like
 * this must be refused with a warning (a full replay, the counter taken from the run files), and the
 * runs recorded after it read back at the next start.
 */
import t from 'tap'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Packr } from 'msgpackr'
import { AckStore, frameLogEntry } from '../../src/store/ack-store.js'
import { tempDir } from '../fixtures/cli.js'
import { recraftCatalog } from '../fixtures/catalog-values.js'
import { runIdOf, runMeta } from '../fixtures/peer.js'
import { recordRun } from '../fixtures/store-fixture.js'

const packr = new Packr({ useRecords: false, mapsAsObjects: true })

/** runId acked 1..acked, ended by its duration. */
function record(store: AckStore, runId: string, acked: number): Promise<void> {
  return recordRun(store, runMeta(runId, { createdMs: Date.now() - 1000 }), acked, 'duration')
}

t.test('a catalog saying the last announcement index is MAX_SAFE_INTEGER: runs recorded after it survive a restart', async (t) => {
  const dir = tempDir(t)
  const first = await AckStore.open(dir)
  await record(first, runIdOf(0x46001), 10)
  await first.close()
  recraftCatalog(dir, (_entries, header) => void (header.lastAnnounceIndex = Number.MAX_SAFE_INTEGER))

  const second = await AckStore.open(dir)
  await record(second, runIdOf(0x46002), 20)
  await record(second, runIdOf(0x46003), 30)
  await second.close()

  let third: AckStore | undefined
  try {
    third = await AckStore.open(dir)
  } catch (error) {
    t.fail(`the restart after the runs recorded under that catalog must succeed: ${(error as Error).message}`)
    return
  }
  t.teardown(() => third!.close())
  for (const [n, acked] of [
    [0x46001, 10],
    [0x46002, 20],
    [0x46003, 30],
  ] as const) {
    const runId = runIdOf(n)
    t.match(
      await third.queryAsync('testhost', `/data/${runId}`, runId),
      [{ ackedThroughSeq: acked }],
      `run ${runId}: every recorded ack answered`,
    )
  }
  const order = third.summaries().map((s) => s.runId)
  t.same(order, [runIdOf(0x46003), runIdOf(0x46002), runIdOf(0x46001)], 'announcement order kept: the last announced is the newest')
})

t.test(
  'a run file whose announcement index is the highest meta.msgpack takes: a new run is refused with a clear error, never stored unreadable',
  async (t) => {
    const dir = tempDir(t)
    const nowMs = Date.now()
    const runId = runIdOf(0x46010)
    mkdirSync(join(dir, 'runs', runId), { recursive: true })
    writeFileSync(
      join(dir, 'runs', runId, 'acks.log'),
      frameLogEntry({ k: 'ack', fromSeq: 1, toSeq: 5, firstMs: nowMs - 2000, lastMs: nowMs - 1000 }),
    )
    writeFileSync(
      join(dir, 'runs', runId, 'meta.msgpack'),
      packr.pack({ meta: runMeta(runId, { createdMs: nowMs - 3000 }), announcedMs: nowMs - 3000, announceIndex: Number.MAX_SAFE_INTEGER }),
    )
    const store = await AckStore.open(dir)
    await t.rejects(
      store.createRun(runMeta(runIdOf(0x46011), { createdMs: nowMs }), nowMs),
      /could not store run 0+46011: the listener's last announcement is number 9007199254740991, the highest a run can be stored with/,
    )
    await store.close()
    const again = await AckStore.open(dir)
    t.teardown(() => again.close())
    t.same(
      again.summaries().map((s) => s.runId),
      [runId],
      'the directory still loads, the refused run not in it',
    )
  },
)
