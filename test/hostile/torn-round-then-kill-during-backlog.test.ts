/**
 * A kill -9 mid-round leaves the newest journal segment with a torn last round (never reported
 * recorded: ignored with a warning at the next start). That start leaves the torn segment as it is
 * and starts a new segment after it, then listens and folds the torn one in the background. A second
 * kill -9 before that fold deleted it (any moment of the backlog fold, now minutes on a large backlog
 * while writers are served) leaves the torn segment no longer last: every later start, and every
 * `verify --acks`, refuses the directory, "damaged at byte B: the entry there is cut short by the end
 * of the file, and only the last round of the last segment can be torn by a crash", exit 3, for
 * every run. Kill -9 at any moment must leave a directory that starts with every recorded ack.
 * Worse, a clean stop does it too: with two segments in the backlog (the torn one newest), a SIGTERM
 * during the first one's fold "finishes the segment under way and leaves the rest to the next start"
 * (README), and the next start refuses the torn segment left before the new one.
 */
import t from 'tap'
import { cpSync, existsSync, readdirSync, statSync, truncateSync } from 'node:fs'
import { join } from 'node:path'
import { AckStore } from '../../src/store/ack-store.js'
import { tempDir } from '../fixtures/cli.js'
import { recorded } from '../fixtures/store-fixture.js'
import { runMeta, runIdOf } from '../fixtures/peer.js'

t.test('a torn last round, a start, a kill -9 during its backlog fold: the next start still works', async (t) => {
  const dir = tempDir(t, 'plugcheck-torn-backlog-')
  const live = await AckStore.open(dir, { foldAgeMs: 600_000 })
  const ids = Array.from({ length: 8 }, (_, i) => runIdOf(0xb000 + i))
  for (const id of ids) await live.createRun(runMeta(id), Date.now())
  for (const id of ids) {
    const done = recorded(live, id, 3)
    live.appendAck(id, 1, 3, Date.now())
    await done
  }
  const x = ids[0]!
  const done = recorded(live, x, 4)
  live.appendAck(x, 4, 4, Date.now())
  await done
  // The first kill -9: mid-round, the round of ack 4 torn.
  const crashed = tempDir(t, 'plugcheck-torn-backlog-crash-')
  cpSync(dir, crashed, { recursive: true })
  await live.close()
  const segment = join(crashed, 'journal', readdirSync(join(crashed, 'journal')).sort().at(-1)!)
  truncateSync(segment, statSync(segment).size - 5)

  const store = await AckStore.open(crashed)
  t.match(store.warnings.join('\n'), /ignored \d+ bytes of a torn journal round/, 'the start ignores the torn round')
  // The second kill -9: while its backlog (the torn segment) is being folded.
  const again = tempDir(t, 'plugcheck-torn-backlog-crash2-')
  cpSync(crashed, again, { recursive: true })
  await store.close()

  const loaded = await AckStore.load(again).catch((error: Error) => error)
  t.notOk(loaded instanceof Error, `verify --acks reads it (${loaded instanceof Error ? loaded.message : 'ok'})`)
  if (!(loaded instanceof Error))
    t.same(
      ids.map((id) => loaded.lastAckedSeq(id)),
      ids.map(() => 3),
      'every recorded ack (ack 4 of the torn round was never recorded)',
    )
  const reopened = await AckStore.open(again).catch((error: Error) => error)
  t.notOk(reopened instanceof Error, `a listener starts on it (${reopened instanceof Error ? reopened.message : 'ok'})`)
  if (!(reopened instanceof Error)) await reopened.close()
})

t.test('a torn last round, a start, a clean stop during its backlog fold: the next start still works', async (t) => {
  const dir = tempDir(t, 'plugcheck-torn-stop-')
  const live = await AckStore.open(dir, { foldAgeMs: 600_000 })
  live.setMaxListeners(0)
  const ids = Array.from({ length: 400 }, (_, i) => runIdOf(0xc000 + i))
  await Promise.all(ids.map((id) => live.createRun(runMeta(id), Date.now())))
  await Promise.all(
    ids.map((id) => {
      const done = recorded(live, id, 3)
      live.appendAck(id, 1, 3, Date.now())
      return done
    }),
  )
  const journal = join(dir, 'journal')
  const first = join(journal, readdirSync(journal).sort().at(-1)!)
  const internals = live as unknown as { unfolded: unknown[] }
  const folding = live.foldNow() // a rotation: the first segment folded in the background
  const x = ids[0]!
  let crashed: string | undefined
  for (let i = 0; i < 100_000 && crashed === undefined; i++) {
    await new Promise((resolve) => setImmediate(resolve))
    if (internals.unfolded.length >= 1 && live.lastAckedSeq(x) === 3) {
      for (const seq of [4, 5]) {
        const done = recorded(live, x, seq)
        live.appendAck(x, seq, seq, Date.now())
        await done // a round each, in the new segment
      }
    }
    const newest = join(journal, readdirSync(journal).sort().at(-1)!)
    // The kill -9: the first segment not folded yet, two rounds in the new one (the last then torn).
    if (live.lastAckedSeq(x) === 5 && existsSync(first) && newest !== first && statSync(newest).size > 100) {
      crashed = tempDir(t, 'plugcheck-torn-stop-crash-')
      cpSync(dir, crashed, { recursive: true })
    }
  }
  await folding
  await live.close()
  t.ok(crashed !== undefined, 'a moment with two segments in the journal')
  if (crashed === undefined) return
  const newest = join(crashed, 'journal', readdirSync(join(crashed, 'journal')).sort().at(-1)!)
  truncateSync(newest, statSync(newest).size - 5)

  const store = await AckStore.open(crashed)
  t.equal(store.backlogFolds, 2, 'the start folds two segments in the background')
  await store.close() // SIGTERM at once: the first segment's fold finishes, the torn one is left
  const reopened = await AckStore.open(crashed).catch((error: Error) => error)
  t.notOk(reopened instanceof Error, `the next start works (${reopened instanceof Error ? reopened.message : 'ok'})`)
  if (!(reopened instanceof Error)) {
    t.equal(reopened.lastAckedSeq(x), 4, 'with every recorded ack (ack 5, torn, was never recorded)')
    await reopened.close()
  }
})
