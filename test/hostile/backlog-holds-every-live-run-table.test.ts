/**
 * Memory per run is bounded and independent of the run's length (README): a start after a kill -9 with
 * long runs live (their last commits in the journal, the rest folded into their logs long ago) replays
 * each one's whole log into memory and keeps that whole table until the journal's backlog is folded
 * (now in the background, after the listener listens: minutes on a large backlog). Here 24 runs of
 * 40,000 spans each, each with one commit left in the journal (a kill -9 in the seconds after their
 * last round), and a read-back cache of 1,000 spans: the start holds all ~960,000 spans at once; 20
 * week-long runs live at the cut (~1 M spans each, 24 bytes a span) hold ~0.5 GB, 100 of them never
 * listen. The spans held right after the start must stay within the cache and a run or two being
 * replayed (the runs' tables leave memory as runs wholly in runs/ do: read back for a query, from the
 * log and the journal).
 */
import t from 'tap'
import { appendFileSync, readdirSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { AckStore } from '../../src/store/ack-store.js'
import { frameCommit, maxItemsPerCommit } from '../../src/store/ack-log.js'
import { frameRound, readSegment } from '../../src/store/journal.js'
import { tempDir } from '../fixtures/cli.js'
import { runIdOf, runMeta } from '../fixtures/peer.js'

const runCount = 24
const spansPerRun = 40_000

t.test('a start with long runs live in the journal holds bounded spans', async (t) => {
  const dir = tempDir(t, 'plugcheck-backlog-tables-')
  const announcedMs = Date.now() - 86_400_000
  const metas = Array.from({ length: runCount }, (_, i) => runMeta(runIdOf(0x7e0000 + i)))
  const first = await AckStore.open(dir)
  for (const meta of metas) await first.createRun(meta, announcedMs)
  await first.close()
  // Each run's log: spansPerRun acks, one a span (200 ms apart), no end: live when the listener died.
  const commits = new Map<string, number>()
  for (const { runId } of metas) {
    const frames: Buffer[] = []
    let n = 0
    for (let seq = 1; seq <= spansPerRun; seq += maxItemsPerCommit) {
      const items: object[] = []
      for (let s = seq; s < Math.min(seq + maxItemsPerCommit, spansPerRun + 1); s++)
        items.push({ k: 'ack', fromSeq: s, toSeq: s, firstMs: announcedMs + s * 200, lastMs: announcedMs + s * 200 })
      frames.push(frameCommit(++n, items))
    }
    appendFileSync(join(dir, 'runs', runId, 'acks.log'), Buffer.concat(frames))
    commits.set(runId, n)
  }
  rmSync(join(dir, 'catalog.msgpack'), { force: true })
  // The last round before the kill -9: one more ack of each run, in the journal's newest segment only.
  const journal = join(dir, 'journal')
  const name = readdirSync(journal)
    .filter((n) => n.endsWith('.wal'))
    .sort()
    .at(-1)!
  const segment = await readSegment(join(journal, name), Number(name.slice(0, 8)), true, 0)
  t.equal(segment.rounds.length, 0, 'the newest segment holds its header only')
  const lastMs = announcedMs + (spansPerRun + 1) * 200
  const c = metas.map(({ runId }) => ({
    id: runId,
    at: statSync(join(dir, 'runs', runId, 'acks.log')).size,
    f: frameCommit(commits.get(runId)! + 1, [{ k: 'ack', fromSeq: spansPerRun + 1, toSeq: spansPerRun + 1, firstMs: lastMs, lastMs }]),
  }))
  appendFileSync(join(journal, name), frameRound({ k: 'round', r: segment.firstRound, a: [], c }))

  const store = await AckStore.open(dir, { maxCachedSpans: 1000 })
  t.teardown(() => store.close())
  t.same(
    metas.filter(({ runId }) => store.lastAckedSeq(runId) !== spansPerRun + 1),
    [],
    "every run holds every ack, the journal's too",
  )
  const held = store.residentSpanCount()
  t.ok(
    held <= 1000 + 2 * (spansPerRun + 1),
    `spans held once the listener listens: ${held} (the cache of 1,000, plus a run or two), not every run's ${runCount * (spansPerRun + 1)}`,
  )
  // A query of one of them answers every ack (read back from its log and the journal).
  const [answered] = await store.queryAsync('testhost', `/data/${metas[3]!.runId}`, metas[3]!.runId)
  t.equal(answered?.ackedThroughSeq, spansPerRun + 1, 'a query answers every ack')
})
