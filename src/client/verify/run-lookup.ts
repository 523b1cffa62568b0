/**
 * Which runs a verify judges, past what the listener answered: runs that the path's claims no longer
 * list but a file still holds, the group a file still holds when the latest stopped before its first
 * record, and the order a report lists them in.
 */
import type { Claim, StoredRun } from '../../protocol/messages.js'
import { ackedThroughSeqOf } from './ack-timeline.js'
import type { RunSource } from './run-source.js'
import type { Superblocks } from './superblocks.js'
import { oneLine } from '../../base/printable.js'

/**
 * Claims hold the newest runs on the path only: a flood of announcements can push out the run a file
 * still holds. Such a run is looked up by id and added at the end (it is older than every listed one),
 * so the address checks below see it.
 */
export async function withRunsTheFilesHold(
  runs: readonly StoredRun[],
  claims: Claim[],
  from: RunSource,
  query: { host: string; requestedPath: string },
  files: Superblocks,
): Promise<Claim[]> {
  const extra: Claim[] = []
  for (const run of runs) {
    const reading = files.of(run)
    if (reading.kind !== 'valid' || reading.meta.runId === run.meta.runId) continue
    const runId = reading.meta.runId
    if (claims.some((c) => c.runId === runId) || extra.some((c) => c.runId === runId)) continue
    const found = (await from.find({ ...query, runId })).runs.find((r) => r.meta.runId === runId)
    if (found === undefined || found.meta.host !== query.host || found.meta.requestedPath !== query.requestedPath) continue
    extra.push({
      runId,
      groupId: found.meta.groupId,
      method: found.meta.method,
      announcedMs: found.announcedMs,
      ...(found.peer === undefined ? {} : { peer: found.peer }),
      ...(found.authenticated === undefined ? {} : { authenticated: found.authenticated }),
      live: false,
      ...(found.end === undefined ? {} : { end: found.end }),
      ackedThroughSeq: ackedThroughSeqOf(found),
    })
  }
  return extra.length === 0 ? claims : [...claims, ...extra]
}

/**
 * The latest group stopped before its first record (its writer ended it as 'error': a later `write`
 * that failed while setting up, e.g. on a file system that came back read-only after the cut), and
 * every file still holds one earlier group's run. That earlier group is what the file can show, so it
 * is judged instead, with a note; judging the empty group would hide its losses behind "inconclusive".
 */
export async function runsTheFileStillHolds(
  runs: readonly StoredRun[],
  claims: readonly Claim[],
  from: RunSource,
  query: { host: string; requestedPath: string },
  files: Superblocks,
): Promise<{ runs: StoredRun[]; note: string } | null> {
  // Only runs whose writer said they stopped before their first record (end 'error', sent when setting
  // up failed): a run cut before its first ack may have created its file, and losing that is not ours to excuse.
  if (runs.some((r) => ackedThroughSeqOf(r) > 0 || r.end?.reason !== 'error')) return null
  const groupId = runs[0]!.meta.groupId
  const latestIndex = claims.findIndex((c) => c.groupId === groupId)
  let earlierGroup: string | undefined
  for (const run of runs) {
    const reading = files.of(run)
    if (reading.kind !== 'valid' || reading.meta.runId === run.meta.runId) return null
    const index = claims.findIndex((c) => c.runId === reading.meta.runId)
    if (index < 0 || (latestIndex >= 0 && index <= latestIndex)) return null
    if (earlierGroup !== undefined && claims[index]!.groupId !== earlierGroup) return null
    earlierGroup = claims[index]!.groupId
  }
  const members = claims.filter((c) => c.groupId === earlierGroup)
  const found: StoredRun[] = []
  for (const member of members) {
    const answer = await from.find({ ...query, runId: member.runId })
    const run = answer.runs.find((r) => r.meta.runId === member.runId)
    if (run === undefined) return null
    found.push(run)
  }
  inReportOrder(found)
  return {
    runs: found,
    note: `the latest run (${runs.map((r) => r.meta.runId).join(', ')}) stopped before its first record (${oneLine(runs[0]!.end?.detail ?? 'an error')}); the file still holds run ${found.map((r) => r.meta.runId).join(', ')}, which is judged`,
  }
}

const pathOrder = new Intl.Collator('en', { numeric: true })

/**
 * The order of a report: by method, then by path, so a group's jobs come in job order (PATH.job2
 * before PATH.job10) whatever order the source answered in. Sorts in place.
 */
export function inReportOrder<T extends { readonly meta: { readonly method: string; readonly path: string } }>(runs: T[]): T[] {
  return runs.sort((a, b) => a.meta.method.localeCompare(b.meta.method) || pathOrder.compare(a.meta.path, b.meta.path))
}
