/**
 * "A run's files damaged since start refuse that query (exit 3 for verify), naming the file" and a
 * query answers what a restart replays (README). A live run past its resident spans is read back once
 * and its copy cached; later queries read only what was folded since. A bit flipped in the part of the
 * log already read is never seen: the listener goes on answering every ack, where a restart (and
 * `verify --acks` on a copy of the directory) refuses the run as damaged. Same for an ended run whose
 * copy the fold left in the cache.
 */
import t from 'tap'
import { cpSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { AckStore } from '../../src/store/ack-store.js'
import { tempDir } from '../fixtures/cli.js'
import { runIdOf, runMeta } from '../fixtures/peer.js'
import { liveRunOutOfMemory, recorded } from '../fixtures/store-fixture.js'

t.test(
  'a live run whose log was damaged where its cached copy was read from: the next query is refused, as a restart refuses it',
  async (t) => {
    const { dir, store, meta, log, ackAlone } = await liveRunOutOfMemory(t, 0xa1900, 'plugcheck-cached-')
    const runId = meta.runId
    const first = (await store.queryAsync(meta.host, meta.requestedPath, runId))[0]!
    t.equal(first.ackedThroughSeq, 3, 'read back once (and cached) through seq 3')
    // A bit flipped in the log's first commit (already read into the cached copy).
    const header = readFileSync(log).readUInt32LE(0) + 12
    const bytes = readFileSync(log)
    bytes[header + 14]! ^= 0x40
    writeFileSync(log, bytes)
    for (let i = 0; i < 2; i++) await ackAlone()
    await store.foldNow()
    // What a restart (or verify --acks on a copy) makes of the directory now.
    const copy = tempDir(t, 'plugcheck-cached-copy-')
    cpSync(dir, copy, { recursive: true })
    await t.rejects(AckStore.load(copy), { message: new RegExp(`damaged at byte ${header}`) }, 'a restart refuses the damaged log')
    await t.rejects(
      store.queryAsync(meta.host, meta.requestedPath, runId),
      { message: /acks\.log: damaged at byte/ },
      'the listener refuses the query too, naming the log, as it says it does for files damaged since start',
    )
  },
)

t.test('an ended run left in the read-back cache by its fold: its log damaged afterwards refuses the query', async (t) => {
  const dir = tempDir(t, 'plugcheck-cached-')
  const store = await AckStore.open(dir)
  t.teardown(() => store.close())
  const runId = runIdOf(0xa1901)
  const meta = runMeta(runId)
  await store.createRun(meta, Date.now())
  const done = recorded(store, runId, 3)
  store.appendAck(runId, 1, 3, Date.now())
  await done
  store.endRun(runId, 'duration', undefined, Date.now())
  store.release(runId, Date.now())
  await sleep(50)
  await store.foldNow()
  const log = join(dir, 'runs', runId, 'acks.log')
  const header = readFileSync(log).readUInt32LE(0) + 12
  const bytes = readFileSync(log)
  bytes[header + 14]! ^= 0x40
  writeFileSync(log, bytes)
  await t.rejects(
    store.queryAsync(meta.host, meta.requestedPath, runId),
    { message: /acks\.log: damaged at byte/ },
    'refused naming the log, as a restart refuses it',
  )
})
