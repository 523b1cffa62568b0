/**
 * Listener CPU per ack: `plugcheck listen` as a real process, and in another process N synthetic
 * writers speaking the real protocol (hello, a run announcement with a valid RunMeta and WriterEnv,
 * then single-seq ack frames as fast as the listener records them).
 *
 * - **CPU/ack**: the listener process's CPU (utime + stime of every thread, from /proc/PID/stat) from
 *   the moment every run is announced to the moment every sent ack is reported recorded, divided by
 *   the acks recorded (the highest throughSeq of each run's 'recorded' replies, summed).
 * - **main**: the part of CPU/ack spent on the listener's main thread (the event loop); the rest is
 *   libuv's threadpool (the store's fsyncs) and V8's helper threads (GC, compilation).
 * - **acks/s**: acks recorded / the sending time.
 * - **lag**: from a chunk of acks leaving the client (one socket write of --frames-per-write frames)
 *   to the 'recorded' reply that covers its last seq: durable in the listener's log, what a writer
 *   learns through AckChannel.recordedThrough. Measured in the client process, one clock.
 * - **timeouts**: connections, welcomes or run-oks that took longer than --timeout-ms (a writer's
 *   default --listener-timeout), or connections refused or closed by the listener. Must be 0.
 *
 * Each client keeps at most --window acks sent and not yet recorded, so the figure is the listener's,
 * not a queue of megabytes in socket buffers. Variants (--baseline DIR, e.g. a `git worktree` of an
 * older commit) run interleaved with the current tree, round by round, on the same machine.
 *
 * Usage: node --import tsx bench/listener-cpu.ts [--clients 8,64,256] [--rounds 2] [--seconds 3]
 *        [--store-dir /dev/shm] [--disk-dir DIR] [--disk-clients 256] [--baseline DIR]
 *        [--window 512] [--frames-per-write 16]
 */
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { AckFrameEncoder, FrameDecoder, encodeFrame, maxServerFrameBytes } from '../src/protocol/framing.js'
import { protocolVersion, serverMessageSchema, type ServerMessage } from '../src/protocol/messages.js'
import type { RunMeta } from '../src/record/format.js'
import {
  fileSystemName,
  formatRate,
  median,
  plugcheckBin,
  quantileSorted,
  roundsAndSeconds,
  startListenerProcess,
  table,
  tmpfsDir,
} from './common.js'

const benchFile = fileURLToPath(import.meta.url)
/** Clock ticks per second of /proc/PID/stat (USER_HZ; 100 on every Linux we run on). */
const clockTicksPerS = 100

interface ClientReport {
  readonly acksRecorded: number
  readonly acksUnrecorded: number
  readonly sendSeconds: number
  readonly timeouts: number
  readonly errors: string[]
  /** Lag of each chunk, microseconds, sorted. */
  readonly lagP50Us: number
  readonly lagP99Us: number
  readonly lagMaxUs: number
}

interface Sample extends ClientReport {
  readonly cpuSeconds: number
  /** The main thread's share of cpuSeconds. */
  readonly mainCpuSeconds: number
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      client: { type: 'boolean', default: false },
      port: { type: 'string', default: '0' },
      clients: { type: 'string', default: '8,64,256' },
      rounds: { type: 'string', default: '2' },
      seconds: { type: 'string', default: '3' },
      'store-dir': { type: 'string', default: tmpfsDir },
      'disk-dir': { type: 'string', default: tmpdir() },
      'disk-clients': { type: 'string', default: '256' },
      baseline: { type: 'string' },
      window: { type: 'string', default: '512' },
      'frames-per-write': { type: 'string', default: '16' },
      'timeout-ms': { type: 'string', default: '10000' },
    },
  })
  const { roundCount, durationS } = roundsAndSeconds(values)
  const clientOptions = {
    window: Number(values.window),
    framesPerWrite: Number(values['frames-per-write']),
    timeoutMs: Number(values['timeout-ms']),
    durationS,
  }
  if (values.client) return runClients(Number(values.port), Number(values.clients), clientOptions)

  const variants = [{ label: 'now', bin: plugcheckBin }]
  if (values.baseline !== undefined) variants.unshift({ label: 'before', bin: join(resolve(values.baseline), 'bin', 'plugcheck.js') })
  const targets = values.clients.split(',').map((n) => ({ clients: Number(n), dir: resolve(values['store-dir']) }))
  if (values['disk-clients'] !== '') targets.push({ clients: Number(values['disk-clients']), dir: resolve(values['disk-dir']) })

  const samples = new Map<string, Sample[]>()
  const rows = [
    ['store', 'clients', 'variant', 'round', 'CPU/ack', 'main', 'acks/s', 'lag p50', 'lag p99', 'lag max', 'timeouts', 'unrecorded'],
  ]
  for (let r = 0; r < roundCount; r++) {
    for (const target of targets) {
      // Alternate which variant goes first, so neither always runs on a warmer machine.
      const ordered = r % 2 === 0 ? variants : [...variants].reverse()
      for (const variant of ordered) {
        const store = `${fileSystemName(target.dir)}`
        const sample = await measureOnce(variant.bin, target.dir, target.clients, clientOptions)
        const key = `${store}\t${target.clients}\t${variant.label}`
        samples.set(key, [...(samples.get(key) ?? []), sample])
        const row = [store, String(target.clients), variant.label, String(r + 1), ...sampleColumns([sample])]
        rows.push(row)
        console.log(row.join('  '))
        for (const error of sample.errors.slice(0, 3)) console.log(`  error: ${error}`)
      }
    }
  }
  const summary = [
    [
      'store',
      'clients',
      'variant',
      'CPU/ack (median)',
      'CPU/ack range',
      'main (median)',
      'acks/s (median)',
      'lag p50',
      'lag p99 (worst)',
      'timeouts',
      'unrecorded',
    ],
  ]
  for (const [key, list] of samples) {
    const cpu = list.map(cpuUsPerAck)
    const [store, clients, variant] = key.split('\t')
    summary.push([
      store!,
      clients!,
      variant!,
      `${median(cpu).toFixed(2)} us`,
      `${Math.min(...cpu).toFixed(2)}-${Math.max(...cpu).toFixed(2)} us`,
      `${median(list.map(mainCpuUsPerAck)).toFixed(2)} us`,
      formatRate(median(list.map(ratePerS))),
      formatUs(median(list.map((s) => s.lagP50Us))),
      formatUs(Math.max(...list.map((s) => s.lagP99Us))),
      String(list.reduce((n, s) => n + s.timeouts, 0)),
      String(list.reduce((n, s) => n + s.acksUnrecorded, 0)),
    ])
  }
  console.log(`\nlistener CPU per recorded ack, ${roundCount} rounds of ${durationS} s, window ${clientOptions.window} acks per client`)
  console.log(table(rows))
  console.log('')
  console.log(table(summary))
  return 0
}

function cpuUsPerAck(s: Sample): number {
  return (s.cpuSeconds * 1e6) / Math.max(1, s.acksRecorded)
}

function mainCpuUsPerAck(s: Sample): number {
  return (s.mainCpuSeconds * 1e6) / Math.max(1, s.acksRecorded)
}

function ratePerS(s: Sample): number {
  return s.acksRecorded / s.sendSeconds
}

function sampleColumns(list: Sample[]): string[] {
  const s = list[0]!
  return [
    `${cpuUsPerAck(s).toFixed(2)} us`,
    `${mainCpuUsPerAck(s).toFixed(2)} us`,
    formatRate(ratePerS(s)),
    formatUs(s.lagP50Us),
    formatUs(s.lagP99Us),
    formatUs(s.lagMaxUs),
    String(s.timeouts),
    String(s.acksUnrecorded),
  ]
}

/** One listener process, one client process; the listener's CPU between "every run announced" and "every ack recorded". */
async function measureOnce(bin: string, parentDir: string, clients: number, options: ClientOptions): Promise<Sample> {
  const storeDir = mkdtempSync(join(parentDir, 'plugcheck-bench-listener-'))
  const listener = await startListenerProcess(storeDir, bin)
  listener.child.stdout!.resume() // its event lines are not needed
  try {
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        benchFile,
        '--client',
        '--port',
        String(listener.port),
        '--clients',
        String(clients),
        '--window',
        String(options.window),
        '--frames-per-write',
        String(options.framesPerWrite),
        '--timeout-ms',
        String(options.timeoutMs),
        '--seconds',
        String(options.durationS),
      ],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    )
    const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]()
    const ready = await lines.next()
    if (ready.done === true || ready.value !== 'ready') throw new Error(`the clients did not get ready: ${ready.value}`)
    const pid = listener.child.pid!
    const cpuBefore = cpuSecondsOf(`/proc/${pid}/stat`)
    const mainBefore = cpuSecondsOf(`/proc/${pid}/task/${pid}/stat`)
    child.stdin!.write('go\n')
    const reportLine = await lines.next()
    const cpuSeconds = cpuSecondsOf(`/proc/${pid}/stat`) - cpuBefore
    const mainCpuSeconds = cpuSecondsOf(`/proc/${pid}/task/${pid}/stat`) - mainBefore
    if (reportLine.done === true) throw new Error('the clients ended without a report')
    await new Promise((done) => (child.exitCode === null ? child.once('exit', done) : done(undefined)))
    return { ...(JSON.parse(reportLine.value) as ClientReport), cpuSeconds, mainCpuSeconds }
  } finally {
    await listener.stop()
    rmSync(storeDir, { recursive: true, force: true })
  }
}

/** utime + stime in seconds from a stat file: /proc/PID/stat (every thread) or /proc/PID/task/TID/stat (one). */
function cpuSecondsOf(statPath: string): number {
  const stat = readFileSync(statPath, 'utf8')
  // Fields after the command name (which may hold spaces) start at state (field 3).
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[11]) + Number(fields[12])) / clockTicksPerS
}

interface ClientOptions {
  readonly window: number
  readonly framesPerWrite: number
  readonly timeoutMs: number
  readonly durationS: number
}

/** One synthetic writer: its socket, run and the chunks of acks not yet reported recorded. */
class SyntheticWriter {
  readonly runId = randomBytes(8).toString('hex')
  readonly encoder = new AckFrameEncoder(this.runId)
  private readonly decoder = new FrameDecoder(serverMessageSchema, maxServerFrameBytes)
  private readonly waiters = new Map<string, () => void>()
  sentSeq = 0
  recordedSeq = 0
  /** Last seq and send time (ns) of each chunk not yet recorded, oldest first. */
  private readonly chunks: Array<[number, number]> = []
  readonly lagsUs: number[] = []
  error: string | undefined
  onRecorded: () => void = () => undefined

  constructor(readonly socket: Socket) {
    socket.setNoDelay(true)
    socket.on('data', (chunk) => {
      let messages: ServerMessage[]
      try {
        messages = this.decoder.push(chunk)
      } catch (error) {
        this.fail(`bad frame from the listener: ${(error as Error).message}`)
        return
      }
      for (const m of messages) this.take(m)
    })
    socket.on('close', () => this.fail('the listener closed the connection'))
    socket.on('error', (error) => this.fail(error.message))
  }

  private take(m: ServerMessage): void {
    if (m.type === 'error') {
      this.fail(`${m.code}: ${m.message}`)
      return
    }
    if (m.type !== 'recorded') {
      this.waiters.get(m.type)?.()
      return
    }
    const nowNs = Number(process.hrtime.bigint())
    this.recordedSeq = Math.max(this.recordedSeq, m.throughSeq)
    while (this.chunks.length > 0 && this.chunks[0]![0] <= this.recordedSeq) this.lagsUs.push((nowNs - this.chunks.shift()![1]) / 1000)
    this.onRecorded()
  }

  private fail(why: string): void {
    this.error ??= why
    for (const resolve of this.waiters.values()) resolve()
    this.onRecorded()
  }

  /** Resolves true when a message of this type arrives within timeoutMs. */
  waitFor(type: string, timeoutMs: number): Promise<boolean> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs)
      this.waiters.set(type, () => {
        clearTimeout(timer)
        this.waiters.delete(type)
        resolve(this.error === undefined)
      })
    })
  }

  /** Sends chunks while fewer than window acks are unrecorded; false when the socket is full. */
  pump(window: number, framesPerWrite: number): void {
    while (this.error === undefined && this.sentSeq - this.recordedSeq + framesPerWrite <= window) {
      const frames: Buffer[] = []
      for (let i = 0; i < framesPerWrite; i++) frames.push(Buffer.from(this.encoder.encode(this.sentSeq + 1 + i, this.sentSeq + 1 + i)))
      this.sentSeq += framesPerWrite
      this.chunks.push([this.sentSeq, Number(process.hrtime.bigint())])
      if (!this.socket.write(Buffer.concat(frames))) return void this.socket.once('drain', () => this.pump(window, framesPerWrite))
    }
  }
}

/** The client process: connects, announces, waits for "go", acks for durationS, waits for every ack to be recorded. */
async function runClients(port: number, count: number, options: ClientOptions): Promise<number> {
  let timeouts = 0
  const connectOne = async (index: number): Promise<SyntheticWriter | undefined> => {
    const socket = connect({ host: '127.0.0.1', port })
    const connected = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), options.timeoutMs)
      const settle = (connected: boolean): void => {
        clearTimeout(timer)
        resolve(connected)
      }
      socket.once('connect', () => settle(true)).once('error', () => settle(false))
    })
    const writer = new SyntheticWriter(socket)
    if (!connected) return undefined
    const welcome = writer.waitFor('welcome', options.timeoutMs)
    socket.write(encodeFrame({ type: 'hello', protocol: protocolVersion, role: 'writer' }))
    if (!(await welcome)) return undefined
    const path = `/bench/listener-cpu/${index}.dat`
    const meta: RunMeta = {
      runId: writer.runId,
      groupId: writer.runId,
      method: 'fdatasync',
      direct: false,
      pattern: 'append',
      recordSizeBytes: 8192,
      slotCount: 1 << 30,
      host: 'bench',
      path,
      requestedPath: path,
      createdMs: Date.now(),
    }
    const runOk = writer.waitFor('run-ok', options.timeoutMs)
    socket.write(encodeFrame({ type: 'run', meta, writer: { bootId: null, fingerprint: null } }))
    return (await runOk) ? writer : undefined
  }
  const connected = await Promise.all(Array.from({ length: count }, (_, i) => connectOne(i)))
  const writers = connected.filter((w): w is SyntheticWriter => w !== undefined)
  timeouts += count - writers.length
  process.stdout.write('ready\n')
  const stdin = createInterface({ input: process.stdin })
  await new Promise<void>((resolve) => stdin.once('line', () => resolve()))
  stdin.close()
  process.stdin.destroy() // nothing more to read; an open stdin would keep this process alive

  let sending = true
  for (const w of writers) w.onRecorded = () => sending && w.pump(options.window, options.framesPerWrite)
  const startNs = process.hrtime.bigint()
  for (const w of writers) w.pump(options.window, options.framesPerWrite)
  await new Promise((done) => setTimeout(done, options.durationS * 1000))
  sending = false
  const sendSeconds = Number(process.hrtime.bigint() - startNs) / 1e9
  // Every sent ack recorded (bounded wait), or the connection failed.
  const drainDeadline = Date.now() + options.timeoutMs
  while (Date.now() < drainDeadline && writers.some((w) => w.error === undefined && w.recordedSeq < w.sentSeq))
    await new Promise((done) => setTimeout(done, 5))
  const lags = Float64Array.from(writers.flatMap((w) => w.lagsUs)).sort()
  const report: ClientReport = {
    acksRecorded: writers.reduce((n, w) => n + w.recordedSeq, 0),
    acksUnrecorded: writers.reduce((n, w) => n + w.sentSeq - w.recordedSeq, 0),
    sendSeconds,
    timeouts: timeouts + writers.filter((w) => w.error !== undefined).length,
    errors: writers.flatMap((w) => (w.error === undefined ? [] : [w.error])),
    lagP50Us: quantileSorted(lags, 0.5),
    lagP99Us: quantileSorted(lags, 0.99),
    lagMaxUs: lags.length === 0 ? Number.NaN : lags[lags.length - 1]!,
  }
  process.stdout.write(`${JSON.stringify(report)}\n`)
  for (const w of writers) w.socket.destroy()
  return 0
}

function formatUs(us: number): string {
  if (!Number.isFinite(us)) return '-'
  return us >= 1000 ? `${(us / 1000).toFixed(2)} ms` : `${us.toFixed(0)} us`
}

process.exitCode = await main()
