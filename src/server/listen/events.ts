/**
 * What the listener tells its operator: one event per thing that happened (a connection, a run
 * announced, steady, ended or vanished, a verdict received, a warning, a campaign step). `listen`
 * prints each as one line on stderr (describeEvent) and, with --events FILE, appends it as a JSON line;
 * the campaign engine consumes the same events.
 */
import type { CampaignTag, EndReason, StoredVerdict } from '../../protocol/messages.js'
import { printable } from '../../base/printable.js'

export type ListenerEvent =
  | { kind: 'connection'; peer: string; atMs: number }
  | {
      kind: 'run'
      runId: string
      groupId: string
      host: string
      path: string
      method: string
      peer: string
      campaign: CampaignTag | null
      atMs: number
    }
  | {
      kind: 'steady'
      runId: string
      groupId: string
      host: string
      path: string
      campaign: CampaignTag | null
      acked: number
      atMs: number
    }
  | {
      kind: 'end'
      runId: string
      groupId: string
      host: string
      path: string
      reason: EndReason
      detail?: string
      acked: number
      durationMs: number
      atMs: number
    }
  | { kind: 'vanished'; runId: string; groupId: string; host: string; path: string; acked: number; atMs: number; verifyCommand: string }
  | {
      kind: 'verdict'
      runId: string
      groupId: string
      host: string
      path: string
      campaign: CampaignTag | null
      result: StoredVerdict
      atMs: number
    }
  | { kind: 'warning'; message: string; atMs: number }
  | { kind: 'campaign'; name: string; message: string; atMs: number }
  | { kind: 'pruned'; runs: number; bytes: number; olderThan: string; atMs: number }

/** HH:MM:SS in the listener's local time: the operator reads it next to a wall clock. */
function clock(atMs: number): string {
  const d = new Date(atMs)
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, '0')).join(':')
}

/** "1,234" */
function count(n: number): string {
  return n.toLocaleString('en-US')
}

/** "2 h 3 min", "4 min 5 s", "6.1 s" */
export function formatDuration(durationMs: number): string {
  const s = Math.max(0, durationMs) / 1000
  if (s < 60) return `${s.toFixed(1)} s`
  const totalS = Math.round(s)
  if (totalS < 3600) return `${Math.floor(totalS / 60)} min ${totalS % 60} s`
  return `${Math.floor(totalS / 3600)} h ${Math.floor((totalS % 3600) / 60)} min`
}

function tag(campaign: CampaignTag | null): string {
  return campaign === null ? '' : ` [campaign ${campaign.name}, cycle ${campaign.cycle}]`
}

/** One line for stderr: the time, then what happened in plain words. */
export function describeEvent(e: ListenerEvent): string {
  return printable(`${clock(e.atMs)} ${describeBody(e)}`)
}

function describeBody(e: ListenerEvent): string {
  switch (e.kind) {
    case 'connection':
      return `connection from ${e.peer}`
    case 'run':
      return `run ${e.runId} announced by ${e.host}:${e.path} (${e.method}) from ${e.peer}${tag(e.campaign)}`
    case 'steady':
      return `run ${e.runId} on ${e.host}:${e.path} is steady after ${count(e.acked)} acks: the moment to cut${tag(e.campaign)}`
    case 'end':
      return `run ${e.runId} on ${e.host}:${e.path} ended (${e.reason}${e.detail === undefined ? '' : `: ${e.detail}`}) after ${formatDuration(e.durationMs)}, ${count(e.acked)} acks`
    case 'vanished':
      return `writer on ${e.host} vanished after ${count(e.acked)} acks at ${clock(e.atMs)} (run ${e.runId}, ${e.path}): after the reboot run \`${e.verifyCommand}\``
    case 'verdict':
      return `verdict for run ${e.runId} on ${e.host}:${e.path}: ${e.result.verdict}, ${count(e.result.acked)} acked, ${count(e.result.lost)} lost, ${count(e.result.torn)} torn, ${count(e.result.corrupt)} corrupt${tag(e.campaign)}`
    case 'warning':
      return `warning: ${e.message}`
    case 'campaign':
      return `campaign ${e.name}: ${e.message}`
    case 'pruned':
      return `pruned ${count(e.runs)} ${e.runs === 1 ? 'run' : 'runs'} that ended over ${e.olderThan} ago (${count(e.bytes)} bytes; --retain)`
  }
}
