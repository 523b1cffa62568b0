/**
 * Evidence: the data files of a run whose machine may have lost power hold what verify must judge.
 * A new `write` on the same path replaces them, so it first asks the listener about the last run of
 * this host and path, and refuses (exit 2, naming the verify command) when that run may have been
 * cut and was never verified. `--discard-unverified` writes anyway; the agent verifies first.
 *
 * Decision table, over the runs of the latest group for this host and path:
 *   the write has --discard-unverified (or is the agent's, which verified first)   write
 *   no run, or a run of the group is live (its writer is connected: the path is
 *     busy, which the announcement refuses in its own words), unless its writer
 *     was this machine in an earlier boot (a cut leaves its connection open)       write
 *   no run that may hold evidence: one that acknowledged records and vanished
 *     (or never reported an end, or is live from an earlier boot) or ended as
 *     storage-lost                                                                   write
 *   every such run has a verdict at the listener (verify or the agent reported it)  write
 *   otherwise                                                                        refuse (exit 2)
 *
 * The runs asked about are the path's, and the runs the data files on disk hold (read from their
 * superblocks): the same file reached by another spelling of its path (a symlink, a bind mount) holds
 * the same evidence. A long run's spans are left out of the listener's answer: how far its acks go
 * is its ackedThroughSeq.
 *
 * A verdict is what a verifier reported: `verify --server` and the agent report theirs. A run
 * verified offline (`verify --acks`) leaves none, and takes --discard-unverified.
 */
import { hostname } from 'node:os'
import type { Claim, StoredRun } from '../../protocol/messages.js'
import { PlugcheckError, exitCodes, runtimeError, usageError } from '../../base/errors.js'
import { nativePort } from '../../native/index.js'
import { ackedThroughSeqOf } from '../verify/ack-timeline.js'
import { readSuperblock } from '../verify/data-file-read.js'
import { listRuns, queryRuns } from '../verify/listener-client.js'
import type { Endpoint } from '../../protocol/endpoint.js'

export interface EvidenceQuestion {
  readonly server: Endpoint
  readonly token?: string
  /** The path given to --file (absolute). */
  readonly file: string
  /** The data files the write would replace (PATH, PATH.method, PATH.jobK...). */
  readonly dataPaths: readonly string[]
  readonly discardUnverified?: boolean
  readonly listenerTimeoutMs: number
  /** The command to run first, as the write's trail prints it. */
  readonly verifyCommand: string
}

/** Refuses (exit 2) a write that would destroy an unverified run's evidence; resolves when it may go on. */
export async function checkEvidence(q: EvidenceQuestion): Promise<void> {
  if (q.discardUnverified === true) return
  try {
    await askListener(q)
  } catch (error) {
    // The questions are a verifier's; a failure to ask is said with a writer's hint.
    if (error instanceof PlugcheckError && error.exitCode === exitCodes.runtime && error.hint?.includes('--acks') === true) {
      throw runtimeError(error.message, 'start `plugcheck listen` on a machine that keeps power, and check host, port and firewall')
    }
    throw error
  }
}

async function askListener(q: EvidenceQuestion): Promise<void> {
  const host = hostname()
  const { runs, claims } = await queryRuns(q.server, q.token, { host, requestedPath: q.file }, q.listenerTimeoutMs)
  await addRunsOfFiles(q, runs, claims)
  const live = new Set(claims.filter((c) => c.live).map((c) => c.runId))
  const bootId = thisBootId()
  // A live run of this host whose writer had another boot id: the machine was cut and came back, and
  // the listener has not noticed yet (the announcement would take the path over and end the run).
  const cut = (r: StoredRun): boolean => r.meta.host === host && bootId !== null && r.writer?.bootId != null && r.writer.bootId !== bootId
  if (runs.some((r) => live.has(r.meta.runId) && !cut(r))) return
  const evidence = runs.filter(mayHoldEvidence)
  if (evidence.length === 0) return
  // A listener of this version says per run whether it holds a verdict; an older one is asked for its
  // list (its newest runs only: a run beyond it is taken as unverified, and --discard-unverified says otherwise).
  const verified = evidence.every((r) => r.verified !== undefined)
    ? new Set(evidence.filter((r) => r.verified === true).map((r) => r.meta.runId))
    : new Set((await listRuns(q.server, q.token, q.listenerTimeoutMs)).runs.filter((s) => s.verdict !== null).map((s) => s.runId))
  const unverified = evidence.filter((r) => !verified.has(r.meta.runId))
  if (unverified.length === 0) return
  // A run this path's question did not find (another host name, another spelling) is verified by its id.
  const byId = unverified.filter((r) => r.meta.host !== host || r.meta.requestedPath !== q.file).map((r) => `--run ${r.meta.runId}`)
  throw usageError(
    `refusing to write to ${q.file}: its last run ${describeRuns(unverified)} and was never verified; a new write would destroy the evidence`,
    `run ${q.verifyCommand}${byId.length === 0 ? '' : ` ${byId.join(' / ')}`} first, or pass --discard-unverified to write anyway`,
  )
}

/** A run whose files may show a loss: it acknowledged records and its writer vanished (a cut?), never said it ended, or saw the storage lose a record. */
function mayHoldEvidence(run: StoredRun): boolean {
  if (ackedThroughSeqOf(run) === 0) return false
  return run.end === undefined || run.end.reason === 'vanished' || run.end.reason === 'storage-lost'
}

function describeRuns(runs: readonly StoredRun[]): string {
  const acked = runs.reduce((n, r) => n + ackedThroughSeqOf(r), 0)
  const ids = runs.map((r) => `${r.meta.runId} (${r.meta.method})`).join(', ')
  const how = runs.every((r) => r.end?.reason === 'storage-lost')
    ? 'ended because the storage lost a record while it ran'
    : 'vanished without an end (its machine may have lost power)'
  return `(${ids}, ${acked.toLocaleString('en-US')} acknowledged records) ${how}`
}

/**
 * The runs the data files hold that the path's question did not find (the file was written through
 * another spelling of its path): asked for by run id, added to runs and claims.
 */
async function addRunsOfFiles(q: EvidenceQuestion, runs: StoredRun[], claims: Claim[]): Promise<void> {
  const known = new Set(runs.map((r) => r.meta.runId))
  for (const path of q.dataPaths) {
    const superblock = superblockOrNull(path)
    // Whatever host wrote it (this machine under another name, another machine sharing the disk): the file is the evidence.
    if (superblock === null || superblock.kind !== 'valid' || known.has(superblock.meta.runId)) continue
    known.add(superblock.meta.runId)
    const found = await queryRuns(
      q.server,
      q.token,
      { host: superblock.meta.host, requestedPath: superblock.meta.requestedPath, runId: superblock.meta.runId },
      q.listenerTimeoutMs,
    )
    runs.push(...found.runs)
    claims.push(...found.claims)
  }
}

/** What the file holds, or null when it cannot be read (the write then says what is wrong with the path in its own words). */
function superblockOrNull(path: string): ReturnType<typeof readSuperblock> | null {
  try {
    return readSuperblock(path)
  } catch {
    return null
  }
}

function thisBootId(): string | null {
  try {
    return nativePort().bootId()
  } catch {
    return null
  }
}
