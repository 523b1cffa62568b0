/**
 * A run held against its catalog entry (catalog.ts): the entry a run makes, the fields its files are
 * the authority for, and what a run read from its files lacks of what was recorded (damage).
 */
import { join } from 'node:path'
import { runtimeError } from '../base/errors.js'
import { catalogName, type CatalogEntry } from './catalog.js'
import type { RunState } from './run-state.js'

/** What the catalog holds of a run (its writer without the fingerprint, which meta.msgpack keeps). */
export function catalogEntryOf(run: RunState): CatalogEntry {
  const writer = run.origin.writer
  const lastAckMs = run.evicted !== undefined ? run.evicted.lastAckMs : run.spans.lastAckMs
  // Spans as its log replays them (they are made from its logged items); unknown for a catalogued run never read back.
  const spanCount = run.evicted !== undefined ? run.evicted.spanCount : run.spans.length
  return {
    id: run.meta.runId,
    meta: run.meta,
    announcedMs: run.announcedMs,
    ...(run.announceIndex === undefined ? {} : { announceIndex: run.announceIndex }),
    ...(run.origin.peer === undefined ? {} : { peer: run.origin.peer }),
    ...(writer === undefined ? {} : { writer: { bootId: writer.bootId, fingerprint: null } }),
    ...(run.origin.authenticated === undefined ? {} : { authenticated: run.origin.authenticated }),
    ...(run.origin.campaign === undefined ? {} : { campaign: run.origin.campaign }),
    ...(run.end === undefined ? {} : { end: run.end }),
    steadyMs: run.steadyMs,
    lastAckedSeq: run.lastAckedSeq,
    ...(lastAckMs === undefined ? {} : { lastAckMs }),
    ...(spanCount === undefined ? {} : { spanCount }),
    commits: run.commits,
    logBytes: run.logBytes,
    metaBytes: run.metaBytes,
    verdict: run.verdict,
    ...(run.verdictBytes === undefined ? {} : { verdictBytes: run.verdictBytes }),
  }
}

/**
 * What a run's files are the authority for, and its catalog entry holds too: the scrub takes the run
 * from its files on any difference (a catalog holding another end reason, say, would change verify's
 * verdict where `verify --acks` and a restart without the catalog answer what the files hold).
 */
const fromFiles: ReadonlyArray<readonly [what: string, of: (run: RunState) => unknown]> = [
  ['commits', (r) => r.commits],
  ['log bytes', (r) => r.logBytes],
  ['acks', (r) => r.lastAckedSeq],
  ['end', (r) => r.end ?? null],
  ['steady', (r) => r.steadyMs],
  ['announcement order', (r) => r.announceIndex ?? null],
  ['peer', (r) => r.origin.peer ?? null],
  ['authenticated', (r) => r.origin.authenticated ?? null],
  ['campaign', (r) => r.origin.campaign ?? null],
  ["writer's boot id", (r) => r.origin.writer?.bootId ?? null],
]

/** The fields (fromFiles) where the catalogued run differs from its files, each with what the catalog and the files say. */
export function catalogDifferences(run: RunState, copy: RunState): Array<{ what: string; text: string }> {
  const differences: Array<{ what: string; text: string }> = []
  for (const [what, of] of fromFiles) {
    const [recorded, held] = [JSON.stringify(of(run)), JSON.stringify(of(copy))]
    if (recorded !== held) differences.push({ what, text: `${what} (${recorded} in the catalog, ${held} in the files)` })
  }
  return differences
}

/** The fields of fromFiles that takeFromFiles's warning states in full. */
export const countFields = new Set(['commits', 'log bytes', 'acks'])

/** What a run read from its files lacks of what the catalog recorded (undefined: it holds all of it, or more). */
export function lessThanRecorded(
  run: Pick<RunState, 'commits' | 'logBytes' | 'lastAckedSeq' | 'end' | 'steadyMs'>,
  entry: CatalogEntry,
): string | undefined {
  if (
    run.logBytes >= entry.logBytes &&
    run.commits >= entry.commits &&
    run.lastAckedSeq >= entry.lastAckedSeq &&
    (run.end !== undefined || entry.end === undefined) &&
    (run.steadyMs !== null || entry.steadyMs === null)
  ) {
    return undefined
  }
  return (
    `its whole commits end at byte ${run.logBytes} (${run.commits} commits, acks through seq ${run.lastAckedSeq}${run.end === undefined ? ', no end' : ''}), ` +
    `but the listener recorded ${entry.commits} commits in ${entry.logBytes} bytes (acks through seq ${entry.lastAckedSeq}${entry.end === undefined ? '' : ', and its end'}) in its catalog: recorded acks are missing from the log`
  )
}

/** A run the catalog holds whose directory is gone from runs/. */
export function runDirGone(dir: string, entry: CatalogEntry): Error {
  return runtimeError(
    `could not read ${dir}: the run's directory is gone, but the listener recorded ${entry.lastAckedSeq} acknowledged records of it (${entry.logBytes} bytes of log; its catalog, ${join(dir, '..', '..', catalogName)}, holds it)`,
    `a run left out could turn a FAIL into a PASS, so its queries are refused; restore the directory, or, if the run does not matter, stop the listener and delete ${join(dir, '..', '..', catalogName)} too (it is rebuilt from runs/ at the next start)`,
  )
}
