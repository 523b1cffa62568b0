/**
 * `plugcheck verify`: finds the run (the listener is the authority, the superblock only a
 * cross-check), judges every acknowledged record, and reports a verdict in plain words or JSON.
 *
 * Exit 0 pass: every acknowledged record of every tested method survived (and a `none` control, if
 * one ran, lost records). 1 fail: a tested method lost, tore or corrupted an acknowledged record.
 * 4 inconclusive: nothing was acknowledged, or the control lost nothing, so the cut tested nothing.
 * 2 not judged: the run is still being written, the path is claimed by more than one writer (or a
 * group by more than one address), or the run was replaced by a later one. 3: the file system under
 * test is not there, a group member's acks are missing (group-members.ts), the listener's metadata of a
 * run disagrees with its file's superblock (meta-check.ts), or the listener answered nonsense. Verify
 * never blames the storage for what the setup did. The verdict rules are tables (verdict-rules.ts).
 */
import { nativePort } from '../../native/index.js'
import { hostname } from 'node:os'
import { dirname } from 'node:path'
import {
  inlineSpansMax,
  maxSpansPerPage,
  storedVerdictSchema,
  type Claim,
  type StoredRun,
  type StoredVerdict,
} from '../../protocol/messages.js'
import { AckStore } from '../../store/ack-store.js'
import { describeSystemError, runtimeError, usageError, PlugcheckError } from '../../base/errors.js'
import { formatSize } from '../../base/sizes.js'
import { join } from 'node:path'
import { formatEndpoint, type Endpoint } from '../../protocol/endpoint.js'
import { judgeRun, readSuperblock, type RunReport } from './judge.js'
import { listenerNowMs, queryRuns, readSpanPages, reportVerdicts } from './listener-client.js'
import { listenerTimeoutMs } from '../../protocol/endpoint.js'
import { ackedThroughSeqOf, pagedTimeline, spansLeftOut, timelineOfSpans, type AckTimeline, type SpanPageReader } from './ack-timeline.js'
import { checkFileSystemPresent } from './file-checks.js'
import { checkGroupMembers, withMembersTheFilesHold } from './group-members.js'
import { checkMetaAgainstFiles } from './meta-check.js'
import { groupVerdict, judgeMethods, methodLabel, verdictExitCodes, type MethodJudgement, type RunVerdict } from './verdict-rules.js'
import { firstNotJudged, notJudgedExitCode, type NotJudgedCheck } from './not-judged-rules.js'
import { writerEnvironment } from '../environment.js'
import type { Io } from '../../base/io.js'

export interface VerifyOptions {
  readonly source: { readonly server: Endpoint } | { readonly acksDir: string }
  /** Absolute path, as given to write --file. */
  readonly file: string
  readonly runId?: string
  readonly token?: string
  readonly json: boolean
  /** Host name the run was written from; defaults to this machine's. */
  readonly host?: string
  /** Bound on connecting to the listener and waiting for its answer (--listener-timeout). */
  readonly listenerTimeoutMs?: number
}

export interface VerifyReport {
  readonly verdict: RunVerdict
  readonly host: string
  readonly file: string
  readonly source: string
  /** Every run on record for this host and path, newest first (live: its writer is connected now). */
  readonly claims: readonly Claim[]
  /** Which run was judged and why, when it is not simply the latest. */
  readonly notes: readonly string[]
  readonly runs: readonly RunReport[]
}

/** Why nothing was judged (exit 2): the path has competing claims, or the run asked for was replaced. */
export interface NotJudgedReport {
  readonly verdict: 'not-judged'
  readonly reason: 'conflicting-claims' | 'superseded' | 'still-running' | 'file-changed'
  readonly detail: string
  readonly host: string
  readonly file: string
  readonly source: string
  readonly claims: readonly Claim[]
  readonly runs: readonly []
  /** The runs of the group that was not judged (not printed): each gets a 'not-judged' stored verdict. */
  readonly groupRunIds?: readonly string[]
}

/** What one not-judged check found (not-judged-rules.ts decides which checks are asked, in what order). */
type NotJudgedFinding = Pick<NotJudgedReport, 'reason' | 'detail'>

const shownRangesLimit = 10

/** What each data file's superblock says, read once per verify however many checks ask. */
class Superblocks {
  private readonly readings = new Map<string, ReturnType<typeof readSuperblock>>()
  of(run: StoredRun): ReturnType<typeof readSuperblock> {
    return this.at(run.meta.path)
  }
  readonly at = (path: string): ReturnType<typeof readSuperblock> => {
    let reading = this.readings.get(path)
    if (reading === undefined) {
      reading = readSuperblock(path)
      this.readings.set(path, reading)
    }
    return reading
  }
}

/** Where runs come from: the listener over TCP, or a copy of its directory read offline. */
interface RunSource {
  readonly name: string
  /** The listener's file holding a run's metadata, when verify reads its directory itself. */
  readonly metaFileOf?: (runId: string) => string
  find(query: { host: string; requestedPath: string; runId?: string }): Promise<{ runs: StoredRun[]; claims: Claim[] }>
  /** A found run's acks: its spans as found, or read page by page when they were left out (a long run). */
  acks(run: StoredRun): AckTimeline
}

async function openSource(options: VerifyOptions, io: Pick<Io, 'err'>): Promise<RunSource> {
  if ('server' in options.source) {
    const server = options.source.server
    const timeoutMs = options.listenerTimeoutMs ?? listenerTimeoutMs
    return {
      name: `listener ${formatEndpoint(server)}`,
      find: (query) => queryRuns(server, options.token, query, timeoutMs),
      acks: (run) =>
        timelineOf(run, (afterSeq, onPage) =>
          readSpanPages(server, options.token, timeoutMs, { runId: run.meta.runId, afterSeq, throughSeq: ackedThroughSeqOf(run) }, onPage),
        ),
    }
  }
  const acksDir = options.source.acksDir
  let store: AckStore
  try {
    store = await AckStore.load(acksDir)
  } catch (error) {
    if (error instanceof PlugcheckError) throw error // a run's files exist but cannot be read: exit 3, naming the file
    throw usageError(
      `could not read the ack directory ${acksDir}: ${describeSystemError(error)}`,
      'give --acks the --dir of a plugcheck listener',
    )
  }
  for (const warning of store.warnings) io.err(`plugcheck: ${warning}\n`)
  return {
    name: `ack directory ${acksDir}`,
    metaFileOf: (runId) => join(acksDir, 'runs', runId, 'meta.msgpack'),
    // As the listener answers: a long run's spans stay in the store's table, read a page at a time.
    find: async (query) => ({
      runs: store.query(query.host, query.requestedPath, query.runId, { inlineSpansMax }),
      claims: store.claims(query.host, query.requestedPath),
    }),
    acks: (run) =>
      timelineOf(run, async (startAfterSeq, onPage) => {
        const throughSeq = ackedThroughSeqOf(run)
        for (let afterSeq: number | null = startAfterSeq; afterSeq !== null && afterSeq < throughSeq; ) {
          const page = store.spanPage(run.meta.runId, afterSeq, throughSeq, maxSpansPerPage)
          if (page === undefined)
            throw runtimeError(`the ack directory ${acksDir} no longer holds the acks of run ${run.meta.runId} through seq ${throughSeq}`)
          try {
            afterSeq = onPage(page, afterSeq)
          } catch (error) {
            throw runtimeError(`the ack directory ${acksDir} holds bad spans of run ${run.meta.runId}: ${(error as Error).message}`)
          }
        }
      }),
  }
}

/** The run's spans as given, or a reader of its pages when they were left out. */
function timelineOf(run: StoredRun, read: SpanPageReader): AckTimeline {
  return spansLeftOut(run) ? pagedTimeline(run, read) : timelineOfSpans(run.meta.runId, run.spans)
}

/** What verify found: the report it prints and the exit code it returns. */
export interface VerifyOutcome {
  readonly report: VerifyReport | NotJudgedReport
  readonly exitCode: number
}

export async function runVerify(options: VerifyOptions, io: Io): Promise<number> {
  const outcome = await verifyReport(options, io)
  io.out(printedReport(outcome.report, options.json))
  if ('server' in options.source) await storeFound(outcome.report, options.source.server, options, io)
  return outcome.exitCode
}

/**
 * What verify found is stored at the listener, as the agent stores it (the same rule): `runs` and the
 * report show it, and a later `write` on the path knows the run was verified (evidence.ts). Not when
 * nothing was judged because the run is still being written. A listener that does not take it
 * (another address without --token, a run it still holds open) costs a warning, never the verdict.
 */
async function storeFound(
  report: VerifyReport | NotJudgedReport,
  server: Endpoint,
  options: VerifyOptions,
  io: Pick<Io, 'err'>,
): Promise<void> {
  const live = new Set(report.claims.filter((c) => c.live).map((c) => c.runId))
  if (report.verdict === 'not-judged' && (report.reason === 'still-running' || (report.groupRunIds ?? []).some((id) => live.has(id))))
    return
  const machine = writerEnvironment(dirname(options.file))
  try {
    await reportVerdicts(
      server,
      options.token,
      options.listenerTimeoutMs ?? listenerTimeoutMs,
      storedVerdicts(report, machine.bootId, machine.fingerprint),
    )
  } catch (error) {
    const why = error instanceof PlugcheckError ? error.message : String(error)
    io.err(
      `plugcheck: warning: the verdict was not stored at the listener: ${why}\nhint: a later write on this path asks for --discard-unverified (or run verify from the machine that wrote, or give the listener a --token)\n`,
    )
  }
}

/** The report as verify prints it, in words or as JSON. */
export function printedReport(report: VerifyReport | NotJudgedReport, json: boolean): string {
  if (report.verdict !== 'not-judged') return json ? JSON.stringify(report, null, 2) + '\n' : renderReport(report)
  // groupRunIds is for storedVerdicts; the printed report names the runs in its detail and claims.
  const { groupRunIds: _groupRunIds, ...printed } = report
  return json ? JSON.stringify(printed, null, 2) + '\n' : renderNotJudged(report)
}

/**
 * Finds the run and judges it, as `verify` does, without printing the report. Operating errors
 * (no run found, the file system under test missing, a listener answering nonsense) are thrown; the
 * warnings of an offline ack directory go to io.err.
 */
export async function verifyReport(options: VerifyOptions, io: Pick<Io, 'err'> = { err: () => undefined }): Promise<VerifyOutcome> {
  const host = options.host ?? hostname()
  const query = { host, requestedPath: options.file, ...(options.runId === undefined ? {} : { runId: options.runId }) }
  const from = await openSource(options, io)
  const source = from.name
  let { runs, claims } = await from.find(query)
  runs = inReportOrder(runs)
  if (runs.length === 0) {
    throw usageError(
      options.runId === undefined
        ? `no run found for ${options.file} written from host ${host} (${source})`
        : `no run ${options.runId} at the ${source}`,
      'check --file (the path given to write) and --server/--acks, or pick a run with --run',
    )
  }
  if (options.runId !== undefined) {
    const run = runs[0]!
    if (runs.length !== 1 || run.meta.runId !== options.runId)
      throw runtimeError(`the ${source} answered a query for run ${options.runId} with other runs`)
    if (run.meta.path !== options.file && run.meta.requestedPath !== options.file)
      throw usageError(`run ${options.runId} wrote ${run.meta.requestedPath}, not ${options.file}`)
  } else {
    const stray = runs.find(
      (r) => r.meta.host !== host || r.meta.requestedPath !== options.file || r.meta.groupId !== runs[0]!.meta.groupId,
    )
    if (stray !== undefined)
      throw runtimeError(
        `the ${source} sent run ${stray.meta.runId} (${stray.meta.host}:${stray.meta.requestedPath}), which is not the latest run for ${host}:${options.file}`,
      )
  }

  const files = new Superblocks()
  claims = await withRunsTheFilesHold(runs, claims, from, query, files)
  const thisBootId = readBootId()
  const thisHost = hostname()
  const notes: string[] = []
  if (options.runId === undefined) {
    const earlier = await runsTheFileStillHolds(runs, claims, from, query, files)
    if (earlier !== null) {
      notes.push(earlier.note)
      runs = earlier.runs
    }
    const find = async (runId: string): Promise<StoredRun | undefined> =>
      (await from.find({ ...query, runId })).runs.find((r) => r.meta.runId === runId)
    runs = inReportOrder(await withMembersTheFilesHold(runs, files.at, source, find))
  }
  const checks: Record<NotJudgedCheck, () => NotJudgedFinding | null> = {
    'file-changed': () => fileChangedDuringRun(runs),
    'conflicting-claims': () => conflictingClaims(runs, claims, files),
    'still-running': () => stillRunning(runs, claims, thisHost, thisBootId),
    'replaced-later': () => replacedLater(runs, claims, files),
    'superseded-by': () => supersededBy(runs[0]!, claims, files),
  }
  const notJudged = firstNotJudged(options.runId === undefined ? 'latest' : 'chosen', (check) => checks[check]())
  if (notJudged !== null) {
    const report: NotJudgedReport = {
      verdict: 'not-judged',
      ...notJudged,
      host,
      file: options.file,
      source,
      claims,
      runs: [],
      groupRunIds: runs.map((r) => r.meta.runId),
    }
    return { report, exitCode: notJudgedExitCode }
  }
  checkMetaAgainstFiles(runs, files.at, source, from.metaFileOf)
  for (const run of runs) checkFileSystemPresent(run)
  // With --run the operator asked for one run, judged alone; the latest group is judged whole or not at all.
  if (options.runId === undefined) notes.push(...checkGroupMembers(runs, files.at, source))

  const reports: RunReport[] = []
  // One file at a time: each judge streams its file with a fixed set of buffers.
  for (const run of runs)
    reports.push(await judgeRun(run, { rebootedSinceWrite: rebootedSince(run, thisHost, thisBootId), acks: from.acks(run) }))
  notes.push(...methodCaveats(runs), ...storageLostNotes(runs))
  const report: VerifyReport = { verdict: groupVerdict(reports), host, file: options.file, source, claims, notes, runs: reports }
  return { report, exitCode: verdictExitCodes[report.verdict] }
}

/** At most this many seq ranges go with a stored verdict (storedVerdictSchema). */
const storedRangesMax = 100

/**
 * The verdicts to report to the listener, one per run: what verify found for each run it judged, or
 * 'not-judged' with zero counts and the reason for every run of the group it did not judge. bootId and
 * fingerprint describe this machine as verify found it; atMs is the listener's time when a welcome gave
 * it (this machine's clock may be anywhere after a cut: at 1970 the listener would refuse the verdict).
 */
export function storedVerdicts(
  report: VerifyReport | NotJudgedReport,
  bootId: string | null,
  fingerprint: StoredVerdict['fingerprint'],
  atMs = listenerNowMs() ?? Date.now(),
): { runId: string; result: StoredVerdict }[] {
  const machine = { bootId: storedVerdictSchema.shape.bootId.safeParse(bootId).success ? bootId : null, fingerprint, atMs }
  if (report.verdict === 'not-judged') {
    const summary = `NOT JUDGED: ${report.detail}.`.slice(0, 4096)
    return (report.groupRunIds ?? []).map((runId) => ({
      runId,
      result: {
        verdict: 'not-judged',
        acked: 0,
        intact: 0,
        lost: 0,
        torn: 0,
        corrupt: 0,
        lossWindowMs: null,
        reordered: false,
        lostRanges: [],
        rebootedSinceWrite: null,
        summary,
        ...machine,
      },
    }))
  }
  const methods = judgeMethods(report.runs)
  return report.runs.map((r) => ({
    runId: r.runId,
    result: {
      verdict: r.verdict,
      acked: r.acked,
      intact: r.intact,
      lost: r.lost,
      torn: r.torn,
      corrupt: r.corrupt,
      superseded: r.superseded,
      interrupted: r.interrupted,
      superblockValid: r.superblock.kind === 'valid',
      lossWindowMs: widestLossWindowMs(r),
      reordered: r.reordering !== null,
      lostRanges: badSeqRanges(r).slice(0, storedRangesMax),
      rebootedSinceWrite: r.rebootedSinceWrite,
      summary: (
        renderRun(
          r,
          true,
          methods.find((m) => m.runs.includes(r)),
        )[0] ?? ''
      ).slice(0, 4096),
      ...machine,
    },
  }))
}

/** The widest acknowledgement window of a lost range, in ms; null when nothing was lost (or no time is known). */
function widestLossWindowMs(r: RunReport): number | null {
  let widest: number | null = null
  for (const range of r.lostRanges) {
    if (!Number.isFinite(range.ackedFromMs) || !Number.isFinite(range.ackedToMs)) continue
    widest = Math.max(widest ?? 0, range.ackedToMs - range.ackedFromMs)
  }
  return widest
}

/** Lost ranges, torn and corrupt records as seq ranges, in seq order, touching ones merged. */
function badSeqRanges(r: RunReport): [number, number][] {
  const ranges: [number, number][] = [
    ...r.lostRanges.map((x): [number, number] => [x.fromSeq, x.toSeq]),
    ...r.tornRecords.map((x): [number, number] => [x.seq, x.seq]),
    ...r.corruptRecords.map((x): [number, number] => [x.seq, x.seq]),
  ].sort((a, b) => a[0] - b[0])
  const merged: [number, number][] = []
  for (const range of ranges) {
    const last = merged.at(-1)
    if (last !== undefined && range[0] <= last[1] + 1) last[1] = Math.max(last[1], range[1])
    else merged.push([range[0], range[1]])
  }
  return merged
}

/**
 * Claims hold the newest runs on the path only: a flood of announcements can push out the run a file
 * still holds. Such a run is looked up by id and added at the end (it is older than every listed one),
 * so the address checks below see it.
 */
async function withRunsTheFilesHold(
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
async function runsTheFileStillHolds(
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
    note: `the latest run (${runs.map((r) => r.meta.runId).join(', ')}) stopped before its first record (${runs[0]!.end?.detail ?? 'an error'}); the file still holds run ${found.map((r) => r.meta.runId).join(', ')}, which is judged`,
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

/**
 * What a tested method promises on the platform its writer ran on, when that is less than its name
 * says (macOS fsync does not flush the drive's cache): a pass of such a method is read with it.
 */
function methodCaveats(runs: readonly StoredRun[]): string[] {
  let table
  try {
    table = nativePort().table()
  } catch {
    return []
  }
  const caveats = new Set<string>()
  for (const run of runs) {
    if (run.meta.method === 'none' || run.writer?.fingerprint?.os.platform !== table.platform) continue
    const caveat = table.methods.find((m) => m.name === run.meta.method)?.caveat
    if (caveat !== undefined) caveats.add(`${run.meta.method} on ${table.name}: ${caveat}`)
  }
  return [...caveats]
}

function readBootId(): string | null {
  try {
    return nativePort().bootId()
  } catch {
    return null
  }
}

/** Compared only when the writer ran on this machine and both boot ids are known. */
function rebootedSince(run: StoredRun, thisHost: string, thisBootId: string | null): boolean | null {
  const writerBootId = run.writer?.bootId ?? null
  if (writerBootId === null || thisBootId === null || run.meta.host !== thisHost) return null
  return writerBootId !== thisBootId
}

/**
 * Default lookup only (with --run the operator has chosen): more than one writer group is live on
 * this path, or the file's superblock names another run of this path announced from another address
 * than the run the listener calls latest (a shadowing announcement). Either way the storage is not to blame.
 */
function conflictingClaims(runs: readonly StoredRun[], claims: readonly Claim[], files: Superblocks): NotJudgedFinding | null {
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
function fileChangedDuringRun(runs: readonly StoredRun[]): NotJudgedFinding | null {
  const run = runs.find((r) => r.end?.reason === 'file-changed')
  if (run === undefined) return null
  return {
    reason: 'file-changed',
    detail: `run ${run.meta.runId} (${run.meta.method}) ended because ${run.end!.detail ?? 'its data file was changed by something other than plugcheck during the run'}`,
  }
}

/**
 * The writer stopped the run because a record of its own file read back wrong while it was going
 * (end 'storage-lost'): said beside the verdict, which the bytes as they are now decide. Once per
 * distinct detail (every run of a write ends with the same words).
 */
function storageLostNotes(runs: readonly StoredRun[]): string[] {
  const details = new Set(
    runs.filter((r) => r.end?.reason === 'storage-lost').map((r) => r.end!.detail ?? 'an acknowledged record read back wrong'),
  )
  return [...details].map((detail) => `the writer stopped during the run: ${detail.replace(/\.$/, '')}`)
}

/**
 * The listener still holds the writer's connection open: the run is being written, and judging a file
 * while records are being copied into it sees half-written records. Judged anyway when this is the
 * writer's machine and its boot id changed (the writer cannot have survived the reboot). Our hello
 * told the listener so, and it ended such runs; it keeps them live only for a machine back at another
 * address without --token, until TCP keepalive finds the old connection dead.
 */
function stillRunning(
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
function replacedLater(runs: readonly StoredRun[], claims: readonly Claim[], files: Superblocks): NotJudgedFinding | null {
  for (const run of runs) {
    const reading = files.of(run)
    if (reading.kind !== 'valid' || reading.meta.runId === run.meta.runId) continue
    const other = reading.meta
    const later = claimsAfter(run, claims).some((c) => c.runId === other.runId)
    const listedEarlier = !later && claims.some((c) => c.runId === other.runId)
    if (listedEarlier || (!later && other.createdMs <= run.meta.createdMs)) continue
    const where =
      other.host === run.meta.host && other.requestedPath === run.meta.requestedPath ? '' : ` as ${other.host}:${other.requestedPath}`
    return {
      reason: 'superseded',
      detail: `the file holds run ${other.runId} (${other.method}${where}, created ${new Date(other.createdMs).toISOString()}), written after run ${run.meta.runId}, which this ${later ? 'listener lists as a later run' : 'listener does not know on this path (another listener, host name or spelling of the path)'}; run ${run.meta.runId} was replaced, not judged`,
    }
  }
  return null
}

/** --run X: a later group claims the path and the file no longer holds X, so X was replaced, not lost. */
function supersededBy(run: StoredRun, claims: readonly Claim[], files: Superblocks): NotJudgedFinding | null {
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

function describeClaim(c: Claim): string {
  const state = c.live ? 'live' : c.end === undefined ? 'ended (no end reported)' : `ended (${c.end.reason})`
  return `run ${c.runId} (${c.method}) from ${c.peer ?? 'an unknown address'}, announced ${new Date(c.announcedMs).toISOString()}, ${state}, acked through seq ${c.ackedThroughSeq}`
}

export function renderNotJudged(report: NotJudgedReport): string {
  const lines = [`NOT JUDGED: ${report.detail}.`]
  if (report.reason === 'conflicting-claims') {
    lines.push(`These runs claim ${report.host}:${report.file}:`)
    for (const c of report.claims) lines.push(`  ${describeClaim(c)}`)
    lines.push('hint: pick one with --run RUNID; run the listener with --token so that only your writers can announce runs')
  } else if (report.reason === 'still-running') {
    lines.push(
      'hint: verify after the power cut and reboot; if the machine was already cut, the listener notices the lost connection within minutes (TCP keepalive), or verify on the rebooted machine itself',
    )
  } else if (report.reason === 'file-changed') {
    lines.push('hint: nothing here says anything about the storage; start a new run and leave its data files alone until verify')
  } else {
    lines.push('hint: verify the latest run (leave out --run), or this run only if its file still holds it')
  }
  return lines.join('\n') + '\n'
}

export function renderReport(report: VerifyReport): string {
  const lines: string[] = []
  const methods = judgeMethods(report.runs)
  if (report.runs.length > 1) lines.push(headline(report, methods))
  for (const r of report.runs)
    lines.push(
      ...renderRun(
        r,
        report.runs.length === 1,
        methods.find((m) => m.runs.includes(r)),
      ),
    )
  for (const note of report.notes) lines.push(`note: ${note}.`)
  if (report.runs.some((r) => r.rebootedSinceWrite === false)) {
    lines.push(
      'No reboot happened since the write: this machine still has the boot id the writer reported, so the page cache still holds every write and a pass proves nothing about power loss. Cut the power, reboot, then verify.',
    )
  }
  return lines.join('\n') + '\n'
}

/** Why a method judged over its jobs tested nothing, by its role and what its runs showed together. */
const inconclusiveWhy: Readonly<
  Record<MethodJudgement<RunReport>['role'], Partial<Record<MethodJudgement<RunReport>['finding'], (label: string) => string>>>
> = {
  tested: { idle: (label) => `${label} acknowledged nothing` },
  control: {
    kept: () => 'the control (none) lost nothing, so the cut tested nothing',
    'lost-running': () =>
      'the control (none) lost records while the run was going, with no cut (the writer saw it and stopped), so no cut was tested',
    idle: () => 'the control (none) acknowledged nothing, so the cut tested nothing',
  },
}

/** A group's first line: its verdict in words, the methods that decided it named. */
function headline(report: VerifyReport, methods: readonly MethodJudgement<RunReport>[]): string {
  const tested = report.runs.filter((r) => r.role === 'tested')
  const controls = report.runs.filter((r) => r.role === 'control')
  if (report.verdict === 'fail') {
    const failed = tested.filter((r) => r.verdict === 'fail')
    const parts =
      failed.length > 0
        ? [`${runsLabel(failed, tested)} lost acknowledged data (${failed.length} of ${tested.length} tested ${runsWord(tested)})`]
        : []
    if (controls.some((r) => r.verdict === 'fail'))
      parts.push("the control's (none) file, created and fsynced before any record, is gone or replaced")
    return `FAIL: ${parts.join('; ')}.`
  }
  if (report.verdict === 'inconclusive') {
    const why = methods.filter((m) => m.verdict === 'inconclusive').map((m) => inconclusiveWhy[m.role][m.finding]!(m.label))
    return `INCONCLUSIVE: ${why.join('; ')}.`
  }
  // Jobs that acknowledged nothing beside jobs of their method that did: excused, and named.
  const idle = methods.filter((m) => m.finding !== 'idle').flatMap((m) => m.runs.filter((r) => r.acked === 0))
  const idleNote = idle.length === 0 ? '' : `; ${runsLabel(idle, report.runs)} acknowledged nothing`
  const passed = tested.filter((r) => r.verdict === 'pass')
  if (tested.length === 0) return `PASS: the control (none) lost records: the cut was real${idleNote}.`
  return controls.length > 0
    ? `PASS: every acknowledged record of ${passed.length === 1 ? 'the tested method' : `all ${passed.length} tested ${runsWord(passed)}`} survived, and the control lost records: the cut was real${idleNote}.`
    : `PASS: every acknowledged record of all ${passed.length} ${runsWord(passed)} survived${idleNote}.`
}

/** 'methods', or 'runs' when one method ran several times (write --jobs N: one run per job). */
function runsWord(runs: readonly RunReport[]): string {
  return new Set(runs.map(methodLabel)).size === runs.length ? 'methods' : 'runs'
}

/**
 * Some of a group's runs, for a headline: each method once; when only some of a method's runs
 * (jobs) are meant, which ones: `fdatasync (job 4 of 4)`, `fdatasync (jobs 1, 3 of 4)`, or by run
 * id when the paths do not say the job.
 */
function runsLabel(some: readonly RunReport[], all: readonly RunReport[]): string {
  const labels = [...new Set(some.map(methodLabel))]
  return labels
    .map((label) => {
      const meant = some.filter((r) => methodLabel(r) === label)
      const of = all.filter((r) => methodLabel(r) === label).length
      if (meant.length === of) return label
      const jobs = meant.map((r) => /\.job(\d+)$/.exec(r.path)?.[1])
      if (jobs.every((k) => k !== undefined)) return `${label} (job${jobs.length > 1 ? 's' : ''} ${jobs.join(', ')} of ${of})`
      return `${label} (run${meant.length > 1 ? 's' : ''} ${meant.map((r) => r.runId).join(', ')})`
    })
    .join(', ')
}

const verdictWord = { pass: 'PASS', fail: 'FAIL', inconclusive: 'INCONCLUSIVE' } as const

/**
 * A run's lines. method: its method judged over the group's jobs, when another job decided it (this
 * job acknowledged nothing, or its control lost nothing while another job's did).
 */
function renderRun(r: RunReport, headline: boolean, method?: MethodJudgement<RunReport>): string[] {
  const n = (x: number): string => x.toLocaleString('en-US')
  const what = `run ${r.runId} (${methodLabel(r)}, ${r.pattern}, ${formatSize(r.recordSize)} records, ${r.path})`
  const bad = r.lost + r.torn + r.corrupt
  const judged = r.acked - r.superseded
  const lines: string[] = []
  const prefix = headline ? '' : '  '
  const lead = headline ? `${verdictWord[r.verdict]}: ` : prefix
  const superblockBad = r.superblock.kind !== 'valid' && r.acked > 0
  // The method's verdict came from another job: this run's own finding (nothing acked, or a control that lost nothing) did not decide it.
  const otherJobDecided = method !== undefined && method.runs.length > 1 && method.verdict !== r.verdict
  if (r.role === 'control') {
    lines.push(
      r.verdict === 'fail'
        ? `${lead}control (none): its file, created and fsynced before any record, is gone or holds another run: the storage lost a synced file creation, and the control cannot show whether the cut was real (${what}).`
        : bad > 0 && r.ended === 'storage-lost'
          ? `${lead}control (none): ${n(bad)} of ${n(judged)} unsynced records lost while the run was going, before any cut (the writer saw it): they show no cut (${what}).`
          : bad > 0
            ? `${lead}control (none): ${n(bad)} of ${n(judged)} unsynced records lost: the cut was real (${what}).`
            : otherJobDecided
              ? r.acked === 0
                ? `${lead}control (none): this job acknowledged nothing; the control is judged on its other jobs (${what}).`
                : `${lead}control (none): all ${n(judged)} unsynced records of this job survived; ${method.verdict === 'pass' ? "another job's control lost records, so the cut was real" : 'the control is judged on its other jobs'} (${what}).`
              : r.acked === 0
                ? `${lead}control (none): nothing was written, so it lost nothing: the cut tested nothing (${what}).`
                : `${lead}control (none): all ${n(judged)} unsynced records survived, it lost nothing: the cut tested nothing (${what}).`,
    )
    if (superblockBad) lines.push(`${prefix}superblock: ${r.superblock.detail}`)
    return lines
  }
  if (r.verdict === 'inconclusive' && otherJobDecided) {
    lines.push(`${lead}${what}: this job acknowledged nothing; the method is judged on its other jobs.`)
  } else if (r.verdict === 'inconclusive') {
    lines.push(`${lead}${what}: nothing was acknowledged, so the cut tested nothing.`)
  } else if (r.verdict === 'pass') {
    lines.push(
      r.interrupted === 0
        ? `${lead}all ${n(judged)} acknowledged records of ${what} survived intact.`
        : `${lead}every acknowledged record of ${what} survived: ${n(r.intact)} intact, ${n(r.interrupted)} interrupted newer overwrites.`,
    )
  } else if (bad === 0) {
    lines.push(`${lead}the superblock of ${what} did not survive: ${r.superblock.detail}.`)
    lines.push(
      `${prefix}Its ${n(judged)} acknowledged records are ${r.interrupted === 0 ? 'intact' : `${n(r.intact)} intact, ${n(r.interrupted)} interrupted newer overwrites`}; the superblock was synced before the first record.`,
    )
  } else {
    lines.push(
      `${lead}${n(bad)} of ${n(judged)} acknowledged records of ${what} did not survive: ${n(r.lost)} lost, ${n(r.torn)} torn, ${n(r.corrupt)} corrupt.`,
    )
    lines.push(`${prefix}The storage stack reported these writes durable (${r.method} returned success) and then did not keep them.`)
    if (superblockBad) lines.push(`${prefix}superblock: ${r.superblock.detail}`)
  }
  if (r.superseded > 0)
    lines.push(
      `${prefix}${n(r.superseded)} acknowledged records were later overwritten by newer acknowledged ones (superseded, not judged).`,
    )
  for (const range of r.lostRanges.slice(0, shownRangesLimit)) {
    const seqs = range.count === 1 ? `seq ${range.fromSeq}` : `seqs ${range.fromSeq}-${range.toSeq} (${n(range.count)})`
    lines.push(`${prefix}lost ${seqs}: ${range.reason}; acknowledged ${timeWindow(range.ackedFromMs, range.ackedToMs)}`)
  }
  if (r.lostRangeCount > shownRangesLimit)
    lines.push(
      `${prefix}... and ${n(r.lostRangeCount - shownRangesLimit)} more lost ranges (--json lists the first ${r.lostRanges.length})`,
    )
  for (const t of r.tornRecords.slice(0, shownRangesLimit)) lines.push(`${prefix}torn seq ${t.seq} at offset ${t.offsetBytes}: ${t.detail}`)
  if (r.torn > shownRangesLimit) lines.push(`${prefix}... and ${n(r.torn - shownRangesLimit)} more torn records`)
  for (const c of r.corruptRecords.slice(0, shownRangesLimit))
    lines.push(`${prefix}corrupt seq ${c.seq} at offset ${c.offsetBytes}, ${c.lengthBytes} bytes: ${c.detail}`)
  if (r.corrupt > shownRangesLimit) lines.push(`${prefix}... and ${n(r.corrupt - shownRangesLimit)} more corrupt records`)
  if (r.reordering !== null) {
    lines.push(
      `${prefix}reordering: record ${r.reordering.survivedSeq} survived while ${n(r.reordering.count)} earlier acknowledged records (from seq ${r.reordering.earliestLostSeq}) did not: writes were reordered across a flush, the mark of a volatile cache that ignores flushes.`,
    )
  }
  if (r.interrupted > 0) {
    lines.push(
      `${prefix}${n(r.interrupted)} newer, never acknowledged overwrites were cut mid-record: not a failure (no sync method promises an atomic record); they show the device's atomic write unit.`,
    )
  }
  if (r.ended === 'error' && r.acked > 0)
    lines.push(`${prefix}the writer stopped on an I/O error; records acknowledged before it were judged.`)
  return lines
}

function timeWindow(fromMs: number, toMs: number): string {
  if (!Number.isFinite(fromMs)) return 'at an unknown time'
  const from = new Date(fromMs).toISOString()
  return fromMs === toMs ? `at ${from}` : `between ${from} and ${new Date(toMs).toISOString()}`
}
