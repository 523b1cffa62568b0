/**
 * Ack lag: time from "the sync covering seq n returned" in the writer to "the listener has the ack
 * for n", at full rate on loopback.
 *
 * The listener runs in this process; its store emits 'accepted' the moment an ack passes the
 * protocol checks, and we note process.hrtime.bigint() per seq. The writer is a child process
 * started with --trace-file, which logs process.hrtime.bigint() right after each sync returns
 * (before the ack is encoded and sent). Both clocks are CLOCK_MONOTONIC on one machine, so
 * lag = receipt ns - sync-return ns, joined by (run id, seq).
 *
 * The lag is also split at the moment the listener's JavaScript first sees the bytes (a 'data'
 * listener put ahead of the listener's own on each accepted socket, via the net.server.socket
 * diagnostics channel): "wire" = sync return -> bytes seen (writer's encode + send, kernel, waking
 * and scheduling the listener, its event loop), "handling" = bytes seen -> accepted (framing, zod,
 * the store; includes waiting behind earlier acks of the same chunk).
 *
 * The trace file and the listener's store live on tmpfs so that neither adds flushes to the disk
 * under test. Targets: tmpfs (highest record rate, the worst case for lag) and an ext4 directory.
 *
 * Usage: node --import tsx bench/ack-lag.ts [--dir DIR] [--rounds N] [--seconds S] [--targets tmpfs,disk]
 *        [--store-dir DIR]   (where the listener keeps its acks; default /dev/shm)
 */
import { subscribe } from 'node:diagnostics_channel'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import type { Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { Listener } from '../src/server/listen/listener.js'
import { traceEntryBytes } from '../src/client/write/trace-log.js'
import {
  fileSystemName,
  formatRate,
  median,
  plugcheckWriteArgs,
  quantileSorted,
  recordsFromSummary,
  roundsAndSeconds,
  runChild,
  table,
  tmpfsDir,
} from './common.js'

const goalLagUsP50 = 100
const goalLagUsP99 = 1000

/** Receipt time (ns, CLOCK_MONOTONIC) per seq of one run; 0 = not received. */
class Receipts {
  private times = new Float64Array(1 << 16)

  note(seq: number, ns: number): void {
    while (seq >= this.times.length) {
      const grown = new Float64Array(this.times.length * 2)
      grown.set(this.times)
      this.times = grown
    }
    this.times[seq] = ns
  }

  at(seq: number): number {
    return seq < this.times.length ? this.times[seq]! : 0
  }
}

interface LagSample {
  /** Lag per traced sync, microseconds, sorted ascending; and its two parts, each sorted alone. */
  readonly lagsUs: Float64Array
  readonly wireUs: Float64Array
  readonly handlingUs: Float64Array
  readonly missing: number
  readonly ratePerS: number
  /** CPU time of this process (the listener, plus this bench's small bookkeeping) per ack. */
  readonly listenerCpuUsPerAck: number
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      dir: { type: 'string', default: tmpdir() },
      rounds: { type: 'string', default: '3' },
      seconds: { type: 'string', default: '4' },
      targets: { type: 'string', default: 'tmpfs,disk' },
      'store-dir': { type: 'string', default: tmpfsDir },
    },
  })
  const { roundCount, durationS } = roundsAndSeconds(values)
  const wanted = new Set(values.targets.split(','))
  const targets = [
    { label: 'tmpfs', dir: tmpfsDir },
    { label: 'disk', dir: resolve(values.dir) },
  ].filter((t) => wanted.has(t.label))

  const storeDir = mkdtempSync(join(resolve(values['store-dir']), 'plugcheck-bench-store-'))
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: storeDir })
  const receipts: ReceiptLog = { accepted: new Map(), seen: new Map() }
  let bytesSeenNs = 0
  subscribe('net.server.socket', (message) => {
    ;(message as { socket: Socket }).socket.prependListener('data', () => {
      bytesSeenNs = Number(process.hrtime.bigint())
    })
  })
  listener.store.on('accepted', (runId, fromSeq, toSeq) => {
    const ns = Number(process.hrtime.bigint())
    let accepted = receipts.accepted.get(runId)
    let seen = receipts.seen.get(runId)
    if (accepted === undefined || seen === undefined) {
      receipts.accepted.set(runId, (accepted = new Receipts()))
      receipts.seen.set(runId, (seen = new Receipts()))
    }
    for (let seq = fromSeq; seq <= toSeq; seq++) {
      accepted.note(seq, ns)
      seen.note(seq, bytesSeenNs)
    }
  })

  const rows = [
    [
      'target',
      'round',
      'records/s',
      'p50',
      'p90',
      'p99',
      'p99.9',
      'max',
      'missing',
      'wire p50',
      'wire p99',
      'handling p50',
      'handling p99',
      'listener CPU/ack',
    ],
  ]
  const summaryRows = [['target', 'records/s', 'lag p50', 'lag p99', 'lag max', 'goal p50 <= 100 us', 'goal p99 <= 1 ms']]
  try {
    for (const target of targets) {
      const label = `${target.label} (${fileSystemName(target.dir)})`
      const samples: LagSample[] = []
      for (let r = 0; r < roundCount; r++) {
        const sample = await measureOnce(listener.address().port, target.dir, durationS, receipts)
        samples.push(sample)
        rows.push([
          label,
          String(r + 1),
          formatRate(sample.ratePerS),
          ...lagColumns(sample.lagsUs),
          String(sample.missing),
          ...partColumns(sample),
          `${sample.listenerCpuUsPerAck.toFixed(1)} us`,
        ])
        console.log(
          `${label} round ${r + 1}: ${formatRate(sample.ratePerS)}, lag p50 ${formatUs(quantileSorted(sample.lagsUs, 0.5))}, p99 ${formatUs(quantileSorted(sample.lagsUs, 0.99))}`,
        )
      }
      const pool = (part: (s: LagSample) => Float64Array): Float64Array => Float64Array.from(samples.flatMap((s) => [...part(s)])).sort()
      const pooled = pool((s) => s.lagsUs)
      const pooledParts = { wireUs: pool((s) => s.wireUs), handlingUs: pool((s) => s.handlingUs) }
      const meanRatePerS = samples.reduce((n, s) => n + s.ratePerS, 0) / samples.length
      rows.push([
        label,
        'all',
        formatRate(meanRatePerS),
        ...lagColumns(pooled),
        String(samples.reduce((n, s) => n + s.missing, 0)),
        ...partColumns(pooledParts),
        `${median(samples.map((s) => s.listenerCpuUsPerAck)).toFixed(1)} us`,
      ])
      const p50 = quantileSorted(pooled, 0.5)
      const p99 = quantileSorted(pooled, 0.99)
      summaryRows.push([
        label,
        formatRate(meanRatePerS),
        formatUs(p50),
        formatUs(p99),
        formatUs(pooled[pooled.length - 1]!),
        p50 <= goalLagUsP50 ? 'met' : 'missed',
        p99 <= goalLagUsP99 ? 'met' : 'missed',
      ])
    }
  } finally {
    await listener.close()
    rmSync(storeDir, { recursive: true, force: true })
  }
  console.log(`\nack lag = listener receipt - sync return, ${roundCount} rounds of ${durationS} s per target`)
  console.log(table(rows))
  console.log('')
  console.log(table(summaryRows))
  return 0
}

/** Per run: when the listener accepted each seq, and when its JavaScript first saw the bytes carrying it. */
interface ReceiptLog {
  readonly accepted: Map<string, Receipts>
  readonly seen: Map<string, Receipts>
}

/** One writer run: returns every traced sync's lag. */
async function measureOnce(port: number, dir: string, durationS: number, receipts: ReceiptLog): Promise<LagSample> {
  const dataFile = join(dir, `plugcheck-bench-lag-${process.pid}.dat`)
  const traceFile = join(tmpfsDir, `plugcheck-bench-lag-${process.pid}.trace`)
  try {
    const cpuBefore = process.cpuUsage()
    // Asynchronous spawn: this process's event loop must stay free to serve the listener.
    const result = await runChild(process.execPath, plugcheckWriteArgs(port, dataFile, durationS, ['--trace-file', traceFile]))
    if (result.code !== 0) throw new Error(`plugcheck write failed (code ${result.code}):\n${result.stdout}${result.stderr}`)
    const cpu = process.cpuUsage(cpuBefore)
    const records = recordsFromSummary(result.stdout)
    const trace = readFileSync(traceFile)
    const count = Math.floor(trace.length / traceEntryBytes)
    const lagsUs = new Float64Array(count)
    const wireUs = new Float64Array(count)
    const handlingUs = new Float64Array(count)
    let found = 0
    let missing = 0
    for (let i = 0; i < count; i++) {
      const at = i * traceEntryBytes
      const runId = trace.toString('hex', at, at + 8)
      const seq = trace.readDoubleLE(at + 8)
      const syncReturnNs = trace.readDoubleLE(at + 16)
      const acceptedNs = receipts.accepted.get(runId)?.at(seq) ?? 0
      const seenNs = receipts.seen.get(runId)?.at(seq) ?? 0
      if (acceptedNs === 0) {
        missing++
        continue
      }
      lagsUs[found] = (acceptedNs - syncReturnNs) / 1000
      wireUs[found] = (seenNs - syncReturnNs) / 1000
      handlingUs[found] = (acceptedNs - seenNs) / 1000
      found++
    }
    receipts.accepted.clear()
    receipts.seen.clear()
    return {
      lagsUs: lagsUs.subarray(0, found).sort(),
      wireUs: wireUs.subarray(0, found).sort(),
      handlingUs: handlingUs.subarray(0, found).sort(),
      missing,
      ratePerS: records / durationS,
      listenerCpuUsPerAck: (cpu.user + cpu.system) / records,
    }
  } finally {
    rmSync(dataFile, { force: true })
    rmSync(traceFile, { force: true })
  }
}

function lagColumns(sortedUs: Float64Array): string[] {
  return [0.5, 0.9, 0.99, 0.999, 1].map((q) => formatUs(quantileSorted(sortedUs, q)))
}

function partColumns(parts: Pick<LagSample, 'wireUs' | 'handlingUs'>): string[] {
  return [parts.wireUs, parts.handlingUs].flatMap((sorted) => [
    formatUs(quantileSorted(sorted, 0.5)),
    formatUs(quantileSorted(sorted, 0.99)),
  ])
}

function formatUs(us: number): string {
  if (!Number.isFinite(us)) return '-'
  return us >= 1000 ? `${(us / 1000).toFixed(2)} ms` : `${us.toFixed(0)} us`
}

process.exitCode = await main()
