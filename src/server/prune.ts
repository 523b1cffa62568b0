/**
 * Retention: which ended runs may go, and `plugcheck runs --prune --older-than AGE --dir DIR`.
 *
 * A run is pruned only when all of these hold: it ended (a live run, or one whose writer vanished
 * with no end logged, is evidence still to judge), its end is older than the age given, its writer
 * is not connected, and it belongs to no campaign still in progress (a campaign's report reads its
 * runs; a campaign is over when its file says done or stopped; an unreadable file keeps its runs, a
 * campaign tag with no file here keeps none).
 * The store removes each durably (ack-store.ts prune: a crash mid-prune leaves whole runs or none).
 */
import { readFileSync } from 'node:fs'
import { PlugcheckError, exitCodes, usageError } from '../errors.js'
import type { Io } from '../client/writer.js'
import { formatDurationFlag } from '../durations.js'
import { AckStore } from './ack-store.js'
import { campaignFilePath } from './campaign.js'
import { campaignChecksumProblem, campaignFileSchema } from './campaign-file.js'
import { formatBytes } from './quotas.js'

export interface PruneSelection {
  readonly runIds: string[]
  readonly bytes: number
  /** Runs old enough but kept, by reason. */
  readonly kept: { notEnded: number; live: number; campaign: number }
}

/** Campaign phases after which its runs are no longer needed by the campaign itself. */
const finishedPhases: ReadonlySet<string> = new Set(['done', 'stopped'])

/** The ended runs older than olderThanMs that may be pruned now, and what was kept. */
export function selectPrunable(store: AckStore, nowMs: number, olderThanMs: number, isLive: (runId: string) => boolean = () => false): PruneSelection {
  const selection: PruneSelection = { runIds: [], bytes: 0, kept: { notEnded: 0, live: 0, campaign: 0 } }
  const campaignOver = new Map<string, boolean>()
  const over = (name: string): boolean => {
    if (!campaignOver.has(name)) campaignOver.set(name, campaignFinished(store.dir, name))
    return campaignOver.get(name)!
  }
  let bytes = 0
  for (const run of store.summaries()) {
    if (nowMs - (run.end?.atMs ?? run.announcedMs) < olderThanMs) continue
    if (run.end === undefined) selection.kept.notEnded++
    else if (isLive(run.runId)) selection.kept.live++
    else if (run.campaign !== null && !over(run.campaign.name)) selection.kept.campaign++
    else {
      const candidate = store.pruneCandidate(run.runId)
      if ('refused' in candidate) {
        selection.kept.live++
        continue
      }
      selection.runIds.push(run.runId)
      bytes += candidate.bytes
    }
  }
  return { ...selection, bytes }
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

/** "3 runs not ended, 1 of a campaign in progress" or '' */
export function describeKept(kept: PruneSelection['kept']): string {
  const parts = [
    kept.notEnded > 0 ? `${kept.notEnded} not ended` : '',
    kept.live > 0 ? `${kept.live} with a writer still connected or entries being written` : '',
    kept.campaign > 0 ? `${kept.campaign} of a campaign in progress` : '',
  ].filter(Boolean)
  return parts.join(', ')
}

export interface PruneOptions {
  readonly dir: string
  readonly olderThanMs: number
  readonly dryRun: boolean
  readonly json: boolean
}

/** `plugcheck runs --prune`: opens the directory as the listener would (its lock), prunes, says what. */
export async function runPrune(options: PruneOptions, io: Io): Promise<number> {
  let store: AckStore
  try {
    store = await AckStore.open(options.dir)
  } catch (error) {
    if (error instanceof PlugcheckError && error.exitCode === exitCodes.usage && /another listener/.test(error.message)) {
      throw usageError(
        `a listener is running on ${options.dir} (it holds its lock): runs are pruned with the listener stopped`,
        'stop the listener and prune again, or let it prune as it runs: plugcheck listen --retain AGE',
      )
    }
    throw error
  }
  try {
    for (const warning of store.warnings) io.err(`plugcheck: warning: ${warning}\n`)
    const selection = selectPrunable(store, Date.now(), options.olderThanMs)
    if (!options.dryRun) await store.prune(selection.runIds)
    const age = formatDurationFlag(options.olderThanMs)
    if (options.json) {
      io.out(JSON.stringify({ dryRun: options.dryRun, olderThan: age, pruned: selection.runIds, runs: selection.runIds.length, bytes: selection.bytes, kept: selection.kept }, null, 2) + '\n')
    } else {
      const verb = options.dryRun ? 'would prune' : 'pruned'
      const kept = describeKept(selection.kept)
      io.out(`${verb} ${selection.runIds.length} runs that ended over ${age} ago, ${formatBytes(selection.bytes)}${kept === '' ? '' : ` (kept, though as old: ${kept})`}\n`)
      for (const runId of selection.runIds) io.out(`  ${runId}\n`)
    }
    return exitCodes.ok
  } finally {
    await store.close()
  }
}
