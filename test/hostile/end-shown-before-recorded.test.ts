/**
 * A query of a live run answers what a restart replays: recorded entries only (README: "a query of a
 * live run shows its recorded acks only, exactly what a restart replays from its log"). A run's end
 * is logged after its last acks, in the same commit or a later one, so no replay gives a run that has
 * ended with fewer acks than it had when it ended. Here a writer acks seqs 1-50 and ends (as `write`
 * does when its duration is up); a query before that round is fdatasynced answers the run as ended
 * with none of those 50 acks: a state no replay gives (a kill -9 now restarts to no end, the round
 * done gives the end with all 50). A verifier judging it counts 0 acks of an ended run, and the
 * listener then refuses that verdict ("counts 0 acknowledged records, the listener holds 50 for the
 * run, which has ended"). With a writer killed mid-round (its run logged "vanished") a verify at once
 * says PASS over the acks of the rounds before only (exit 0): found with the CLI, a listener under
 * `strace -e inject=fdatasync:delay_exit=1500000`.
 */
import t from 'tap'
import { cpSync } from 'node:fs'
import { AckStore } from '../../src/store/ack-store.js'
import { tempDir } from '../fixtures/cli.js'
import { runIdOf, runMeta } from '../fixtures/peer.js'

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
  t.ok(
    replayable(live),
    `the live answer (end ${JSON.stringify(live!.end?.reason)}, acks through ${live!.ackedThroughSeq}) is a state a replay gives: not ended, or ended with all 50 acks`,
  )
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

t.test(
  'a writer killed while a round is written: its run is not answered as vanished with only the acks of the rounds before',
  async (t) => {
    // Seen with the CLI: a listener whose fdatasync takes 1.5 s, a writer SIGKILLed after 4 s (7,767
    // acks sent), verify at once: "PASS: all 1 acknowledged records" (exit 0), and the verdict refused
    // ("counts 1 acknowledged records, the listener holds 7767 for the run, which has ended").
    const dir = tempDir(t, 'plugcheck-end-')
    const store = await AckStore.open(dir)
    t.teardown(() => store.close())
    const runId = runIdOf(0xa1802)
    const meta = runMeta(runId)
    await store.createRun(meta, Date.now())
    const first = new Promise<void>((resolve) => store.once('recorded', () => resolve()))
    store.appendAck(runId, 1, 1, Date.now())
    await first
    for (let seq = 2; seq <= 50; seq++) store.appendAck(runId, seq, seq, Date.now())
    // The writer's connection closes (kill -9): the listener logs a 'vanished' end after seqs 2-50.
    store.release(runId, Date.now())
    const [live] = await store.queryAsync(meta.host, meta.requestedPath, runId)
    t.ok(
      live!.end === undefined || live!.ackedThroughSeq === 50,
      `answered ${live!.end === undefined ? 'not ended' : `as ${live!.end.reason}`} with acks through ${live!.ackedThroughSeq}: a run that ended is answered with every ack before its end (50), as its log will hold them`,
    )
  },
)

t.test("a run's steady moment is listed once it is recorded, as a restart lists it", async (t) => {
  const dir = tempDir(t, 'plugcheck-end-')
  const store = await AckStore.open(dir)
  t.teardown(() => store.close())
  const runId = runIdOf(0xa1803)
  const meta = runMeta(runId)
  await store.createRun(meta, Date.now())
  const done = new Promise<void>((resolve) => store.once('recorded', () => resolve()))
  store.appendAck(runId, 1, 1, Date.now())
  t.equal(store.recordSteady(runId, Date.now()), true, 'the first steady is taken')
  t.equal(store.recordSteady(runId, Date.now()), false, 'a second one changes nothing, recorded or not')
  // Asked, and the directory copied, in the same turn: the round holding it is not even started.
  const listed = store.summaries().find((s) => s.runId === runId)!
  const killedNow = tempDir(t, 'plugcheck-end-copy-')
  cpSync(dir, killedNow, { recursive: true })
  const restarted = (await AckStore.load(killedNow)).summaries().find((s) => s.runId === runId)!
  t.equal(listed.steadyMs, restarted.steadyMs, '`runs` shows the steady a restart now shows (none)')
  await done
  t.type(store.summaries().find((s) => s.runId === runId)!.steadyMs, 'number', 'listed once recorded')
})
