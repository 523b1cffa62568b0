/**
 * `plugcheck verify`: finds the run (the listener is the authority, the superblock only a
 * cross-check), judges every acknowledged record, and reports a verdict in plain words or JSON.
 * Exit 0 when every acknowledged record survived, 1 when any was lost, torn or corrupt.
 */
import { hostname } from 'node:os'
import type { StoredRun } from '../protocol/messages.js'
import { AckStore } from '../server/ack-store.js'
import { describeSystemError, exitCodes, usageError } from '../errors.js'
import { formatSize } from '../sizes.js'
import { formatEndpoint, type Endpoint } from './endpoint.js'
import { judgeRun, type RunReport } from './judge.js'
import { queryRuns } from './listener-client.js'
import type { Io } from './writer.js'

export interface VerifyOptions {
  readonly source: { readonly server: Endpoint } | { readonly acksDir: string }
  /** Absolute path, as given to write --file. */
  readonly file: string
  readonly runId?: string
  readonly token?: string
  readonly json: boolean
  /** Host name the run was written from; defaults to this machine's. */
  readonly host?: string
}

export interface VerifyReport {
  readonly verdict: 'pass' | 'fail'
  readonly host: string
  readonly file: string
  readonly source: string
  readonly runs: readonly RunReport[]
}

const shownRangesLimit = 10

export async function runVerify(options: VerifyOptions, io: Io): Promise<number> {
  const host = options.host ?? hostname()
  const query = { host, requestedPath: options.file, ...(options.runId === undefined ? {} : { runId: options.runId }) }
  let runs: StoredRun[]
  let source: string
  if ('server' in options.source) {
    source = `listener ${formatEndpoint(options.source.server)}`
    runs = await queryRuns(options.source.server, options.token, query)
  } else {
    source = `ack directory ${options.source.acksDir}`
    let store: AckStore
    try {
      store = await AckStore.load(options.source.acksDir)
    } catch (error) {
      throw usageError(`could not read the ack directory ${options.source.acksDir}: ${describeSystemError(error)}`, 'give --acks the --dir of a plugcheck listener')
    }
    for (const warning of store.warnings) io.err(`plugcheck: ${warning}\n`)
    runs = store.query(query.host, query.requestedPath, query.runId)
  }
  if (runs.length === 0) {
    throw usageError(
      options.runId === undefined ? `no run found for ${options.file} written from host ${host} (${source})` : `no run ${options.runId} at the ${source}`,
      'check --file (the path given to write) and --server/--acks, or pick a run with --run',
    )
  }
  if (options.runId !== undefined && runs[0]!.meta.path !== options.file && runs[0]!.meta.requestedPath !== options.file) {
    throw usageError(`run ${options.runId} wrote ${runs[0]!.meta.requestedPath}, not ${options.file}`)
  }
  const reports = runs.map(judgeRun)
  const report: VerifyReport = {
    verdict: reports.every((r) => r.verdict === 'pass') ? 'pass' : 'fail',
    host,
    file: options.file,
    source,
    runs: reports,
  }
  io.out(options.json ? JSON.stringify(report, null, 2) + '\n' : renderReport(report))
  return report.verdict === 'pass' ? exitCodes.ok : exitCodes.lossFound
}

export function renderReport(report: VerifyReport): string {
  const lines: string[] = []
  const failed = report.runs.filter((r) => r.verdict === 'fail')
  if (report.runs.length > 1) {
    lines.push(
      failed.length === 0
        ? `PASS: every acknowledged record of all ${report.runs.length} methods survived.`
        : `FAIL: ${failed.map((r) => methodLabel(r)).join(', ')} lost acknowledged data (${failed.length} of ${report.runs.length} methods).`,
    )
  }
  for (const r of report.runs) lines.push(...renderRun(r, report.runs.length === 1))
  return lines.join('\n') + '\n'
}

function methodLabel(r: RunReport): string {
  return `${r.method}${r.direct ? ' --direct' : ''}`
}

function renderRun(r: RunReport, headline: boolean): string[] {
  const n = (x: number): string => x.toLocaleString('en-US')
  const what = `run ${r.runId} (${methodLabel(r)}, ${r.pattern}, ${formatSize(r.recordSize)} records, ${r.path})`
  const bad = r.lost + r.torn + r.corrupt
  const judged = r.acked - r.superseded
  const lines: string[] = []
  const prefix = headline ? '' : '  '
  if (r.verdict === 'pass') {
    lines.push(
      r.acked === 0
        ? `${headline ? 'PASS: ' : ''}${what}: nothing was acknowledged, so nothing can have been lost.`
        : `${headline ? 'PASS: ' : ''}all ${n(judged)} acknowledged records of ${what} survived intact.`,
    )
  } else {
    lines.push(
      `${headline ? 'FAIL: ' : ''}${n(bad)} of ${n(judged)} acknowledged records of ${what} did not survive: ${n(r.lost)} lost, ${n(r.torn)} torn, ${n(r.corrupt)} corrupt.`,
    )
    lines.push(`${prefix}The storage stack reported these writes durable (${r.method} returned success) and then did not keep them.`)
  }
  if (r.superseded > 0) lines.push(`${prefix}${n(r.superseded)} acknowledged records were later overwritten by newer acknowledged ones (superseded, not judged).`)
  if (r.superblock.kind !== 'valid' && r.acked > 0) lines.push(`${prefix}superblock: ${r.superblock.detail}`)
  for (const range of r.lostRanges.slice(0, shownRangesLimit)) {
    const seqs = range.count === 1 ? `seq ${range.fromSeq}` : `seqs ${range.fromSeq}-${range.toSeq} (${n(range.count)})`
    lines.push(`${prefix}lost ${seqs}: ${range.reason}; acknowledged ${timeWindow(range.ackedFromMs, range.ackedToMs)}`)
  }
  if (r.lostRanges.length > shownRangesLimit) lines.push(`${prefix}... and ${n(r.lostRanges.length - shownRangesLimit)} more lost ranges (--json lists them all)`)
  for (const t of r.tornRecords.slice(0, shownRangesLimit)) lines.push(`${prefix}torn seq ${t.seq} at offset ${t.offsetBytes}: ${t.detail}`)
  if (r.torn > shownRangesLimit) lines.push(`${prefix}... and ${n(r.torn - shownRangesLimit)} more torn records`)
  for (const c of r.corruptRecords.slice(0, shownRangesLimit)) lines.push(`${prefix}corrupt seq ${c.seq} at offset ${c.offsetBytes}, ${c.lengthBytes} bytes: ${c.detail}`)
  if (r.corrupt > shownRangesLimit) lines.push(`${prefix}... and ${n(r.corrupt - shownRangesLimit)} more corrupt records`)
  if (r.reordering !== null) {
    lines.push(
      `${prefix}reordering: record ${r.reordering.survivedSeq} survived while ${n(r.reordering.count)} earlier acknowledged records (from seq ${r.reordering.earliestLostSeq}) did not: writes were reordered across a flush, the mark of a volatile cache that ignores flushes.`,
    )
  }
  if (r.interrupted > 0) {
    lines.push(`${prefix}${n(r.interrupted)} newer, unacknowledged overwrites were cut mid-record (not a failure: no sync method promises an atomic record; this shows the device's atomic write unit).`)
  }
  if (r.ended === 'error') lines.push(`${prefix}the writer stopped on an I/O error; records acknowledged before it were judged.`)
  return lines
}

function timeWindow(fromMs: number, toMs: number): string {
  if (!Number.isFinite(fromMs)) return 'at an unknown time'
  const from = new Date(fromMs).toISOString()
  return fromMs === toMs ? `at ${from}` : `between ${from} and ${new Date(toMs).toISOString()}`
}

