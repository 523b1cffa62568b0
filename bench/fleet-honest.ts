/**
 * One honest writer, run as a child process of fleet-week.ts so that the crowd of synthetic writers
 * in the parent cannot delay its own event loop: one run, one ack every --interval-ms (a continuously
 * acking writer), each ack's latency from its socket write to the 'recorded' that covers it.
 * Prints "ready" once its run is announced; on the line "stop" on stdin it stops acking, waits (bounded)
 * for the rest to be recorded and prints one JSON line: acks sent, unrecorded, latency p50/p99/max, error.
 *   node --import tsx bench/fleet-honest.ts PORT [INTERVAL_MS]
 */
import { createInterface } from 'node:readline'
import { quantileSorted } from './common.js'
import { FleetConnection, LatencySink } from './fleet-clients.js'

export interface HonestReport {
  readonly acks: number
  readonly unrecorded: number
  readonly p50Us: number
  readonly p99Us: number
  readonly maxUs: number
  readonly error: string | null
}

const port = Number(process.argv[2])
const intervalMs = Number(process.argv[3] ?? 1)
const timeoutMs = 60_000

const sink = new LatencySink()
const connection = await FleetConnection.open(port, sink, timeoutMs)
const runId = await connection.announce('/fleet/honest.dat', timeoutMs)
let acks = 0
let sending = true
const tick = (): void => {
  if (!sending || connection.error !== undefined) return
  connection.ack(runId)
  acks++
  setTimeout(tick, intervalMs)
}
tick()
process.stdout.write('ready\n')

const stdin = createInterface({ input: process.stdin })
await new Promise<void>((resolve) => stdin.on('line', (line) => line === 'stop' && resolve()))
sending = false
await connection.drain(timeoutMs)
const sorted = Float64Array.from(sink.samplesUs).sort()
const report: HonestReport = {
  acks,
  unrecorded: connection.unrecorded(),
  p50Us: quantileSorted(sorted, 0.5),
  p99Us: quantileSorted(sorted, 0.99),
  maxUs: sorted.length === 0 ? Number.NaN : sorted[sorted.length - 1]!,
  error: connection.error ?? null,
}
process.stdout.write(`${JSON.stringify(report)}\n`)
connection.close()
process.exit(0)
