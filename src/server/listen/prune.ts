/**
 * Retention: which ended runs may go, and `plugcheck runs --prune --older-than AGE --dir DIR`.
 *
 * A run is pruned only when all of these hold: it ended (a live run, or one whose writer vanished
 * with no end logged, is evidence still to judge), its end is older than the age given, its writer
 * is not connected, and it belongs to no campaign still in progress (a campaign's report reads its
 * runs; a campaign is over when its file says done or stopped; an unreadable file keeps its runs, a
 * campaign tag with no file here keeps none).
 * The store removes each durably (AckStore.prune, store-scrub.ts: a crash mid-prune leaves whole runs or none).
 * Nothing goes on the catalog's word alone (catalog.ts: a cache, and hostile input): every run selected
 * is held against its files first (AckStore.summaryFromFiles) and the selection made again on what
 * they say; a run whose files cannot be read is kept. --dry-run does the same, so it selects what the
 * prune would.
 */
import { readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { PlugcheckError, describeSystemError, exitCodes, runtimeError, usageError } from '../../base/errors.js'
import type { Io } from '../../base/io.js'
import { formatDurationFlag } from '../../base/durations.js'
import { AckStore } from '../../store/ack-store.js'
import type { RunSummary } from '../../protocol/messages.js'
import { campaignFilePath } from '../campaign/campaign-file-io.js'
import { campaignChecksumProblem, campaignFileSchema } from '../../store/campaign-file.js'
import { formatBytes } from './quotas.js'
import { catalogName } from '../../store/catalog.js'

export interface PruneSelection {
  readonly runIds: string[]
  /** runIds by group, each pruned whole (AckStore.prune of one group at a time). */
  readonly groups: string[][]
  readonly bytes: number
  /** Runs old enough but kept, by reason. */
  readonly kept: Kept
}

interface Kept {
  notEnded: number
  live: number
  campaign: number
  /** Ended as vanished (a cut, maybe) with no verdict stored, within unjudgedKeepMs of its end. */
  unjudged: number
  /** Prunable alone, kept with a member of its group that is kept (too recent too). */
  group: number
  /** Its files could not be read back (damaged, its directory gone): a warning names the file. */
  unreadable: number
}

/**
 * A run whose writer vanished (a cut, maybe) and that no verifier judged yet is evidence still to
 * judge: kept this long after its end whatever --older-than or --retain says (the machine cut may be
 * back only after a long weekend).
 */
export const unjudgedKeepMs = 7 * 24 * 3_600_000

/** Campaign phases after which its runs are no longer needed by the campaign itself. */
const finishedPhases: ReadonlySet<string> = new Set(['done', 'stopped'])

type Judged = { prunable: true; bytes: number } | { prunable: false; kept: keyof Kept | null }

/** A run as the selection sees it: its summary, or 'unreadable' (its files could not be read back). */
type View = (run: RunSummary) => RunSummary | 'unreadable'

/**
 * The ended runs older than olderThanMs that may be pruned now, and what was kept. Groups go whole or
 * not at all (verify judges a group's runs together: one member gone and the rest cannot be judged),
 * so a group is pruned only when every member may be.
 */
export function selectPrunable(
  store: AckStore,
  nowMs: number,
  olderThanMs: number,
  isLive: (runId: string) => boolean = () => false,
  view: View = (run) => run,
): PruneSelection {
  const campaignOver = new Map<string, boolean>()
  const over = (name: string): boolean => {
    if (!campaignOver.has(name)) campaignOver.set(name, campaignFinished(store.dir, name))
    return campaignOver.get(name)!
  }
  const groups = new Map<string, Array<{ runId: string; judged: Judged }>>()
  for (const run of store.summaries()) {
    const members = groups.get(run.groupId) ?? []
    const seen = view(run)
    const judged: Judged =
      seen === 'unreadable' ? { prunable: false, kept: 'unreadable' } : judgeRun(store, seen, nowMs, olderThanMs, isLive, over)
    members.push({ runId: run.runId, judged })
    groups.set(run.groupId, members)
  }
  const selection: PruneSelection = {
    runIds: [],
    groups: [],
    bytes: 0,
    kept: { notEnded: 0, live: 0, campaign: 0, unjudged: 0, group: 0, unreadable: 0 },
  }
  let bytes = 0
  for (const members of groups.values()) {
    const whole = members.every((m) => m.judged.prunable)
    for (const { judged } of members) {
      if (!judged.prunable && judged.kept !== null) selection.kept[judged.kept]++
      else if (judged.prunable && !whole) selection.kept.group++
    }
    if (!whole) continue
    selection.groups.push(members.map((m) => m.runId))
    for (const { runId, judged } of members) {
      selection.runIds.push(runId)
      bytes += judged.prunable ? judged.bytes : 0
    }
  }
  return { ...selection, bytes }
}

/**
 * selectPrunable, with every run it selects held against its files first and the selection made again
 * on what they say (a run the catalog shows older, ended, or judged than its files is kept as they
 * say). Each disagreement, and each run whose files cannot be read, is a warning naming it.
 */
export async function selectPrunableChecked(
  store: AckStore,
  nowMs: number,
  olderThanMs: number,
  isLive: (runId: string) => boolean,
  warn: (message: string) => void,
  stopped: () => boolean = () => false,
): Promise<PruneSelection> {
  const first = selectPrunable(store, nowMs, olderThanMs, isLive)
  if (first.runIds.length === 0) return first
  const selected = new Set(first.runIds)
  const fromFiles = new Map<string, RunSummary | 'unreadable'>()
  for (const run of store.summaries()) {
    if (!selected.has(run.runId)) continue
    // A stop (listen --retain's SIGTERM) does not wait for every selected run's files: nothing is pruned.
    if (stopped()) return { ...first, runIds: [], groups: [], bytes: 0 }
    try {
      const files = await store.summaryFromFiles(run.runId)
      const disagreement = judgedFieldsDisagree(run, files)
      if (disagreement !== undefined)
        warn(
          `run ${run.runId}: ${join(store.dir, catalogName)} says ${disagreement.catalog}, where its files say ${disagreement.files}: judged by its files`,
        )
      fromFiles.set(run.runId, files)
    } catch (error) {
      warn(`run ${run.runId}: ${(error as Error).message}; not pruned`)
      fromFiles.set(run.runId, 'unreadable')
    }
  }
  return selectPrunable(store, nowMs, olderThanMs, isLive, (run) => fromFiles.get(run.runId) ?? run)
}

/** What the rules read of a run that the catalog and the files say differently ("ended (duration) at ..."), or undefined. */
function judgedFieldsDisagree(catalog: RunSummary, files: RunSummary): { catalog: string; files: string } | undefined {
  const iso = (ms: number): string => new Date(ms).toISOString()
  const judged = (run: RunSummary): string[] => [
    `group ${run.groupId}`,
    `announced at ${iso(run.announcedMs)}`,
    run.end === undefined ? 'not ended' : `ended (${run.end.reason}) at ${iso(run.end.atMs)}`,
    run.verdict === null ? 'no verdict' : `verdict ${run.verdict.verdict}`,
    `campaign ${run.campaign?.name ?? 'none'}`,
  ]
  const [said, found] = [judged(catalog), judged(files)]
  const differ = said.map((_, i) => i).filter((i) => said[i] !== found[i])
  if (differ.length === 0) return undefined
  return { catalog: differ.map((i) => said[i]).join(', '), files: differ.map((i) => found[i]).join(', ') }
}

/** Whether one run may go now, or why it stays (null: too recent, not counted as kept). */
function judgeRun(
  store: AckStore,
  run: RunSummary,
  nowMs: number,
  olderThanMs: number,
  isLive: (runId: string) => boolean,
  over: (name: string) => boolean,
): Judged {
  if (nowMs - (run.end?.atMs ?? run.announcedMs) < olderThanMs) return { prunable: false, kept: null }
  if (run.end === undefined) return { prunable: false, kept: 'notEnded' }
  if (isLive(run.runId)) return { prunable: false, kept: 'live' }
  if (run.end.reason === 'vanished' && run.verdict === null && nowMs - run.end.atMs < unjudgedKeepMs)
    return { prunable: false, kept: 'unjudged' }
  if (run.campaign !== null && !over(run.campaign.name)) return { prunable: false, kept: 'campaign' }
  const candidate = store.pruneCandidate(run.runId)
  if ('refused' in candidate) return { prunable: false, kept: 'live' }
  return { prunable: true, bytes: candidate.bytes }
}

/**
 * A campaign with no file here is none of this listener's (a tag any writer may send: it must not
 * keep runs for ever); a file that cannot be read keeps its runs.
 */
function campaignFinished(dir: string, name: string): boolean {
  let text: string
  try {
    text = readFileSync(campaignFilePath(dir, name), 'utf8')
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT'
  }
  try {
    const json: unknown = JSON.parse(text)
    const parsed = campaignFileSchema.safeParse(json)
    return campaignChecksumProblem(json) === undefined && parsed.success && finishedPhases.has(parsed.data.phase)
  } catch {
    return false
  }
}

/** "3 not ended, 1 of a campaign in progress" or '' */
export function describeKept(kept: Kept): string {
  const parts = [
    kept.notEnded > 0 ? `${kept.notEnded} not ended` : '',
    kept.live > 0 ? `${kept.live} with a writer still connected or entries being written` : '',
    kept.unjudged > 0 ? `${kept.unjudged} vanished (a cut?) and not judged yet, kept ${unjudgedKeepMs / 86_400_000} days` : '',
    kept.campaign > 0 ? `${kept.campaign} of a campaign in progress` : '',
    kept.group > 0 ? `${kept.group} of a group with a run kept (a group is pruned whole)` : '',
    kept.unreadable > 0 ? `${kept.unreadable} whose files could not be read back (see the warnings)` : '',
  ].filter(Boolean)
  return parts.join(', ')
}

/** "1 run", "2 runs" */
export function runsCount(n: number): string {
  return `${n.toLocaleString('en-US')} ${n === 1 ? 'run' : 'runs'}`
}

export interface PruneOptions {
  readonly dir: string
  readonly olderThanMs: number
  readonly dryRun: boolean
  readonly json: boolean
}

/**
 * `plugcheck runs --prune`: opens the directory as the listener would (its lock), prunes group by
 * group, says what. --dry-run only reads (AckStore.peek, no lock, nothing folded or written), so it
 * works while a listener runs.
 */
export async function runPrune(options: PruneOptions, io: Io): Promise<number> {
  checkListenerDir(options.dir)
  let store: AckStore
  try {
    store = options.dryRun ? await AckStore.peek(options.dir) : await AckStore.open(options.dir)
  } catch (error) {
    if (error instanceof PlugcheckError && error.exitCode === exitCodes.usage && /holds .*'s lock/.test(error.message)) {
      throw usageError(
        `another plugcheck (a listener or a prune) holds ${options.dir}'s lock: runs are pruned with the listener stopped`,
        'stop the listener (or wait for the other prune) and prune again, or let the listener prune as it runs: plugcheck listen --retain AGE; --dry-run works meanwhile',
      )
    }
    throw error
  }
  try {
    for (const warning of store.warnings) io.err(`plugcheck: warning: ${warning}\n`)
    const selection = await selectPrunableChecked(
      store,
      Date.now(),
      options.olderThanMs,
      () => false,
      (warning) => io.err(`plugcheck: warning: ${warning}\n`),
    )
    const failed: string[] = []
    if (!options.dryRun) {
      for (const group of selection.groups) {
        await store.prune(group).catch((error: unknown) => failed.push(`${group.join(', ')}: ${describeSystemError(error)}`))
      }
    }
    report(options, selection, io)
    if (failed.length === 0) return exitCodes.ok
    throw runtimeError(
      `could not prune ${failed.length === 1 ? 'one group' : `${failed.length} groups`} of runs (each kept whole): ${failed.join('; ')}`,
      'fix the cause (permissions, an immutable or busy directory, a failing disk) and prune again',
    )
  } finally {
    await store.close()
  }
}

/** What was (or would be) pruned, on stdout. */
function report(options: PruneOptions, selection: PruneSelection, io: Io): void {
  const age = formatDurationFlag(options.olderThanMs)
  if (options.json) {
    io.out(
      `${JSON.stringify(
        {
          dryRun: options.dryRun,
          olderThan: age,
          pruned: selection.runIds,
          runs: selection.runIds.length,
          bytes: selection.bytes,
          kept: selection.kept,
        },
        null,
        2,
      )}\n`,
    )
    return
  }
  const verb = options.dryRun ? 'would prune' : 'pruned'
  const kept = describeKept(selection.kept)
  io.out(
    `${verb} ${runsCount(selection.runIds.length)} that ended over ${age} ago, ${formatBytes(selection.bytes)}${kept === '' ? '' : ` (kept, though as old: ${kept})`}\n`,
  )
  for (const runId of selection.runIds) io.out(`  ${runId}\n`)
}

/** A listener's directory (runs/ in it) or a usage error naming it: nothing is created anywhere else. */
function checkListenerDir(dir: string): void {
  const kind = (path: string): 'missing' | 'directory' | 'other' => {
    try {
      return statSync(path).isDirectory() ? 'directory' : 'other'
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 'missing'
      throw usageError(
        `could not read ${path}: ${describeSystemError(error)}`,
        'give --dir the directory of a listener (plugcheck listen --dir)',
      )
    }
  }
  const problem =
    { missing: `${dir} does not exist`, other: `${dir} is not a directory`, directory: undefined }[kind(dir)] ??
    (kind(join(dir, 'runs')) === 'directory' ? undefined : `${dir} is not a listener's directory (it has no runs/)`)
  if (problem !== undefined)
    throw usageError(
      `nothing to prune: ${problem}`,
      'give --dir the directory of a listener (plugcheck listen --dir), which holds runs/ and journal/',
    )
}
