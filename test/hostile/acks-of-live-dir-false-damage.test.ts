/**
 * `verify --acks DIR` reads the listener's directory while it runs (the lock's hint says so; README:
 * "on a copy of a live directory too"). It lists runs/, reads the journal, then replays each run and
 * holds its log against the journal's commits of it (checkLogWithinJournal). A fold in between (every
 * 5 s on a listener with live writers) appends the journal's commits to a run's log and deletes the
 * segment, and a round after the journal was read may be folded too: the log then ends past the
 * journal's commits of it, and the read is refused as damage, "the journal is older than the log (a
 * segment from an earlier state of the directory)", exit 3, on a healthy directory. Here a listener's
 * store (journal-child: 16 live runs, folds every 20 ms so the window comes often) runs in its own
 * process, killed at the end; every read of its directory must succeed and hold every ack reported
 * recorded before the read began. (With the real CLI and default settings, a listener on 2,000 ended
 * runs and one live `write`: 10 of 25 `verify --acks DIR --file DATA` exited 3 with "could not read
 * DIR/journal/000000NN.wal: damaged at byte 0: the journal's commits of run R end at byte B of its
 * log, but DIR/runs/R/acks.log holds ... bytes".)
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { AckStore } from '../../src/store/ack-store.js'
import { tempDir } from '../fixtures/cli.js'

const childPath = fileURLToPath(new URL('../fixtures/journal-child.ts', import.meta.url))

t.test('verify --acks on a live directory: no false damage, no ack missing', async (t) => {
  const dir = tempDir(t, 'plugcheck-live-acks-')
  const child = spawn(process.execPath, ['--import', 'tsx', childPath, dir, '0'], { stdio: ['ignore', 'pipe', 'inherit'] })
  t.teardown(() => void child.kill('SIGKILL'))
  let out = ''
  child.stdout.on('data', (d: Buffer) => (out += d.toString()))
  for (let i = 0; i < 500 && !out.includes('announced\n'); i++) await new Promise((r) => setTimeout(r, 20))
  const refused: string[] = []
  const missing: string[] = []
  for (let i = 0; i < 20; i++) {
    const before = new Map<string, number>()
    for (const [, id, seq] of out.matchAll(/^recorded ([0-9a-f]{16}) (\d+)$/gm))
      before.set(id!, Math.max(before.get(id!) ?? 0, Number(seq)))
    try {
      const loaded = await AckStore.load(dir)
      for (const [id, seq] of before) if (loaded.lastAckedSeq(id) < seq) missing.push(`${id}: ${loaded.lastAckedSeq(id)} of ${seq}`)
    } catch (error) {
      refused.push((error as Error).message)
    }
  }
  child.kill('SIGKILL')
  t.same(refused, [], `every read of the live directory succeeds (${refused.length} of 20 refused)`)
  t.same(missing, [], 'and holds every ack recorded before it began')
})
