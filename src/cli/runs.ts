/**
 * `plugcheck runs`: the runs a listener holds, newest first, one line each (host, path, method, acked,
 * started, how it ended or that it is live, the verdict if one was reported), or with --json the
 * listener's answer as one document {runs, truncated}.
 */
import type { RunSummary } from '../protocol/messages.js'
import { formatEndpoint, type Endpoint } from '../protocol/endpoint.js'
import { listRuns } from '../client/verify/listener-client.js'
import type { Io } from '../base/io.js'
import { printable } from '../base/printable.js'
import { passBootNote } from '../report/text.js'

export interface RunsOptions {
  readonly server: Endpoint
  readonly json: boolean
  readonly token?: string
  readonly campaign?: string
  readonly listenerTimeoutMs: number
}

export async function runRuns(options: RunsOptions, io: Io): Promise<number> {
  const { runs, truncated } = await listRuns(options.server, options.token, options.listenerTimeoutMs, options.campaign)
  if (options.json) {
    io.out(`${JSON.stringify({ runs, truncated }, null, 2)}\n`)
    return 0
  }
  const where = formatEndpoint(options.server)
  const scope = options.campaign === undefined ? '' : ` of campaign ${options.campaign}`
  if (runs.length === 0) {
    io.out(`the listener at ${where} holds no runs${scope}\n`)
    return 0
  }
  io.out(formatRunsTable(runs))
  if (truncated) io.out(`(the listener holds more runs${scope}; only the newest ${runs.length} are listed)\n`)
  return 0
}

const columns = ['run', 'host', 'path', 'method', 'acked', 'started', 'state', 'verdict'] as const

/** The table, columns padded to their widest cell, one run per line. */
export function formatRunsTable(runs: readonly RunSummary[]): string {
  const rows = runs.map((r) =>
    [r.runId, r.host, r.path, r.method, r.ackedThroughSeq.toLocaleString('en-US'), timestamp(r.announcedMs), state(r), verdictText(r)].map(
      printable,
    ),
  )
  const widths = columns.map((c, i) => Math.max(c.length, ...rows.map((row) => row[i]!.length)))
  const line = (cells: readonly string[]): string =>
    `${cells
      .map((cell, i) => (i === 4 ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd()}\n`
  return line(columns) + rows.map(line).join('')
}

/** "live", "ended (duration) 12:03:04", "vanished 12:03:04"; the campaign cycle after it. */
function state(r: RunSummary): string {
  let text: string
  if (r.live) text = r.steadyMs === null ? 'live' : 'live, steady'
  else if (r.end === undefined) text = 'not ended'
  else if (r.end.reason === 'vanished') text = `vanished ${timestamp(r.end.atMs)}`
  else text = `ended (${r.end.reason}) ${timestamp(r.end.atMs)}`
  return r.campaign === null ? text : `${text} [${r.campaign.name} #${r.campaign.cycle}]`
}

/** The stored verdict; a pass verified on the boot of its write, or whose reboot could not be told, says so (it proves nothing of a cut). */
function verdictText(r: RunSummary): string {
  const v = r.verdict
  if (v === null) return '-'
  const lost = v.lost + v.torn + v.corrupt
  const note = v.verdict === 'pass' ? passBootNote(v.rebootedSinceWrite) : ''
  return lost === 0
    ? `${v.verdict}${note}`
    : `${v.verdict}${note} (${lost.toLocaleString('en-US')} of ${v.acked.toLocaleString('en-US')} lost, torn or corrupt)`
}

/** "2026-11-30 12:03:04" in local time. */
function timestamp(ms: number): string {
  const d = new Date(ms)
  const two = (n: number): string => String(n).padStart(2, '0')
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`
}
