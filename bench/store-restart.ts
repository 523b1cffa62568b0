/**
 * Restart of the listener on a directory of many ended runs, and its background check of them.
 * N runs announced, each acked (10 records) and ended, the store closed (every run folded into runs/,
 * catalog.msgpack written), then, per tree (this one, and with --listener-tree another checkout's,
 * side by side in one table):
 *
 *   1. `plugcheck listen` of that tree spawned on the directory: time from spawn to the first real
 *      hello welcomed (polled every 20 ms), then a hello every 10 ms for --probe-seconds during the
 *      background check (longest round trip), and the listener's VmRSS / VmHWM; stopped by SIGTERM.
 *   2. The tree's AckStore opened in this process: time to open, heap and RSS after it, then its
 *      background check of every run's files (startScrub) with a 1 ms timer: time, and the event
 *      loop's longest pause (a gap between two ticks minus the 1 ms; on a shared machine a gap also
 *      holds time the process waited for a core), and the longest of those during which the process
 *      used a core for 80% of the gap or more (its own work, not a wait for a core).
 *
 * The catalog is given to each tree in the format that tree writes (format 1, entries as maps, for a
 * tree from before format 2), so neither pays a full replay for the other's catalog.
 *
 *   node --expose-gc --import tsx bench/store-restart.ts --runs 100000 [--dir /var/tmp] [--listener-tree /work/main]
 *        [--from DIR] [--keep] [--probe-seconds 20] [--no-check]
 *
 * --keep leaves the filled directory (its path is printed); --from DIR starts from such a directory.
 * Step 2 runs in a child process per tree (two trees' native modules cannot share one process).
 */
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { performance } from 'node:perf_hooks'
import { parseArgs } from 'node:util'
import { Packr } from 'msgpackr'
import type { AckStore } from '../src/store/ack-store.js'
import { seal, unseal } from '../src/store/sealed-file.js'
import { quantileSorted, repoRoot, table } from './common.js'
import { FleetConnection, LatencySink } from './fleet-clients.js'

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '10000' },
    dir: { type: 'string' },
    from: { type: 'string' },
    keep: { type: 'boolean', default: false },
    'listener-tree': { type: 'string' },
    'probe-seconds': { type: 'string', default: '20' },
    'no-check': { type: 'boolean', default: false },
    /** Internal: the in-process measurement of one tree, in a child of its own (two trees' native modules cannot share a process). */
    'in-process': { type: 'string' },
  },
})
const probeSeconds = Number(values['probe-seconds'])
const mb = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(0)} MB`
const seconds = (ms: number): string => `${(ms / 1000).toFixed(2)} s`

async function fill(dir: string, runCount: number): Promise<void> {
  const fillStartMs = performance.now()
  // Imported here: the in-process child of another tree must not load this tree's native modules.
  const store = await (await import('../src/store/ack-store.js')).AckStore.open(dir)
  for (let i = 0; i < runCount; i += 1024) {
    const ids = Array.from({ length: Math.min(1024, runCount - i) }, (_, j) => (i + j + 1).toString(16).padStart(16, '0'))
    await Promise.all(
      ids.map((runId) =>
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
          { peer: '127.0.0.1' },
        ),
      ),
    )
    for (const runId of ids) {
      store.appendAck(runId, 1, 10, Date.now())
      store.endRun(runId, 'duration', undefined, Date.now())
    }
  }
  await store.close()
  console.log(`filled ${runCount} runs in ${seconds(performance.now() - fillStartMs)}`)
}

/** The catalog's header and entries, whatever its format (1: maps one by one; 2: slices of records). */
function catalogValues(bytes: Buffer): { header: Record<string, unknown>; entries: unknown[] } {
  const file = unseal('catalog', bytes)
  if (file.kind !== 'sealed') throw new Error('catalog.msgpack is not a sealed catalog')
  const [header, ...rest] = new Packr({ useRecords: true, mapsAsObjects: true, int64AsType: 'number' }).unpackMultiple(file.body) as [
    Record<string, unknown>,
    ...unknown[],
  ]
  return { header, entries: header.version === 1 ? rest : (rest as unknown[][]).flat() }
}

/** The catalog in the format the tree writes (its catalog.ts says which), so that it starts from it. */
function catalogFor(tree: string, bytes: Buffer): Buffer {
  const catalogFormatVersion = Number(
    /export const catalogFormatVersion = (\d+)/.exec(readFileSync(join(tree, 'src/store/catalog.ts'), 'utf8'))?.[1] ?? 1,
  )
  const { header, entries } = catalogValues(bytes)
  if (header.version === catalogFormatVersion) return bytes
  if (catalogFormatVersion !== 1) throw new Error(`${tree} writes catalogs of format ${catalogFormatVersion}: this bench makes 1 only`)
  const maps = new Packr({ useRecords: false, mapsAsObjects: true, int64AsType: 'number' })
  return seal('catalog', Buffer.concat([{ ...header, version: 1 }, ...entries].map((value) => maps.pack(value))))
}

async function freePort(): Promise<number> {
  return new Promise((done) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => done(port))
    })
  })
}

function rssText(pid: number): string {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = (key: string): number => Number(new RegExp(`${key}:\\s+(\\d+)`).exec(status)?.[1] ?? 0)
  return `${(kb('VmRSS') / 1024).toFixed(0)} / ${(kb('VmHWM') / 1024).toFixed(0)} MB`
}

/** A real hello's round trip to welcome, in ms (throws when none comes within timeoutMs). */
async function helloMs(port: number, timeoutMs: number): Promise<number> {
  const startMs = performance.now()
  const connection = await FleetConnection.open(port, new LatencySink(), timeoutMs)
  connection.close()
  return performance.now() - startMs
}

/** The tree's `plugcheck listen` on dir: spawn to first welcome, hello round trips during the check, RSS. */
async function measureListener(tree: string, dir: string, note: (metric: string, value: string) => void): Promise<void> {
  const port = await freePort()
  const startMs = performance.now()
  const child = spawn(
    process.execPath,
    [join(tree, 'bin', 'plugcheck.js'), 'listen', '--host', '127.0.0.1', '--port', String(port), '--dir', dir],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  )
  let stderr = ''
  child.stderr!.setEncoding('utf8').on('data', (text: string) => void (stderr = (stderr + text).slice(-4000)))
  try {
    const deadlineMs = startMs + 15 * 60_000
    for (;;) {
      if (child.exitCode !== null) throw new Error(`the listener exited with code ${child.exitCode}: ${stderr}`)
      if (performance.now() > deadlineMs) throw new Error('the listener did not welcome a hello within 15 minutes')
      try {
        await helloMs(port, 1000)
        break
      } catch {
        await new Promise((done) => setTimeout(done, 20))
      }
    }
    note('listener: spawn to first welcome', seconds(performance.now() - startMs))
    note('listener: RSS after the first welcome (VmRSS / VmHWM)', rssText(child.pid!))
    const probeEndMs = performance.now() + probeSeconds * 1000
    const roundTripsMs: number[] = []
    while (performance.now() < probeEndMs) {
      roundTripsMs.push(await helloMs(port, 10_000))
      await new Promise((done) => setTimeout(done, 10))
    }
    roundTripsMs.sort((a, b) => a - b)
    const p99Ms = quantileSorted(roundTripsMs, 0.99)
    note(
      `listener: hello round trip in its first ${probeSeconds} s, p99 / max`,
      `${p99Ms.toFixed(1)} / ${roundTripsMs.at(-1)!.toFixed(1)} ms (${roundTripsMs.length} hellos)`,
    )
    note(`listener: RSS after ${probeSeconds} s (VmRSS / VmHWM)`, rssText(child.pid!))
  } finally {
    if (child.exitCode === null) {
      const exited = new Promise((done) => child.once('exit', done))
      child.kill('SIGTERM') // this child's pid; a clean stop
      await exited
    }
  }
}

/** The tree's AckStore in this process: open, then the background check with the event loop timed. */
async function measureInProcess(tree: string, dir: string, note: (metric: string, value: string) => void): Promise<void> {
  const { AckStore: TreeStore } = (await import(join(tree, 'src/store/ack-store.ts'))) as { AckStore: typeof AckStore }
  globalThis.gc?.()
  const openStartMs = performance.now()
  const store = await TreeStore.open(dir)
  note('in process: open', seconds(performance.now() - openStartMs))
  globalThis.gc?.()
  const usage = process.memoryUsage()
  note('in process: heap used / RSS after open', `${mb(usage.heapUsed)} / ${mb(usage.rss)}`)
  note('in process: logs replayed at open', String(store.replayedLogCount))
  if (!values['no-check']) {
    const checkStartMs = performance.now()
    let longestPauseMs = 0
    let longestBusyPauseMs = 0
    let lastTickMs = performance.now()
    let lastCpu = process.cpuUsage()
    const ticker = setInterval(() => {
      const pauseMs = performance.now() - lastTickMs - 1
      const cpu = process.cpuUsage(lastCpu)
      longestPauseMs = Math.max(longestPauseMs, pauseMs)
      // The process (every thread of it) on a core for most of the pause: work, not waiting for a core.
      if ((cpu.user + cpu.system) / 1000 >= 0.8 * pauseMs) longestBusyPauseMs = Math.max(longestBusyPauseMs, pauseMs)
      lastTickMs = performance.now()
      lastCpu = process.cpuUsage()
    }, 1)
    await store.startScrub()
    clearInterval(ticker)
    note("in process: background check of every run's files", seconds(performance.now() - checkStartMs))
    note('in process: longest event-loop pause during the check', `${longestPauseMs.toFixed(1)} ms`)
    note('in process: longest such pause with the process on a core for 80% of it', `${longestBusyPauseMs.toFixed(1)} ms`)
    note('in process: warnings', String(store.warnings.length))
    globalThis.gc?.()
    note('in process: heap used / RSS after the check', `${mb(process.memoryUsage().heapUsed)} / ${mb(process.memoryUsage().rss)}`)
  }
  await store.close()
}

/** measureInProcess in a child process: its metrics, in order. */
async function measureInChild(tree: string, dir: string, note: (metric: string, value: string) => void): Promise<void> {
  const args = [
    '--expose-gc',
    '--import',
    'tsx',
    join(repoRoot, 'bench', 'store-restart.ts'),
    '--in-process',
    tree,
    '--from',
    dir,
    ...(values['no-check'] ? ['--no-check'] : []),
  ]
  const child = spawn(process.execPath, args, { cwd: repoRoot, stdio: ['ignore', 'pipe', 'inherit'] })
  let stdout = ''
  child.stdout!.setEncoding('utf8').on('data', (text: string) => void (stdout += text))
  const code = await new Promise((done) => child.once('exit', done))
  if (code !== 0) throw new Error(`the in-process measurement of ${tree} exited with ${String(code)}: ${stdout}`)
  for (const [metric, value] of JSON.parse(stdout.trim().split('\n').at(-1)!) as Array<[string, string]>) note(metric, value)
}

if (values['in-process'] !== undefined) {
  const results: Array<[string, string]> = []
  await measureInProcess(resolve(values['in-process']), resolve(values.from!), (metric, value) => void results.push([metric, value]))
  console.log(JSON.stringify(results))
  process.exit(0)
}

const dir = values.from === undefined ? mkdtempSync(join(values.dir ?? tmpdir(), 'plugcheck-restart-')) : resolve(values.from)
if (values.from === undefined) await fill(dir, Number(values.runs))
else if (!existsSync(join(dir, 'catalog.msgpack'))) throw new Error(`${dir} has no catalog.msgpack: fill one with --keep first`)
const filledCatalog = readFileSync(join(dir, 'catalog.msgpack'))
console.log(`${dir}: ${catalogValues(filledCatalog).entries.length} runs in its catalog (${mb(filledCatalog.length)})`)
const trees = [{ label: 'this tree', tree: repoRoot }]
if (values['listener-tree'] !== undefined) trees.push({ label: values['listener-tree'], tree: resolve(values['listener-tree']) })
const columns: Map<string, string>[] = []
for (const { label, tree } of trees) {
  console.log(`\n== ${label} (${tree})`)
  const results = new Map<string, string>()
  const note = (metric: string, value: string): void => {
    results.set(metric, value)
    console.log(`${metric}: ${value}`)
  }
  writeFileSync(join(dir, 'catalog.msgpack'), catalogFor(tree, filledCatalog))
  await measureListener(tree, dir, note)
  writeFileSync(join(dir, 'catalog.msgpack'), catalogFor(tree, filledCatalog))
  await measureInChild(tree, dir, note)
  columns.push(results)
}
writeFileSync(join(dir, 'catalog.msgpack'), filledCatalog)
const metrics = [...new Set(columns.flatMap((c) => [...c.keys()]))]
console.log('')
console.log(table([['', ...trees.map((t) => t.label)], ...metrics.map((m) => [m, ...columns.map((c) => c.get(m) ?? '-')])]))
if (values.keep || values.from !== undefined) console.log(`\nkept ${dir}`)
else rmSync(dir, { recursive: true, force: true })
