/**
 * Commit rounds of the listener's ack store with many live runs trickling: N runs announced, then for
 * --seconds each run acks one record about once a second (spread at random), and every ack's time from
 * appendAck to its 'recorded' event is measured (a round's length, as a writer sees it). Prints p50,
 * p99 and max in ms, acks recorded, and the announcement time. Uses only the store's public API, so
 * the same file runs against an older checkout for a before/after figure.
 *
 *   node --import tsx bench/store-rounds.ts --runs 1024 --seconds 10 [--dir /var/tmp/x]
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { parseArgs } from 'node:util'
import { AckStore } from '../src/store/ack-store.js'

const { values } = parseArgs({
  options: { runs: { type: 'string', default: '1024' }, seconds: { type: 'string', default: '10' }, dir: { type: 'string' } },
})
const runCount = Number(values.runs)
const durationMs = Number(values.seconds) * 1000
const dir = mkdtempSync(join(values.dir ?? tmpdir(), 'plugcheck-rounds-'))
const store = await AckStore.open(dir)
const runIds = Array.from({ length: runCount }, (_, i) => (i + 1).toString(16).padStart(16, '0'))
const announceStartMs = performance.now()
for (let i = 0; i < runIds.length; i += 256) {
  await Promise.all(
    runIds.slice(i, i + 256).map((runId) =>
      store.createRun(
        {
          runId,
          groupId: runId,
          method: 'fdatasync',
          direct: false,
          pattern: 'append',
          recordSizeBytes: 8192,
          slotCount: 1_000_000,
          host: 'bench',
          path: `/data/${runId}`,
          requestedPath: `/data/${runId}`,
          createdMs: Date.now(),
        },
        Date.now(),
      ),
    ),
  )
}
const announceMs = performance.now() - announceStartMs
const sentAt = new Map<string, Map<number, number>>()
const latenciesMs: number[] = []
store.on('recorded', (runId, throughSeq) => {
  const pending = sentAt.get(runId)
  if (pending === undefined) return
  const now = performance.now()
  for (const [seq, at] of pending) {
    if (seq > throughSeq) break
    latenciesMs.push(now - at)
    pending.delete(seq)
  }
})
const nextSeq = new Map(runIds.map((r) => [r, 1]))
const startMs = performance.now()
const timers = runIds.map((runId) => {
  const tick = (): void => {
    if (performance.now() - startMs > durationMs || !store.isWritable(runId)) return
    const seq = nextSeq.get(runId)!
    nextSeq.set(runId, seq + 1)
    if (!sentAt.has(runId)) sentAt.set(runId, new Map())
    sentAt.get(runId)!.set(seq, performance.now())
    store.appendAck(runId, seq, seq, Date.now())
    handle.timer = setTimeout(tick, 500 + Math.random() * 1000)
  }
  const handle: { timer?: NodeJS.Timeout } = {}
  handle.timer = setTimeout(tick, Math.random() * 1000)
  return handle
})
await new Promise((resolve) => setTimeout(resolve, durationMs + 3000))
for (const h of timers) clearTimeout(h.timer)
await store.close()
latenciesMs.sort((a, b) => a - b)
const q = (p: number): string => (latenciesMs[Math.min(latenciesMs.length - 1, Math.floor(p * latenciesMs.length))] ?? NaN).toFixed(1)
const unrecorded = [...sentAt.values()].reduce((sum, m) => sum + m.size, 0)
console.log(
  `runs=${runCount} announce=${(announceMs / 1000).toFixed(1)}s acks_recorded=${latenciesMs.length} unrecorded=${unrecorded} ack_to_recorded_ms p50=${q(0.5)} p99=${q(0.99)} max=${q(1)}`,
)
rmSync(dir, { recursive: true, force: true })
