/**
 * The checks behind the not-judged rules (not-judged-rules.ts asks them, in its order, from
 * verifyReport): each finds one reason to judge nothing (exit 2), or null. Each says why the storage
 * is not to blame for what it finds.
 */
import type { Claim, StoredRun } from '../../protocol/messages.js'
import type { Superblocks } from './superblocks.js'
import type { NotJudgedFinding } from './verify-report.js'
import { oneLine } from '../../base/printable.js'

/** Compared only when the writer ran on this machine and both boot ids are known. */
export function rebootedSince(run: StoredRun, thisHost: string, thisBootId: string | null): boolean | null {
  const writerBootId = run.writer?.bootId ?? null
  if (writerBootId === null || thisBootId === null || run.meta.host !== thisHost) return null
  return writerBootId !== thisBootId
}

/**
 * Default lookup only (with --run the operator has chosen): more than one writer group is live on
 * this path, or the file's superblock names another run of this path announced from another address
 * than the run the listener calls latest (a shadowing announcement). Either way the storage is not to blame.
 */
export function conflictingClaims(runs: readonly StoredRun[], claims: readonly Claim[], files: Superblocks): NotJudgedFinding | null {
  const liveGroups = new Set(claims.filter((c) => c.live).map((c) => c.groupId))
  if (liveGroups.size > 1) {
    return { reason: 'conflicting-claims', detail: `${liveGroups.size} writers are writing this path right now` }
  }
  // One `write` announces a group's runs on one connection: runs of one group from several addresses
  // (or machines) mean someone joined the group, unless the listener vouches for all of them.
  const peers = new Set(runs.filter((r) => r.authenticated !== true && r.peer !== undefined).map((r) => r.peer))
  const boots = new Set(runs.filter((r) => r.authenticated !== true && r.writer?.bootId != null).map((r) => r.writer!.bootId))
  if (peers.size > 1 || boots.size > 1) {
    return {
      reason: 'conflicting-claims',
      detail: `the runs of group ${runs[0]!.meta.groupId} were announced from ${peers.size > 1 ? `${peers.size} addresses (${[...peers].join(', ')})` : `${boots.size} machines (boot ids differ)`}: one write announces a group from one machine`,
    }
  }
  for (const run of runs) {
    const reading = files.of(run)
    if (reading.kind !== 'valid' || reading.meta.runId === run.meta.runId) continue
    // A run announced with the listener's token cannot be a stranger's: a new address is then just a
    // new address (DHCP after the reboot, a tunnel), and the older run in the file is a lost creation.
    if (run.authenticated === true) continue
    const named = claims.find((c) => c.runId === reading.meta.runId)
    if (named?.peer !== undefined && run.peer !== undefined && named.peer !== run.peer) {
      return {
        reason: 'conflicting-claims',
        detail: `the file holds run ${named.runId}, announced from ${named.peer}, but the latest run, ${run.meta.runId}, was announced from ${run.peer}`,
      }
    }
  }
  return null
}

/**
 * The writer saw one of the group's data files deleted, replaced or truncated by something else during
 * the run and ended it so: what is missing from the file was taken by that, not lost by the storage.
 */
export function fileChangedDuringRun(runs: readonly StoredRun[]): NotJudgedFinding | null {
  const run = runs.find((r) => r.end?.reason === 'file-changed')
  if (run === undefined) return null
  return {
    reason: 'file-changed',
    detail: `run ${run.meta.runId} (${run.meta.method}) ended because ${run.end!.detail === undefined ? 'its data file was changed by something other than plugcheck during the run' : oneLine(run.end!.detail)}`,
  }
}

/**
 * The listener still holds the writer's connection open: the run is being written, and judging a file
 * while records are being copied into it sees half-written records. Judged anyway when this is the
 * writer's machine and its boot id changed (the writer cannot have survived the reboot). Our hello
 * told the listener so, and it ended such runs; it keeps them live only for a machine back at another
 * address without --token, until TCP keepalive finds the old connection dead.
 */
export function stillRunning(
  runs: readonly StoredRun[],
  claims: readonly Claim[],
  thisHost: string,
  thisBootId: string | null,
): NotJudgedFinding | null {
  for (const run of runs) {
    if (!claims.some((c) => c.runId === run.meta.runId && c.live)) continue
    if (rebootedSince(run, thisHost, thisBootId) === true) continue
    return {
      reason: 'still-running',
      detail: `run ${run.meta.runId} (${run.meta.method}) is still being written: the listener holds its writer's connection open`,
    }
  }
  return null
}

/** Claims newer than the run, by the listener's own order (claims are newest first). */
function claimsAfter(run: StoredRun, claims: readonly Claim[]): Claim[] {
  const index = claims.findIndex((c) => c.runId === run.meta.runId)
  const newer = index >= 0 ? claims.slice(0, index) : claims.filter((c) => c.announcedMs > run.announcedMs)
  return newer.filter((c) => c.groupId !== run.meta.groupId)
}

/**
 * The file holds another run that the listener does not list as earlier on this path, created after
 * the judged run by the writer's clock. A cut that loses a new file's creation leaves an older run,
 * never a later one, so the judged run was replaced (by a writer that reported elsewhere, or under
 * another host name or spelling of the path), not lost. A run the listener lists as earlier is a
 * lost creation, and is judged.
 */
export function replacedLater(runs: readonly StoredRun[], claims: readonly Claim[], files: Superblocks): NotJudgedFinding | null {
  for (const run of runs) {
    const reading = files.of(run)
    if (reading.kind !== 'valid' || reading.meta.runId === run.meta.runId) continue
    const other = reading.meta
    const later = claimsAfter(run, claims).some((c) => c.runId === other.runId)
    const listedEarlier = !later && claims.some((c) => c.runId === other.runId)
    if (listedEarlier || (!later && other.createdMs <= run.meta.createdMs)) continue
    const where =
      other.host === run.meta.host && other.requestedPath === run.meta.requestedPath ? '' : ` as ${other.host}:${other.requestedPath}`
    // The file is a member (PATH.fsync, PATH.job1) of a later write to another path: that write is named, not blamed on another listener.
    if (other.path === run.meta.path && other.requestedPath !== run.meta.requestedPath)
      return {
        reason: 'superseded',
        detail: `the file holds run ${other.runId} (${other.method}, created ${new Date(other.createdMs).toISOString()}), a data file of the write to ${other.host}:${other.requestedPath}, written after run ${run.meta.runId}; run ${run.meta.runId} was replaced, not judged`,
        heldBy: { host: other.host, requestedPath: other.requestedPath },
      }
    return {
      reason: 'superseded',
      detail: `the file holds run ${other.runId} (${other.method}${where}, created ${new Date(other.createdMs).toISOString()}), written after run ${run.meta.runId}, which this ${later ? 'listener lists as a later run' : 'listener does not know on this path (another listener, host name or spelling of the path)'}; run ${run.meta.runId} was replaced, not judged`,
    }
  }
  return null
}

/** --run X: a later group claims the path and the file no longer holds X, so X was replaced, not lost. */
export function supersededBy(run: StoredRun, claims: readonly Claim[], files: Superblocks): NotJudgedFinding | null {
  const later = claimsAfter(run, claims)
  if (later.length === 0) return replacedLater([run], claims, files)
  const reading = files.of(run)
  if (reading.kind === 'valid' && reading.meta.runId === run.meta.runId) return null
  const named = reading.kind === 'valid' ? later.find((c) => c.runId === reading.meta.runId) : undefined
  const by = named ?? later.at(-1)!
  return {
    reason: 'superseded',
    detail: `run ${run.meta.runId} was superseded by run ${by.runId} (${by.method}, announced ${new Date(by.announcedMs).toISOString()}) on this path; it was not judged`,
  }
}
