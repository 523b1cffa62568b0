/**
 * `plugcheck write`: writes numbered, checksummed records with one or more sync methods and reports
 * each seq to the listener only after the sync call that covers it has returned.
 *
 * The write loop is synchronous on purpose. Every async hop (koffi .async, fs.write, a worker
 * message) costs 15-25 us, half a real flush, and yielding to the event loop delays queued acks by
 * milliseconds. So records are written through libc, and acks leave through a blocking send() on a
 * socket of our own, right after the sync returns. The price: signals end the process at once,
 * which for a crash tester is the right thing (the listener already holds every ack).
 */
import { randomBytes } from 'node:crypto'
import { openSync, writeSync, closeSync } from 'node:fs'
import { hostname } from 'node:os'
import { performance } from 'node:perf_hooks'
import { O, NativeError, close, open } from '../native/libc.js'
import { alignedBuffer, directAlignmentBytes } from '../native/buffers.js'
import { methodAvailability, methodImpl, type MethodName, type SyncMethodImpl } from '../native/registry.js'
import { fillRecord, runKey, sectorBytes, slotOf, slotOffsetBytes, type Pattern, type RunKey, type RunMeta } from '../record/format.js'
import { describeSystemError, runtimeError, usageError } from '../errors.js'
import { formatSize } from '../sizes.js'
import { AckChannel } from './ack-channel.js'
import { checkReplaceable, createDataFile } from './data-file.js'
import { formatEndpoint, type Endpoint } from './endpoint.js'
import { LatencyHistogram } from './latency.js'

export interface WriteOptions {
  readonly server: Endpoint
  /** Absolute path. */
  readonly file: string
  readonly methods: readonly MethodName[]
  readonly direct: boolean
  readonly recordSizeBytes: number
  readonly sizeBytes: number
  readonly pattern: Pattern
  readonly durationS?: number
  readonly token?: string
  readonly force: boolean
  /** Lab and bench only: a side file (outside the cut) logging every completed sync. */
  readonly traceFile?: string
}

export interface Io {
  readonly out: (text: string) => void
  readonly err: (text: string) => void
  readonly statusTty: boolean
}

interface ActiveRun {
  readonly meta: RunMeta
  readonly key: RunKey
  readonly impl: SyncMethodImpl
  readonly buffer: Buffer
  fd: number
  lastSeq: number
  readonly latency: LatencyHistogram
}

const housekeepingIntervalMs = 50
const statusIntervalMs = 250
const steadyAfterMs = 3000
const finalRecordTimeoutMs = 10_000
/** Trace entries: run id (8 bytes), seq (f64), sync-return time from process.hrtime in ns (f64). */
export const traceEntryBytes = 24

/** Checks everything that can be checked before touching the network or the disk (exit 2 on a problem). */
export function validateWriteOptions(options: WriteOptions): void {
  for (const method of options.methods) {
    const availability = methodAvailability(method)
    if (!availability.available) throw usageError(`method ${method} is not available here: ${availability.reason}`)
  }
  if (new Set(options.methods).size !== options.methods.length) throw usageError('--method lists a method twice')
  const alignment = options.direct ? directAlignmentBytes : sectorBytes
  if (options.recordSizeBytes % alignment !== 0 || options.recordSizeBytes === 0) {
    throw usageError(`--record-size ${options.recordSizeBytes} is not a multiple of ${alignment}${options.direct ? ' (needed with --direct)' : ''}`)
  }
  if (options.recordSizeBytes > 1024 * 1024) throw usageError('--record-size is larger than 1 MiB')
  if (Math.floor(options.sizeBytes / options.recordSizeBytes) < 2) {
    throw usageError(`--size ${options.sizeBytes} leaves no room for records of ${options.recordSizeBytes} bytes after the superblock`)
  }
  for (const path of dataPaths(options)) checkReplaceable(path, options.force)
}

/** One file per method; with several methods, PATH.method. */
export function dataPaths(options: Pick<WriteOptions, 'file' | 'methods'>): string[] {
  return options.methods.length === 1 ? [options.file] : options.methods.map((m) => `${options.file}.${m}`)
}

export async function runWrite(options: WriteOptions, io: Io): Promise<number> {
  validateWriteOptions(options)
  const impls = options.methods.map(methodImpl)
  const channel = await AckChannel.open(options.server, options.token)
  const runs: ActiveRun[] = []
  try {
    const groupId = randomBytes(8).toString('hex')
    const host = hostname()
    const slotCount = Math.floor(options.sizeBytes / options.recordSizeBytes) - 1
    const paths = dataPaths(options)
    for (const [i, impl] of impls.entries()) {
      const meta: RunMeta = {
        runId: randomBytes(8).toString('hex'),
        groupId,
        method: impl.name,
        direct: options.direct,
        pattern: options.pattern,
        recordSizeBytes: options.recordSizeBytes,
        slotCount,
        host,
        path: paths[i]!,
        requestedPath: options.file,
        createdMs: Date.now(),
      }
      // Announce first: a run the listener knows with no acks can never be judged lost, while a file
      // replaced before its run was announced would make verify judge the previous run against it.
      channel.announce(meta)
      createDataFile(meta)
      runs.push({
        meta,
        key: runKey(meta.runId),
        impl,
        buffer: alignedBuffer(meta.recordSizeBytes),
        fd: openForMethod(meta, impl),
        lastSeq: 0,
        latency: new LatencyHistogram(),
      })
    }
    return writeLoop(options, runs, channel, io)
  } finally {
    for (const run of runs) if (run.fd >= 0) close(run.fd)
    channel.close()
  }
}

function openForMethod(meta: RunMeta, impl: SyncMethodImpl): number {
  const flags = O.WRONLY | impl.openFlags | (meta.direct ? O.DIRECT : 0)
  try {
    return open(meta.path, flags)
  } catch (error) {
    if (meta.direct && error instanceof NativeError && error.code === 'EINVAL') {
      throw usageError(`--direct is not supported for ${meta.path}: the file system refused O_DIRECT`)
    }
    throw runtimeError(`could not open ${meta.path}: ${describeSystemError(error)}`)
  }
}

function writeLoop(options: WriteOptions, runs: ActiveRun[], channel: AckChannel, io: Io): number {
  const trace = options.traceFile === undefined ? undefined : new TraceLog(options.traceFile)
  const startMs = performance.now()
  const endMs = options.durationS === undefined ? Infinity : startMs + options.durationS * 1000
  let nextHousekeepingMs = startMs + housekeepingIntervalMs
  let nextStatusMs = startMs + statusIntervalMs
  let toldToCut = false
  let failure: { run: ActiveRun; error: unknown } | undefined

  loop: for (let i = 0; ; i++) {
    const run = runs[i % runs.length]!
    const seq = run.lastSeq + 1
    const slot = slotOf(run.key, run.meta.pattern, seq, run.meta.slotCount)
    fillRecord(run.buffer, run.key, seq, slot, Math.round((performance.timeOrigin + performance.now()) * 1000))
    const beforeMs = performance.now()
    try {
      run.impl.writeDurable(run.fd, run.buffer, slotOffsetBytes(run.meta.recordSizeBytes, slot))
    } catch (error) {
      // Never retried: after a failed sync the kernel may have dropped the data and a retry can lie.
      failure = { run, error }
      break loop
    }
    // The sync covering `seq` has returned: report it now, before any other work. (In the lab the
    // trace entry goes first, so ack coverage counts every sync that completed before a cut.)
    trace?.completed(run.key, seq)
    channel.ack(run.meta.runId, seq, seq)
    run.lastSeq = seq
    const afterMs = performance.now()
    run.latency.record((afterMs - beforeMs) * 1000)

    if (afterMs >= nextHousekeepingMs) {
      nextHousekeepingMs = afterMs + housekeepingIntervalMs
      channel.poll() // takes in "recorded" reports; throws if the listener refused or went away
      if (afterMs >= endMs) break loop
      if (io.statusTty && afterMs >= nextStatusMs) {
        nextStatusMs = afterMs + statusIntervalMs
        io.err(`\r${statusLine(runs, channel, (afterMs - startMs) / 1000)}\x1b[K`)
        if (!toldToCut && afterMs - startMs >= steadyAfterMs && runs.every((r) => (channel.recordedThrough.get(r.meta.runId) ?? 0) > 0)) {
          toldToCut = true
          io.err(`\nsteady: the listener is recording acks. Now is the moment to cut the power (pull the plug, not a clean shutdown).\n`)
        }
      }
    }
  }
  if (io.statusTty) io.err('\n')
  trace?.close()

  if (failure !== undefined) {
    const { run, error } = failure
    const what = error instanceof NativeError ? error.syscall : 'write'
    const message = `${what} failed on ${run.meta.path} after seq ${run.lastSeq} (method ${run.meta.method}): ${describeSystemError(error)}`
    for (const r of runs) tryQuietly(() => channel.end(r.meta.runId, 'error', message))
    io.out(summary(options, runs, channel))
    throw runtimeError(message, 'records acknowledged before the failure still count; run verify after checking the device')
  }

  for (const run of runs) channel.end(run.meta.runId, 'duration')
  const recorded = channel.waitRecorded(new Map(runs.map((r) => [r.meta.runId, r.lastSeq])), finalRecordTimeoutMs)
  io.out(summary(options, runs, channel))
  if (!recorded) throw runtimeError(`the listener did not confirm every ack as recorded within ${finalRecordTimeoutMs / 1000} s`)
  return 0
}

function statusLine(runs: ActiveRun[], channel: AckChannel, elapsedS: number): string {
  const written = runs.reduce((n, r) => n + r.lastSeq, 0)
  const recorded = runs.reduce((n, r) => n + (channel.recordedThrough.get(r.meta.runId) ?? 0), 0)
  const p50 = Math.max(...runs.map((r) => r.latency.quantileUs(0.5)))
  const p99 = Math.max(...runs.map((r) => r.latency.quantileUs(0.99)))
  return `${elapsedS.toFixed(0)} s: ${written.toLocaleString('en-US')} records written and acked, ${recorded.toLocaleString('en-US')} recorded by the listener, ${Math.round(written / elapsedS).toLocaleString('en-US')}/s, sync p50 ${formatUs(p50)} p99 ${formatUs(p99)}`
}

function summary(options: WriteOptions, runs: ActiveRun[], channel: AckChannel): string {
  const lines: string[] = []
  for (const run of runs) {
    const m = run.meta
    const recorded = channel.recordedThrough.get(m.runId) ?? 0
    lines.push(`run ${m.runId}: ${m.method}${m.direct ? ' --direct' : ''}, ${m.pattern}, ${formatSize(m.recordSizeBytes)} records, ${m.path}`)
    const done = m.method === 'none' ? 'written (never synced: the negative control)' : 'synced'
    lines.push(`  ${run.lastSeq.toLocaleString('en-US')} records ${done} and acknowledged, ${recorded.toLocaleString('en-US')} recorded by the listener`)
    lines.push(`  sync latency p50 ${formatUs(run.latency.quantileUs(0.5))}, p99 ${formatUs(run.latency.quantileUs(0.99))}, max ${formatUs(run.latency.maxUs)}`)
  }
  lines.push(`after a power cut and reboot: plugcheck verify --server ${formatEndpoint(options.server)} --file ${options.file}`)
  return lines.join('\n') + '\n'
}

export function formatUs(us: number): string {
  if (!Number.isFinite(us)) return '-'
  return us >= 1000 ? `${(us / 1000).toFixed(us >= 10_000 ? 0 : 1)} ms` : `${Math.round(us)} us`
}

function tryQuietly(fn: () => void): void {
  try {
    fn()
  } catch {
    // the listener may be gone; the failure being reported matters more
  }
}

/** Lab/bench side file: one fixed-size entry per completed sync, written in place so it survives SIGKILL. */
class TraceLog {
  private readonly fd: number
  private readonly entry = Buffer.alloc(traceEntryBytes)
  private offset = 0

  constructor(path: string) {
    this.fd = openSync(path, 'w')
  }

  completed(key: RunKey, seq: number): void {
    key.idBytes.copy(this.entry, 0)
    this.entry.writeDoubleLE(seq, 8)
    this.entry.writeDoubleLE(Number(process.hrtime.bigint()), 16)
    writeSync(this.fd, this.entry, 0, traceEntryBytes, this.offset)
    this.offset += traceEntryBytes
  }

  close(): void {
    closeSync(this.fd)
  }
}
