/**
 * A query of a live run answers what a restart replays: recorded entries only (README: "a query of a
 * live run shows its recorded acks only, exactly what a restart replays from its log"). A run's end
 * is logged after its last acks, in the same commit or a later one, so no replay gives a run that has
 * ended with fewer acks than it had when it ended. Here a writer acks seqs 1-50 and ends (as `write`
 * does when its duration is up); a query before that round is fdatasynced answers the run as ended
 * with none of those 50 acks: a state no replay gives (a kill -9 now restarts to no end, the round
 * done gives the end with all 50). A verifier judging it counts 0 acks of an ended run, and the
 * listener then refuses that verdict ("counts 0 acknowledged records, the listener holds 50 for the
 * run, which has ended").
 */
import t from 'tap'
import { cpSync } from 'node:fs'
import { AckStore } from '../../src/server/ack-store.js'
import { tempDir } from '../fixtures/cli.js'
import { runIdOf, runMeta } from '../server/peer.js'

t.test('a run whose end is not recorded yet is not answered as ended (or is answered with every ack before its end)', async (t) => {
  const dir = tempDir(t, 'plugcheck-end-')
  const store = await AckStore.open(dir)
  t.teardown(() => store.close())
  const runId = runIdOf(0xa1800)
  const meta = runMeta(runId)
  await store.createRun(meta, Date.now())
  for (let seq = 1; seq <= 50; seq++) store.appendAck(runId, seq, seq, Date.now())
  store.endRun(runId, 'duration', undefined, Date.now())
  // Asked at once, while the round holding the acks and the end is being written.
  const [live] = await store.queryAsync(meta.host, meta.requestedPath, runId)
  // What a listener killed now restarts to.
  const killedNow = tempDir(t, 'plugcheck-end-copy-')
  cpSync(dir, killedNow, { recursive: true })
  const restarted = (await AckStore.load(killedNow)).query(meta.host, meta.requestedPath, runId)[0]
  t.ok(live !== undefined && restarted !== undefined)
  const replayable = (run: typeof live): boolean => run!.end === undefined || run!.ackedThroughSeq === 50
  t.ok(replayable(live), `the live answer (end ${JSON.stringify(live!.end?.reason)}, acks through ${live!.ackedThroughSeq}) is a state a replay gives: not ended, or ended with all 50 acks`)
  t.ok(replayable(restarted), `a restart now (end ${JSON.stringify(restarted!.end?.reason)}, acks through ${restarted!.ackedThroughSeq})`)
})

t.test('the runs list and the claims of a live run count recorded acks, as a restart does', async (t) => {
  const dir = tempDir(t, 'plugcheck-end-')
  const store = await AckStore.open(dir)
  t.teardown(() => store.close())
  const runId = runIdOf(0xa1801)
  const meta = runMeta(runId)
  await store.createRun(meta, Date.now())
  for (let seq = 1; seq <= 50; seq++) store.appendAck(runId, seq, seq, Date.now())
  // Asked in the same turn: none of the 50 is recorded (no round written yet).
  const [answer] = await store.queryAsync(meta.host, meta.requestedPath, runId)
  const summary = store.summaries().find((s) => s.runId === runId)
  const claim = store.claims(meta.host, meta.requestedPath).find((c) => c.runId === runId)
  t.equal(answer!.ackedThroughSeq, 0, 'the query answers the recorded acks (none yet)')
  t.equal(summary!.ackedThroughSeq, answer!.ackedThroughSeq, '`runs` shows the same acks as the query and a restart')
  t.equal(claim!.ackedThroughSeq, answer!.ackedThroughSeq, 'the claims of the same reply show the same acks as its runs')
})
