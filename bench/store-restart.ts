/**
 * Restart of the listener's ack store on a directory of many ended runs: N runs announced, each
 * acked (10 records) and ended, the store closed (every run folded into runs/), then opened again:
 * prints the time to open (from catalog.msgpack), heap and RSS after it (ended runs keep a summary
 * only), then the time of the background check of every run's files and its longest event-loop stall.
 *
 *   node --expose-gc --import tsx bench/store-restart.ts --runs 100000 [--dir /var/tmp]
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { parseArgs } from 'node:util'
import { AckStore } from '../src/server/ack-store.js'

const { values } = parseArgs({ options: { runs: { type: 'string', default: '10000' }, dir: { type: 'string' }, keep: { type: 'boolean', default: false } } })
const runCount = Number(values.runs)
const dir = mkdtempSync(join(values.dir ?? tmpdir(), 'plugcheck-restart-'))
const mb = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(0)} MB`
const fillStartMs = performance.now()
const store = await AckStore.open(dir)
for (let i = 0; i < runCount; i += 1024) {
  const ids = Array.from({ length: Math.min(1024, runCount - i) }, (_, j) => (i + j + 1).toString(16).padStart(16, '0'))
  await Promise.all(ids.map((runId) => store.createRun({ runId, groupId: runId, method: 'fdatasync', direct: false, pattern: 'append', recordSizeBytes: 8192, slotCount: 1_000_000, host: 'bench', path: `/data/${runId}`, requestedPath: `/data/${runId}`, createdMs: Date.now() }, Date.now(), { peer: '127.0.0.1' })))
  for (const runId of ids) {
    store.appendAck(runId, 1, 10, Date.now())
    store.endRun(runId, 'duration', undefined, Date.now())
  }
}
await store.close()
const rssFilled = process.memoryUsage().rss
console.log(`filled ${runCount} runs in ${((performance.now() - fillStartMs) / 1000).toFixed(1)} s (rss ${mb(rssFilled)})`)
globalThis.gc?.()
const openStartMs = performance.now()
const reopened = await AckStore.open(dir)
const openMs = performance.now() - openStartMs
globalThis.gc?.()
const usage = process.memoryUsage()
console.log(`runs=${reopened.summaries().length} open=${(openMs / 1000).toFixed(1)}s heapUsed=${mb(usage.heapUsed)} rss=${mb(usage.rss)} residentSpans=${(reopened as { residentSpanCount?: () => number }).residentSpanCount?.() ?? "n/a"}`)
console.log(`logs replayed at open=${reopened.replayedLogCount} (the rest from catalog.msgpack)`)
const scrubStartMs = performance.now()
let longestTickMs = 0
let lastTickMs = performance.now()
const ticker = setInterval(() => {
  longestTickMs = Math.max(longestTickMs, performance.now() - lastTickMs - 1)
  lastTickMs = performance.now()
}, 1)
await reopened.startScrub()
clearInterval(ticker)
console.log(`background check of every run's files: ${((performance.now() - scrubStartMs) / 1000).toFixed(1)} s, longest event-loop stall ${longestTickMs.toFixed(1)} ms, warnings ${reopened.warnings.length}`)
await reopened.close()
if (!values.keep) rmSync(dir, { recursive: true, force: true })
