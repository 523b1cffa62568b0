/**
 * Runs are ordered by the order the listener took their announcements in, not by its clock: a clock
 * stepped back between two announcements (NTP) must not make the older run the latest for its path,
 * before or after a restart; claims (newest first) use the same order. Meta files of older listeners
 * (no announceIndex) come before every run that has one.
 */
import t from 'tap'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Packr } from 'msgpackr'
import { AckStore } from '../../../src/store/ack-store.js'
import { unseal } from '../../../src/store/sealed-file.js'
import { tempDir } from '../../fixtures/cli.js'
import { runIdOf, runMeta } from '../../fixtures/peer.js'

const onPath = (runId: string) => runMeta(runId, { requestedPath: '/data/db', path: '/data/db' })
const packr = new Packr({ useRecords: false, int64AsType: 'number', mapsAsObjects: true })

t.test('a clock stepped back between two announcements', async (t) => {
  const dir = tempDir(t)
  const first = runIdOf(0xb2) // a higher id than the second: the order cannot come from ids either
  const second = runIdOf(0xb1)
  const nowMs = Date.now()
  const store = await AckStore.open(dir)
  await store.createRun(onPath(first), nowMs)
  await store.createRun(onPath(second), nowMs - 30_000) // the clock stepped back 30 s
  t.same(
    store.query('testhost', '/data/db').map((r) => r.meta.runId),
    [second],
    'the run announced last is the latest',
  )
  t.same(
    store.claims('testhost', '/data/db').map((c) => c.runId),
    [second, first],
    'claims newest first',
  )
  await store.close()

  const restarted = await AckStore.load(dir)
  t.same(
    restarted.query('testhost', '/data/db').map((r) => r.meta.runId),
    [second],
    'and after a restart',
  )
  t.same(
    restarted.claims('testhost', '/data/db').map((c) => c.runId),
    [second, first],
  )

  // A third announcement after the restart continues the order.
  const reopened = await AckStore.open(dir)
  const third = runIdOf(0xb0)
  await reopened.createRun(onPath(third), nowMs - 60_000)
  t.same(
    reopened.query('testhost', '/data/db').map((r) => r.meta.runId),
    [third],
  )
  await reopened.close()
})

t.test('meta files without announceIndex come first, in announcement time order', async (t) => {
  const dir = tempDir(t)
  const nowMs = Date.now()
  const store = await AckStore.open(dir)
  const legacyOld = runIdOf(0xc1)
  const legacyNew = runIdOf(0xc2)
  const current = runIdOf(0xc3)
  await store.createRun(onPath(legacyNew), nowMs - 10_000)
  await store.createRun(onPath(legacyOld), nowMs - 20_000)
  await store.createRun(onPath(current), nowMs - 60_000)
  await store.close()
  for (const runId of [legacyOld, legacyNew]) {
    const path = join(dir, 'runs', runId, 'meta.msgpack')
    // What an older listener wrote: no announceIndex, no checksum (a bare msgpack map).
    const sealed = unseal('meta', readFileSync(path))
    if (sealed.kind !== 'sealed') throw new Error(`${path} is not sealed`)
    const { announceIndex: _dropped, ...rest } = packr.unpack(sealed.body) as Record<string, unknown>
    writeFileSync(path, packr.pack(rest))
  }
  const restarted = await AckStore.load(dir)
  t.same(
    restarted.claims('testhost', '/data/db').map((c) => c.runId),
    [current, legacyNew, legacyOld],
  )
  t.same(
    restarted.query('testhost', '/data/db').map((r) => r.meta.runId),
    [current],
  )
})

t.test('a clock stepped back during a run: ack stamps still advance with real time', async (t) => {
  const dir = tempDir(t)
  const store = await AckStore.open(dir)
  t.teardown(() => store.close())
  const runId = runIdOf(0xc1)
  // Announced an hour "ahead" of the clock: as if the wall clock stepped back by an hour right after.
  const announcedMs = Date.now() + 3_600_000
  await store.createRun(onPath(runId), announcedMs)
  const stamps: number[] = []
  for (let seq = 1; seq <= 3; seq++) {
    stamps.push(store.ackStampMs(runId, Date.now()))
    store.appendAck(runId, seq, seq, Date.now())
    await new Promise((resolve) => setTimeout(resolve, 60))
  }
  t.ok(stamps[0]! >= announcedMs, 'never before the announcement')
  t.ok(stamps[2]! - stamps[0]! >= 100, `stamps advance by the monotonic clock, not frozen at the announcement (${stamps.join(', ')})`)
})
