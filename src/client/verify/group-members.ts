/**
 * Is the group the listener returned the whole group? Judging some of a group's runs while another
 * member's acks are missing (its run directory lost or removed at the listener) would pass a group
 * whose missing member failed. Membership comes from two sources, never from the answer alone:
 *
 * - what the group was planned as: every run written since runs carry it names its group's jobs and
 *   methods (RunMeta.member), at the listener and in its file's superblock; every planned member's
 *   file is at memberPath;
 * - the files on disk: any file at a path the layout can produce (PATH, PATH.method, PATH.jobK,
 *   PATH.method.jobK) whose superblock holds a run of the group.
 *
 * A planned member the listener does not return, or a file holding a run of the group it does not
 * know, is an operating error (exit 3) naming the member. One exception: when every run the listener
 * has ended before its first record because a job of the write could not start (the writer says so:
 * end 'error', "could not start: ..."), no job wrote a record, and a job that never announced its runs
 * is named in a note, not refused. Runs of older writers carry no plan: only the files are looked at.
 */
import { opendirSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { methodNames } from '../../native/methods.js'
import type { StoredRun } from '../../protocol/messages.js'
import { memberPath, type GroupMember, type SuperblockReading } from '../../record/format.js'
import { maxGroupRuns } from '../../record/run-id.js'
import { runtimeError } from '../../base/errors.js'
import { oneLine } from '../../base/printable.js'

type Reading = SuperblockReading | { readonly kind: 'missing' | 'unreadable'; readonly detail: string }
export type SuperblockAt = (path: string) => Reading

/** Directory entries looked at for files of the group: a directory of millions costs a bounded walk. */
const maxDirectoryEntries = 1_000_000
/** Files whose names fit the layout, read for their superblock: far more than any group has. */
const maxCandidateFiles = 4096

/** The group's plan: how many jobs, which methods, and where each member's file is. */
export interface GroupPlan {
  readonly jobs: number
  readonly methods: readonly string[]
}

interface PlannedMember {
  readonly job: number
  readonly method: string
  readonly path: string
}

export function plannedMembers(requestedPath: string, plan: GroupPlan): PlannedMember[] {
  const members: PlannedMember[] = []
  for (let job = 1; job <= plan.jobs; job++) {
    for (const method of plan.methods) members.push({ job, method, path: memberPath(requestedPath, plan.methods, plan.jobs, job, method) })
  }
  return members
}

function describePlan(plan: GroupPlan): string {
  return `${plan.jobs === 1 ? '' : `${plan.jobs} jobs x `}${plan.methods.join(', ')}`
}

function describeMember(m: PlannedMember, plan: GroupPlan): string {
  return `${plan.jobs === 1 ? 'the' : `job ${m.job}'s`} ${m.method} run (${m.path})`
}

/** A run's place as its own metadata says, or (a listener of an earlier version dropped it) as its file's superblock says. */
function memberOf(run: StoredRun, superblockAt: SuperblockAt): GroupMember | undefined {
  if (run.meta.member !== undefined) return run.meta.member
  const reading = superblockAt(run.meta.path)
  return reading.kind === 'valid' && reading.meta.runId === run.meta.runId ? reading.meta.member : undefined
}

/** The plan every run of the group carries; null when none carries one (older writers); exit 3 when they disagree. */
export function groupPlan(runs: readonly StoredRun[], superblockAt: SuperblockAt, source: string): GroupPlan | null {
  let plan: GroupPlan | null = null
  let from = ''
  for (const run of runs) {
    const member = memberOf(run, superblockAt)
    if (member === undefined) continue
    const its: GroupPlan = { jobs: member.jobs, methods: member.methods }
    if (plan === null) {
      plan = its
      from = run.meta.runId
    } else if (describePlan(plan) !== describePlan(its)) {
      throw runtimeError(
        `the runs of group ${run.meta.groupId} at the ${source} disagree on what the group was: run ${from} says ${describePlan(plan)}, run ${run.meta.runId} says ${describePlan(its)}; nothing was judged`,
        "the listener's metadata of one of them is damaged, or the listener answered wrong: restore its directory from a good copy, then verify again",
      )
    }
  }
  return plan
}

/** The group's planned members the runs do not cover. Exit 3 for a run off the plan's layout or two runs in one place. */
export function missingMembers(runs: readonly StoredRun[], plan: GroupPlan, source: string): PlannedMember[] {
  const requestedPath = runs[0]!.meta.requestedPath
  const planned = plannedMembers(requestedPath, plan)
  const byPath = new Map<string, string>()
  for (const run of runs) {
    const at = run.meta.path
    const other = byPath.get(at)
    if (other !== undefined)
      throw runtimeError(
        `the ${source} holds two runs of group ${run.meta.groupId} for ${at}: ${other} and ${run.meta.runId}; nothing was judged`,
      )
    if (!planned.some((m) => m.path === at && m.method === run.meta.method)) {
      throw runtimeError(
        `the ${source} holds run ${run.meta.runId} (${run.meta.method}, ${at}) in group ${run.meta.groupId}, which was planned as ${describePlan(plan)} (${planned.length} runs) with no such run; nothing was judged`,
      )
    }
    byPath.set(at, run.meta.runId)
  }
  return planned.filter((m) => !byPath.has(m.path))
}

/** Every run of the group ended before its first record because a job of the write could not start. */
function startFailed(runs: readonly StoredRun[]): boolean {
  return runs.every((r) => r.spans.length === 0 && r.end?.reason === 'error' && r.end.detail?.startsWith('could not start') === true)
}

/**
 * Paths a file of the group can be at: the plan's, and every name in the directory that the layout
 * can produce for any plan (PATH, PATH.<method>, PATH.job<K>, PATH.<method>.job<K>).
 */
export function candidatePaths(requestedPath: string, plan: GroupPlan | null): string[] {
  const paths = new Set<string>(plan === null ? [] : plannedMembers(requestedPath, plan).map((m) => m.path))
  const base = basename(requestedPath)
  const methods = methodNames.map((m) => m.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|')
  const escapedBase = base.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
  const layout = new RegExp(`^${escapedBase}(\\.(${methods}))?(\\.job[1-9][0-9]?)?$`)
  let dir
  try {
    dir = opendirSync(dirname(requestedPath))
  } catch {
    return [...paths] // an unreadable directory: the plan's paths are still looked at one by one
  }
  try {
    let found = 0
    for (let i = 0; i < maxDirectoryEntries && found < maxCandidateFiles; i++) {
      const entry = dir.readSync()
      if (entry === null) break
      if (!layout.test(entry.name)) continue
      found++
      paths.add(join(dirname(requestedPath), entry.name))
    }
  } catch {
    // a directory that fails mid-walk: what was found is looked at
  } finally {
    dir.closeSync()
  }
  return [...paths]
}

/**
 * Runs of the group that files at the layout's paths hold but the answer left out (a group answered
 * from a list of claims that newer runs have cut short), looked up by id; the runs with them, in no
 * particular order. A run the listener does not have stays missing, for checkGroupMembers to name.
 */
export async function withMembersTheFilesHold(
  runs: readonly StoredRun[],
  superblockAt: SuperblockAt,
  source: string,
  find: (runId: string) => Promise<StoredRun | undefined>,
): Promise<StoredRun[]> {
  const first = runs[0]!.meta
  const found = [...runs]
  const asked = new Set<string>()
  for (const path of candidatePaths(first.requestedPath, groupPlan(runs, superblockAt, source))) {
    const reading = readingAt(superblockAt, path)
    if (reading?.kind !== 'valid' || reading.meta.groupId !== first.groupId || found.some((r) => r.meta.runId === reading.meta.runId))
      continue
    if (asked.has(reading.meta.runId) || asked.size >= maxGroupRuns) continue
    asked.add(reading.meta.runId)
    const run = await find(reading.meta.runId)
    if (
      run !== undefined &&
      run.meta.runId === reading.meta.runId &&
      run.meta.groupId === first.groupId &&
      run.meta.host === first.host &&
      run.meta.requestedPath === first.requestedPath
    )
      found.push(run)
  }
  return found
}

/** The superblock at a candidate path; undefined when it cannot be read (not a regular file, unreadable): not a file of this group. */
function readingAt(superblockAt: SuperblockAt, path: string): Reading | undefined {
  try {
    return superblockAt(path)
  } catch {
    return undefined
  }
}

/**
 * Throws (exit 3) unless the runs are the whole group: every planned member returned, and no file at
 * the layout's paths holding a run of the group that the listener does not know. Returns notes for
 * members excused because their job could not start.
 */
export function checkGroupMembers(runs: readonly StoredRun[], superblockAt: SuperblockAt, source: string): string[] {
  const first = runs[0]!.meta
  const plan = groupPlan(runs, superblockAt, source)
  const known = new Set(runs.map((r) => r.meta.runId))
  for (const path of candidatePaths(first.requestedPath, plan)) {
    const reading = readingAt(superblockAt, path)
    if (reading?.kind !== 'valid' || reading.meta.groupId !== first.groupId || known.has(reading.meta.runId)) continue
    const job = reading.meta.member === undefined || reading.meta.member.jobs === 1 ? '' : `job ${reading.meta.member.job}, `
    throw runtimeError(
      `${path} holds run ${reading.meta.runId} (${job}${reading.meta.method}) of this group, but the ${source} has no acks for it: its run directory is missing; nothing was judged`,
      "verify with a complete copy of the listener directory; judging the other runs alone could hide this one's losses",
    )
  }
  if (plan === null) return []
  const missing = missingMembers(runs, plan, source)
  if (missing.length === 0) return []
  const named = missing.map((m) => describeMember(m, plan))
  if (startFailed(runs)) {
    // The other jobs' runs say which job could not start; the failed job's own runs only why.
    const detail = runs.map((r) => r.end!.detail!).find((d) => /^could not start: job \d+ of \d+ /.test(d)) ?? runs[0]!.end!.detail!
    return [
      `${named.join(', ')} ${missing.length === 1 ? 'is' : 'are'} not at the ${source}: the write stopped before its first record (${oneLine(detail)}), so no job wrote anything`,
    ]
  }
  const total = plan.jobs * plan.methods.length
  // Every other run acknowledged nothing: the write may have been cut while its jobs were starting,
  // before the missing job announced its runs. Nothing proves it, so nothing is judged, but it is said.
  const idle = runs.every((r) => r.spans.length === 0)
  throw runtimeError(
    `the ${source} has ${total - missing.length} of the ${total} runs of this group (${describePlan(plan)}): ${named.join(', ')} ${missing.length === 1 ? 'is' : 'are'} missing; nothing was judged`,
    `its run directory was lost or removed at the listener: restore it, or verify with --acks on a complete copy of the listener's directory; judging the other runs alone could hide its losses${idle ? ' (every other run acknowledged nothing: if the write was cut while its jobs were starting, the missing job never announced its runs, and nothing was written)' : ''}`,
  )
}
