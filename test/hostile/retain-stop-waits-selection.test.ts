/**
 * A SIGTERM to `listen --retain` waits only for the group being pruned (README, and the change that
 * made a stop break between groups). But before any group is pruned, the pass selects the runs: after
 * the background check it holds every selected run against its files again (selectPrunableChecked:
 * summaryFromFiles replays each catalogued run's log, one after the other), and a stop does not cut
 * that short: it waits for every selected run's log to be read a second time, then prunes nothing.
 * Here 3,000 ended runs of 64 spans, a month old, catalogued: a SIGTERM during the check returns in
 * ~30 ms, one during the selection takes seconds (5-12 s measured on 8,000 runs; on 100,000 runs, as
 * long as the background check, "half a minute" by its own comment). The stop must come within a
 * sixth of the time the background check took in the same run, and never needs to before 0.5 s:
 * waiting out the rest of the selection took 0.4 to 1.3 times the check (1.1 s after a 2.0 s check on
 * an idle machine, 3.2 s after 8.2 s and 13-17 s after 12-14 s under load), a stop between two runs
 * 20-40 ms idle and 100-240 ms under that load (at most 2% of the check). (A bound of 1.5 s alone let
 * the wait through on an idle machine and failed the stop on a loaded one.)
 * The selection is told from the check by the bytes the listener read (/proc/PID/io rchar): the
 * check reads every log once, the selection a second time.
 */
import t from 'tap'
import { appendFileSync, readFileSync, rmSync } from 'node:fs'
import { spawn, type ChildProcess } from 'node:child_process'
import { join } from 'node:path'
import { AckStore } from '../../src/store/ack-store.js'
import { frameCommit } from '../../src/store/ack-log.js'
import { binPath, tempDir } from '../fixtures/cli.js'
import { runMeta, runIdOf } from '../fixtures/peer.js'

const runCount = 3000
const spans = 64

t.test('SIGTERM to listen --retain during its selection stops within a sixth of the check (0.5 s at least)', async (t) => {
  const dir = tempDir(t, 'plugcheck-retain-selection-')
  const announcedMs = Date.now() - 30 * 86_400_000
  const store = await AckStore.open(dir)
  store.setMaxListeners(0)
  const metas = Array.from({ length: runCount }, (_, i) => runMeta(runIdOf(0x10000 + i), { createdMs: announcedMs }))
  for (let i = 0; i < runCount; i += 1000) await Promise.all(metas.slice(i, i + 1000).map((m) => store.createRun(m, announcedMs)))
  await store.close()
  let logBytes = 0
  for (const { runId } of metas) {
    const frames: Buffer[] = []
    let n = 0
    for (let s = 1; s <= spans; s += 16)
      frames.push(
        frameCommit(
          ++n,
          Array.from({ length: 16 }, (_, k) => ({
            k: 'ack',
            fromSeq: s + k,
            toSeq: s + k,
            firstMs: announcedMs + (s + k) * 200,
            lastMs: announcedMs + (s + k) * 200,
          })),
        ),
      )
    frames.push(frameCommit(++n, [{ k: 'end', reason: 'duration', atMs: announcedMs + (spans + 1) * 200 }]))
    const bytes = Buffer.concat(frames)
    logBytes += bytes.length
    appendFileSync(join(dir, 'runs', runId, 'acks.log'), bytes)
  }
  rmSync(join(dir, 'catalog.msgpack'), { force: true })
  const start = (extra: string[]): { child: ChildProcess; out: () => string; listening: Promise<void>; exited: Promise<number | null> } => {
    const child = spawn(process.execPath, [binPath, 'listen', '--port', '0', '--host', '127.0.0.1', '--dir', dir, ...extra], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    const listening = new Promise<void>((resolve) => {
      const on = (d: Buffer): void => {
        out += d.toString()
        if (out.includes('listening on')) resolve()
      }
      child.stdout!.on('data', on)
      child.stderr!.on('data', on)
    })
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
    t.teardown(() => void child.kill('SIGKILL'))
    return { child, out: () => out, listening, exited }
  }
  // A first start replays the logs and writes the catalog; a clean stop.
  const first = start([])
  await first.listening
  first.child.kill('SIGTERM')
  await first.exited

  const second = start(['--retain', '1d'])
  await second.listening
  const rchar = (): number => {
    try {
      return Number(/rchar: (\d+)/.exec(readFileSync(`/proc/${second.child.pid}/io`, 'utf8'))![1])
    } catch {
      return 0
    }
  }
  const listeningMs = Date.now()
  const atListening = rchar()
  // The check reads every log once; halfway through the second reading, the selection is under way.
  // How long the check took is what the stop is held against: the selection reads every log again,
  // at the same machine's speed.
  let checkDoneMs: number | undefined
  for (let read = rchar(); read < atListening + 1.5 * logBytes && second.child.exitCode === null; read = rchar()) {
    if (checkDoneMs === undefined && read >= atListening + logBytes) checkDoneMs = Date.now()
    await new Promise((r) => setTimeout(r, 10))
  }
  const checkMs = (checkDoneMs ?? Date.now()) - listeningMs
  t.equal(second.child.exitCode, null, 'the listener is still running')
  t.notMatch(second.out(), /pruned/, 'no group pruned yet')
  const stoppedAt = Date.now()
  second.child.kill('SIGTERM')
  const code = await second.exited
  const tookMs = Date.now() - stoppedAt
  t.equal(code, 0, 'a clean stop')
  const boundMs = Math.max(500, Math.round(checkMs / 6))
  t.ok(tookMs < boundMs, `the stop took ${tookMs} ms (at most ${boundMs} ms: a sixth of the ${checkMs} ms check, or 0.5 s)`)
})
