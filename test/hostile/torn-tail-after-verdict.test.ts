/**
 * A run ended, was verified, and its verdict stored at the listener (sealed, checksummed: FAIL, 500 of 1500 acked records lost).
 * Then its acks.log loses the bytes of its last entry (the commit holding its last acks and its end).
 * Replay takes that for a torn tail, "the last commit, cut short by a crash, was never reported as
 * recorded", judges the run with fewer acks (PASS: the 500 lost records are no longer acknowledged) and calls the verdict damaged instead. But the stored
 * verdict counted those acks: they were in the log when the run was judged, after its end, so the
 * missing tail is damage, not the commit a crash cut short. The log must be refused (exit 3, naming
 * acks.log), never judged with fewer acks than a stored verdict counted.
 */
import t from 'tap'
import { statSync, truncateSync } from 'node:fs'
import { join } from 'node:path'
import { AckStore } from '../../src/store/ack-store.js'
import { runInProcess, tempDir } from '../fixtures/cli.js'
import { craftMeta, range, writeDataFile } from '../fixtures/crafted-run.js'
import { runIdOf } from '../fixtures/peer.js'
import { verdictOf } from '../fixtures/verdict-fixture.js'

t.test('a torn tail that drops acks a stored verdict counted is damage, named', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'data')
  const runId = runIdOf(0xa1e)
  const announcedMs = Date.now() - 5000
  const meta = craftMeta(runId, file, { requestedPath: file, createdMs: announcedMs, slotCount: 2000 })
  const store = await AckStore.open(dir)
  await store.createRun(meta, announcedMs)
  store.appendAck(runId, 1, 1000, Date.now())
  await new Promise<void>((resolve) => store.once('recorded', () => resolve()))
  // The last acks and the end, in one commit.
  store.appendAck(runId, 1001, 1500, Date.now())
  store.endRun(runId, 'duration', undefined, Date.now())
  await new Promise<void>((resolve) => store.once('recorded', () => resolve()))
  await store.recordVerdict(
    runId,
    verdictOf({ verdict: 'fail', acked: 1500, intact: 1000, lost: 500, lostRanges: [[1001, 1500]], lossWindowMs: 0, summary: 'FAIL' }),
  )
  await store.close()
  writeDataFile(meta, range(1, 1000), { sizeSlots: 2000 }) // records 1001-1500 lost
  t.equal((await runInProcess(['verify', '--acks', dir, '--file', file])).code, 1, 'intact: FAIL')

  const log = join(dir, 'runs', runId, 'acks.log')
  truncateSync(log, statSync(log).size - 5)
  const loaded = await AckStore.load(dir).catch((error: Error) => error)
  t.ok(
    loaded instanceof Error,
    `the store refuses the log (${loaded instanceof Error ? '' : `it loads with acks 1-${loaded.lastAckedSeq(runId)}`})`,
  )
  const offline = await runInProcess(['verify', '--acks', dir, '--file', file])
  t.equal(offline.code, 3, `verify --acks exits 3 (${offline.stdout.split('\n')[0]} / ${offline.stderr.split('\n')[0]})`)
  t.equal(offline.stdout, '', 'no verdict')
  t.match(offline.stderr, new RegExp(`could not read ${log}`), 'the log named as what is damaged')
})
