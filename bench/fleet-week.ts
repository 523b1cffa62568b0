/**
 * A week of a fleet, for one listener: `plugcheck listen` as a real process (this tree's, and with
 * --listener-tree another checkout's, side by side), driven over the real wire protocol only.
 *
 * Phases, each with one honest writer (fleet-honest.ts, a child process) acking continuously beside it:
 *   ended     --runs runs announced, each acked a few seqs and ended, from a bounded crowd of connections;
 *             listener RSS (VmRSS, VmHWM from /proc/PID/status) after.
 *   restart   kill -9 of that listener, started again on the same --dir and port: time from spawn until
 *             a real hello gets a welcome (polled every 50 ms).
 *   live N    N live runs (64 per connection) announced, then each acks one seq every ~1 s (random
 *             phase) for --trickle-seconds: per-ack ack->recorded latency on the writers' side, p50/p99/max.
 *             A commit round holds every run's queued acks, so these are the commit-round times as a
 *             writer sees them (the listener exposes no round timer of its own).
 *   spans     --span-writers live writers on a fresh listener whose clocks run 100x fast (libfaketime,
 *             FAKETIME="+0 x100", wall and monotonic: the listener stamps acks with announcement time +
 *             monotonic elapsed). Each writer acks one seq every 10 ms real = 1 s on the listener's clock,
 *             far past spanWindowMs (100 ms), so every ack is a span of its own, made by the listener's own
 *             code; 4 runs are read back by span pages to show it. The listener's timers run fast too
 *             (hello, reply deadlines): the writers say hello at once and read every reply. RSS slope over
 *             spans held = bytes per span in memory; a week of a continuously acking writer is 10 spans/s
 *             (maxStoredSpans, 6,048,000), so the week's RSS for 256 writers is extrapolated from it.
 *             A real week cannot be generated: spans come from acks, at most ~10^5 a second here.
 *             Past 4,096 spans a run its spans leave the listener's memory (a summary stays): the slope
 *             past that point is what a week costs. Measured side by side (--runs 0 --live none
 *             --span-seconds 150, 256 writers, ~3 M acks, 2 loaded cores): this tree RSS 84 -> 107 MiB,
 *             1.4 B a span overall, 0.3 B a span past 4,096 (a week of 256 writers: ~0.5 GiB); the tree
 *             before (52d2547) 78 -> 180 MiB, 32.6 B a span, 23.9 B past 4,096 (a week: 35-47 GiB).
 *             Against main at 407f97d (clock 100x): this tree 84 -> 122 MiB, past 4,096 -1.6 B a span
 *             (noise: flat); main 85 -> 194 MiB, 28.7 B past 4,096 (a week: 41.6 GiB).
 *
 * Usage: node --import tsx bench/fleet-week.ts [--listener-tree PATH] [--quick] [--dir DIR]
 *        [--runs 100000] [--live 1024,24576] [--trickle-seconds 20] [--span-writers 256] [--span-seconds 60]
 *        [--listen-args '--flag value ...']
 * A phase is left out with --runs 0 (ended and restart), --live none, --span-writers 0.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { fileSystemName, quantileSorted, repoRoot, table } from './common.js'
import { FleetConnection, LatencySink, bounded, countSpans, inParallel, runsPerConnection } from './fleet-clients.js'
import type { HonestReport } from './fleet-honest.js'

const honestFile = fileURLToPath(new URL('./fleet-honest.ts', import.meta.url))
const fakeTimeLibrary = '/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1'
/**
 * 100, not more: the listener's own timers run as fast, and its 10 s hello deadline must stay longer
 * (100 ms real) than a loaded machine takes between a connection's accept and its hello being read.
 */
const fakeClockFactor = 100
/** A continuously acking run makes one span per spanWindowMs (100 ms): a week of them. */
const spansPerWriterWeek = 7 * 24 * 3600 * 10
/** Spans a live run keeps in memory before they leave for its log (ack-store.ts residentSpansDefault). */
const residentSpansPerRun = 4096
const waitMs = 120_000
const crowdWidth = 16
/** --listen-args: flags added to every `plugcheck listen` (a tree with quotas may need them raised for 100,000 runs from one address). */
let listenExtraArgs: string[] = []

interface Scale {
  readonly runs: number
  readonly live: readonly number[]
  readonly trickleSeconds: number
  readonly spanWriters: number
  readonly spanSeconds: number
}

const fullScale: Scale = { runs: 100_000, live: [1024, 24_576], trickleSeconds: 20, spanWriters: 256, spanSeconds: 60 }
const quickScale: Scale = { runs: 2000, live: [256, 1024], trickleSeconds: 4, spanWriters: 32, spanSeconds: 5 }

/** One listener process of one tree. */
interface Listener {
  readonly port: number
  readonly child: ChildProcess
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      'listener-tree': { type: 'string' },
      quick: { type: 'boolean', default: false },
      dir: { type: 'string', default: tmpdir() },
      runs: { type: 'string' },
      live: { type: 'string' },
      'trickle-seconds': { type: 'string' },
      'span-writers': { type: 'string' },
      'span-seconds': { type: 'string' },
      'listen-args': { type: 'string', default: '' },
    },
  })
  listenExtraArgs = values['listen-args'].split(' ').filter((a) => a !== '')
  const base = values.quick ? quickScale : fullScale
  const scale: Scale = {
    runs: Number(values.runs ?? base.runs),
    live:
      values.live === undefined
        ? base.live
        : values.live
            .split(',')
            .filter((n) => n !== '' && n !== 'none')
            .map(Number),
    trickleSeconds: Number(values['trickle-seconds'] ?? base.trickleSeconds),
    spanWriters: Number(values['span-writers'] ?? base.spanWriters),
    spanSeconds: Number(values['span-seconds'] ?? base.spanSeconds),
  }
  if (!existsSync(fakeTimeLibrary)) {
    process.stderr.write(`plugcheck: libfaketime is missing (${fakeTimeLibrary})\nhint: apt-get install faketime\n`)
    return 2
  }
  const trees = [{ label: 'this tree', tree: repoRoot }]
  if (values['listener-tree'] !== undefined) trees.push({ label: values['listener-tree'], tree: resolve(values['listener-tree']) })
  const parentDir = resolve(values.dir)
  console.log(`fleet week: store on ${parentDir} (${fileSystemName(parentDir)}), ${JSON.stringify(scale)}`)
  const columns: Map<string, string>[] = []
  for (const { label, tree } of trees) {
    console.log(`\n== ${label} (${tree})`)
    columns.push(await measureTree(tree, parentDir, scale))
  }
  const metrics = [...new Set(columns.flatMap((c) => [...c.keys()]))]
  console.log('')
  console.log(table([['', ...trees.map((t) => t.label)], ...metrics.map((m) => [m, ...columns.map((c) => c.get(m) ?? '-')])]))
  return 0
}

async function measureTree(tree: string, parentDir: string, scale: Scale): Promise<Map<string, string>> {
  const bin = join(tree, 'bin', 'plugcheck.js')
  const results = new Map<string, string>()
  const note = (metric: string, value: string): void => {
    results.set(metric, value)
    console.log(`${metric}: ${value}`)
  }
  const dir = mkdtempSync(join(parentDir, 'plugcheck-fleet-'))
  try {
    const startNs = process.hrtime.bigint()
    let listener = await startListener(bin, dir, 0, {})
    await untilWelcomed(listener.child, listener.port)
    // What any start costs (Node, and tsx compiling a tree that has no dist/ build): restart's floor.
    note('start on an empty --dir: spawn to first welcome', `${(Number(process.hrtime.bigint() - startNs) / 1e9).toFixed(2)} s`)
    if (scale.runs > 0) {
      await withHonest(listener.port, `${scale.runs} ended runs`, note, async () => {
        const startMs = Date.now()
        const failures = await announceEnded(listener.port, scale.runs)
        note(
          `${scale.runs} runs announced+ended: time`,
          `${((Date.now() - startMs) / 1000).toFixed(1)} s${failures === 0 ? '' : ` (${failures} connections failed)`}`,
        )
      })
      await new Promise((done) => setTimeout(done, 2000)) // the last ends' commit round
      note(`RSS after ${scale.runs} ended runs (VmRSS / VmHWM)`, rssText(listener.child.pid!))
      listener = await restart(bin, dir, listener, note, scale.runs)
    }
    for (const live of scale.live) await trickle(listener.port, live, scale.trickleSeconds, note)
    note(`RSS after the live phases (VmRSS / VmHWM)`, rssText(listener.child.pid!))
    await stopListener(listener)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  if (scale.spanWriters > 0) await spanWeek(bin, parentDir, scale, note)
  return results
}

/** Announces `runs` runs, each acked seqs 1..3 and ended, 64 to a connection, crowdWidth connections at once. */
async function announceEnded(port: number, runs: number): Promise<number> {
  const batches = Array.from({ length: Math.ceil(runs / runsPerConnection) }, (_, i) =>
    Math.min(runsPerConnection, runs - i * runsPerConnection),
  )
  const outcomes = await inParallel(batches, crowdWidth, async (count, b) => {
    const sink = new LatencySink()
    let connection: FleetConnection | undefined
    try {
      connection = await FleetConnection.open(port, sink, waitMs)
      const runIds: string[] = []
      for (let i = 0; i < count; i++) runIds.push(await connection.announce(`/fleet/ended/${b}/${i}.dat`, waitMs))
      for (const runId of runIds) for (let seq = 0; seq < 3; seq++) connection.ack(runId)
      await connection.drain(waitMs)
      for (const runId of runIds) connection.end(runId)
      return connection.error === undefined && connection.unrecorded() === 0
    } catch (error) {
      console.log(`  connection ${b}: ${(error as Error).message}`)
      return false
    } finally {
      connection?.close()
    }
  })
  return outcomes.filter((ok) => !ok).length
}

/** kill -9, then the same command on the same port: time until a real hello is welcomed. */
async function restart(bin: string, dir: string, old: Listener, note: (m: string, v: string) => void, runs: number): Promise<Listener> {
  await new Promise<void>((done) => {
    old.child.once('exit', () => done())
    old.child.kill('SIGKILL') // by this child's pid
  })
  const startNs = process.hrtime.bigint()
  const child = spawnListener(bin, dir, old.port, {})
  child.stdout!.resume()
  await untilWelcomed(child, old.port)
  note(`restart with ${runs} runs: kill -9 to first welcome`, `${(Number(process.hrtime.bigint() - startNs) / 1e9).toFixed(2)} s`)
  note(`RSS after restart (VmRSS / VmHWM)`, rssText(child.pid!))
  return { port: old.port, child }
}

/** Polls with a real hello every 50 ms until one is welcomed (bounded: 15 minutes). */
async function untilWelcomed(child: ChildProcess, port: number): Promise<void> {
  const deadline = Date.now() + 15 * 60_000
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the listener exited with code ${child.exitCode}: ${stderrTail(child)}`)
    if (Date.now() > deadline) throw new Error('the listener did not welcome a hello within 15 minutes')
    try {
      const probe = await FleetConnection.open(port, new LatencySink(), 1000)
      probe.close()
      return
    } catch {
      await new Promise((done) => setTimeout(done, 50))
    }
  }
}

/** `live` runs announced, then each acks one seq every ~1 s for `seconds`: per-ack latency. */
async function trickle(port: number, live: number, seconds: number, note: (m: string, v: string) => void): Promise<void> {
  const sink = new LatencySink()
  await withHonest(port, `${live} live runs`, note, async () => {
    const startMs = Date.now()
    const opened = await inParallel(
      Array.from({ length: Math.ceil(live / runsPerConnection) }, (_, i) => Math.min(runsPerConnection, live - i * runsPerConnection)),
      crowdWidth,
      async (count, b) => {
        const runIds: string[] = []
        let connection: FleetConnection | undefined
        try {
          connection = await FleetConnection.open(port, sink, waitMs)
          for (let i = 0; i < count; i++) runIds.push(await connection.announce(`/fleet/live/${live}/${b}/${i}.dat`, waitMs))
        } catch (error) {
          console.log(`  connection ${b}: ${(error as Error).message}`) // a refused run (a quota, a limit) is a figure, not the end of the bench
        }
        return connection === undefined ? undefined : { connection, runIds }
      },
    )
    const connections = opened.filter((c) => c !== undefined)
    const announced = connections.reduce((n, c) => n + c.runIds.length, 0)
    note(
      `${live} live runs: announcing`,
      `${((Date.now() - startMs) / 1000).toFixed(1)} s${announced === live ? '' : ` (${announced} announced)`}`,
    )
    const timers: NodeJS.Timeout[] = []
    for (const { connection, runIds } of connections) {
      for (const runId of runIds) {
        const tick = (): void => {
          if (connection.error === undefined) connection.ack(runId)
        }
        timers.push(setTimeout(() => timers.push(setInterval(tick, 1000)), Math.random() * 1000))
      }
    }
    await new Promise((done) => setTimeout(done, seconds * 1000))
    for (const timer of timers) clearTimeout(timer)
    await Promise.all(connections.map(({ connection }) => connection.drain(waitMs)))
    const unrecorded = connections.reduce((n, { connection }) => n + connection.unrecorded(), 0)
    const failed = connections.filter(({ connection }) => connection.error !== undefined).length
    const sorted = Float64Array.from(sink.samplesUs).sort()
    note(
      `${live} live runs: ack->recorded p50 / p99 / max`,
      `${latencyText(sorted)} (${sorted.length} acks${unrecorded === 0 ? '' : `, ${unrecorded} never recorded`}${failed === 0 ? '' : `, ${failed} connections failed`})`,
    )
    for (const { connection } of connections) connection.close()
  })
}

/** Writers on a listener whose wall clock runs fakeClockFactor x fast: every ack a span; RSS per span. */
async function spanWeek(bin: string, parentDir: string, scale: Scale, note: (m: string, v: string) => void): Promise<void> {
  const dir = mkdtempSync(join(parentDir, 'plugcheck-fleet-spans-'))
  const env = { LD_PRELOAD: fakeTimeLibrary, FAKETIME: `+0 x${fakeClockFactor}` }
  const listener = await startListener(bin, dir, 0, env)
  try {
    await withHonest(listener.port, `${scale.spanWriters} span writers`, note, async () => {
      const sink = new LatencySink()
      const writers = await inParallel(
        Array.from({ length: scale.spanWriters }, (_, i) => i),
        crowdWidth,
        async (i) => {
          const connection = await FleetConnection.open(listener.port, sink, waitMs)
          return { connection, runId: await connection.announce(`/fleet/spans/${i}.dat`, waitMs) }
        },
      )
      await new Promise((done) => setTimeout(done, 1000))
      const before = rssKiB(listener.child.pid!)
      const stopAtMs = Date.now() + scale.spanSeconds * 1000
      let spans = 0
      // (spans made, RSS bytes) once a second: the slope is the memory per span, steadier than two points under GC.
      const samples: Array<[number, number]> = [[0, before.rss * 1024]]
      let nextSampleMs = Date.now() + 1000
      // One ack per writer every 10 ms real (1 s of the listener's clock): each one a span of its own.
      while (Date.now() < stopAtMs) {
        for (const w of writers) {
          if (w.connection.error !== undefined || w.connection.unrecorded() >= 10_000) continue
          w.connection.ack(w.runId)
          spans++
        }
        await new Promise((done) => setTimeout(done, 10))
        if (Date.now() >= nextSampleMs) {
          samples.push([spans, rssKiB(listener.child.pid!).rss * 1024])
          nextSampleMs += 1000
        }
      }
      await Promise.all(writers.map((w) => w.connection.drain(waitMs)))
      await new Promise((done) => setTimeout(done, 1000))
      const after = rssKiB(listener.child.pid!)
      samples.push([spans, after.rss * 1024])
      // What the listener holds, read back as verify reads it: did every ack become a span of its own?
      const probed = writers.slice(0, 4)
      let heldSpans = 0
      let probedAcks = 0
      for (const w of probed) {
        probedAcks += w.connection.sentSeq(w.runId)
        heldSpans += await countSpans(listener.port, w.runId, w.connection.sentSeq(w.runId), waitMs)
      }
      const spansPerAck = heldSpans / Math.max(1, probedAcks)
      note(
        `${scale.spanWriters} writers: spans held per ack sent (${probed.length} runs read back by span pages)`,
        `${spansPerAck.toFixed(3)} (${heldSpans} / ${probedAcks})`,
      )
      // The slope per span held, not per ack sent.
      const perSpanBytes = slope(samples.map(([acks, rss]) => [acks * spansPerAck, rss] as const))
      const failed = writers.filter((w) => w.connection.error !== undefined).length
      note(
        `${scale.spanWriters} writers: acks sent (1 every 10 ms a writer)`,
        `${spans.toLocaleString('en-US')} in ${scale.spanSeconds} s${failed === 0 ? '' : ` (${failed} writers failed)`}`,
      )
      note(`${scale.spanWriters} writers: RSS before / after spans`, `${mib(before.rss)} / ${mib(after.rss)} (VmHWM ${mib(after.hwm)})`)
      note(`RSS per span (least-squares slope of RSS over spans)`, `${perSpanBytes.toFixed(1)} B`)
      const weekSpans = scale.spanWriters * spansPerWriterWeek
      note(
        `RSS for a week of ${scale.spanWriters} writers (${(weekSpans / 1e9).toFixed(2)} G spans, extrapolated)`,
        mib(before.rss + (Math.max(0, perSpanBytes) * weekSpans) / 1024),
      )
      // Past 4,096 spans a run, a live run's spans leave memory (ack-store.ts maxResidentSpans): the
      // slope from there on is what a week costs; before it, each run's table grows to ~96 KiB.
      const pastResident = samples.filter(([acks]) => (acks * spansPerAck) / scale.spanWriters > residentSpansPerRun * 1.1)
      if (pastResident.length >= 3) {
        const tailBytes = slope(pastResident.map(([acks, rss]) => [acks * spansPerAck, rss] as const))
        note(
          `RSS per span past ${residentSpansPerRun} spans a run (slope over the samples from there)`,
          `${tailBytes.toFixed(1)} B (${pastResident.length} samples)`,
        )
        note(
          `RSS for a week of ${scale.spanWriters} writers (extrapolated from that slope)`,
          mib(after.rss + (Math.max(0, tailBytes) * weekSpans) / 1024),
        )
      } else {
        note(`RSS per span past ${residentSpansPerRun} spans a run`, `n/a (runs held fewer: raise --span-seconds)`)
      }
      for (const w of writers) w.connection.close()
    })
  } finally {
    await stopListener(listener)
    rmSync(dir, { recursive: true, force: true })
  }
}

/** Runs body with an honest writer beside it; notes the writer's latency for the phase. */
async function withHonest(port: number, phase: string, note: (m: string, v: string) => void, body: () => Promise<void>): Promise<void> {
  const child = spawn(process.execPath, ['--import', 'tsx', honestFile, String(port), '1'], { stdio: ['pipe', 'pipe', 'inherit'] })
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]()
  const ready = await bounded(lines.next(), waitMs, 'the honest writer did not start')
  if (ready.value !== 'ready') throw new Error(`the honest writer did not start: ${ready.value}`)
  try {
    await body()
  } finally {
    child.stdin!.write('stop\n')
    const line = await bounded(lines.next(), 2 * waitMs, 'no report from the honest writer')
    const report = JSON.parse(line.value as string) as HonestReport
    const problems = [
      report.unrecorded === 0 ? '' : `${report.unrecorded} never recorded`,
      report.error === null ? '' : report.error,
    ].filter((p) => p !== '')
    note(
      `honest writer during ${phase}: p50 / p99 / max`,
      `${us(report.p50Us)} / ${us(report.p99Us)} / ${us(report.maxUs)} (${report.acks} acks${problems.length === 0 ? '' : `; ${problems.join('; ')}`})`,
    )
  }
}

function spawnListener(bin: string, dir: string, port: number, env: Record<string, string>): ChildProcess {
  const args = [bin, 'listen', '--host', '127.0.0.1', '--port', String(port), '--dir', dir, '--max-connections', '2048', ...listenExtraArgs]
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } })
  // Its log lines (one per connection and run) would drown the table: keep the last few for a failure.
  const tail: string[] = []
  stderrTails.set(child, tail)
  child.stderr!.setEncoding('utf8').on('data', (s: string) => {
    tail.push(s)
    if (tail.length > 20) tail.shift()
  })
  return child
}

const stderrTails = new WeakMap<ChildProcess, string[]>()

function stderrTail(child: ChildProcess): string {
  return (stderrTails.get(child) ?? []).join('').slice(-2000)
}

async function startListener(bin: string, dir: string, port: number, env: Record<string, string>): Promise<Listener> {
  const child = spawnListener(bin, dir, port, env)
  let stdout = ''
  const listening = new Promise<number>((resolvePort, reject) => {
    child.once('exit', (code) => reject(new Error(`plugcheck listen exited early (code ${code}): ${stdout}${stderrTail(child)}`)))
    child.stdout!.setEncoding('utf8').on('data', (s: string) => {
      if (stdout.length < 4096) stdout += s // its event lines are not needed past the first
      const match = /listening on 127\.0\.0\.1:(\d+)/.exec(stdout)
      if (match !== null) resolvePort(Number(match[1]))
    })
  })
  const boundPort = await bounded(listening, waitMs, 'plugcheck listen did not start')
  child.removeAllListeners('exit')
  return { port: boundPort, child }
}

function stopListener(listener: Listener): Promise<void> {
  return new Promise((done) => {
    if (listener.child.exitCode !== null || listener.child.signalCode !== null) return done()
    listener.child.once('exit', () => done())
    listener.child.kill('SIGTERM') // by this child's pid; the listener closes cleanly
  })
}

/** Least-squares slope of y over x. */
function slope(points: ReadonlyArray<readonly [number, number]>): number {
  const n = points.length
  const meanX = points.reduce((a, p) => a + p[0], 0) / n
  const meanY = points.reduce((a, p) => a + p[1], 0) / n
  const sxy = points.reduce((a, p) => a + (p[0] - meanX) * (p[1] - meanY), 0)
  const sxx = points.reduce((a, p) => a + (p[0] - meanX) ** 2, 0)
  return sxx === 0 ? Number.NaN : sxy / sxx
}

function rssKiB(pid: number): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const field = (name: string): number => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN)
  return { rss: field('VmRSS'), hwm: field('VmHWM') }
}

function rssText(pid: number): string {
  const { rss, hwm } = rssKiB(pid)
  return `${mib(rss)} / ${mib(hwm)}`
}

function mib(kib: number): string {
  return kib >= 1024 * 1024 ? `${(kib / 1024 / 1024).toFixed(1)} GiB` : `${(kib / 1024).toFixed(0)} MiB`
}

function us(value: number): string {
  if (!Number.isFinite(value)) return '-'
  return value >= 1e6 ? `${(value / 1e6).toFixed(2)} s` : value >= 1000 ? `${(value / 1000).toFixed(1)} ms` : `${value.toFixed(0)} us`
}

function latencyText(sorted: Float64Array): string {
  return `${us(quantileSorted(sorted, 0.5))} / ${us(quantileSorted(sorted, 0.99))} / ${us(sorted.length === 0 ? Number.NaN : sorted[sorted.length - 1]!)}`
}

process.exitCode = await main()
