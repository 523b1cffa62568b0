/**
 * A store that records as fast as it can, for journal.test.ts to SIGKILL at a random moment: argv
 * dir. Announces runs, acks them in rounds, with a small segment and fold age so that folds happen
 * all the time; prints "recorded <runId> <throughSeq>" for every 'recorded' event (after its
 * fdatasync), so the parent knows what must survive.
 */
import { AckStore } from '../../src/server/ack-store.js'
import { runMeta, runIdOf } from './peer.js'

const dir = process.argv[2]!
const store = await AckStore.open(dir, { segmentBytes: 4096, foldAgeMs: 20 })
// Printed after the event (stdout is a pipe): a line lost to the kill only makes the check weaker, never wrong.
store.on('recorded', (runId, throughSeq) => process.stdout.write(`recorded ${runId} ${throughSeq}\n`))
const base = Number(process.argv[3] ?? '0')
const runs: string[] = []
for (let i = 0; i < 16; i++) runs.push(runIdOf(base + i + 1))
await Promise.all(runs.map((runId) => store.createRun(runMeta(runId), Date.now())))
process.stdout.write('announced\n')
const acked = new Map(runs.map((r) => [r, 0]))
for (;;) {
  for (const runId of runs) {
    if (Math.random() < 0.5) continue
    const from = acked.get(runId)! + 1
    const to = from + Math.floor(Math.random() * 5)
    store.appendAck(runId, from, to, Date.now())
    acked.set(runId, to)
  }
  await new Promise((resolve) => setTimeout(resolve, Math.random() * 3))
}
