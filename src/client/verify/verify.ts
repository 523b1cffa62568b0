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
import type { PlatformTable } from '../../native/port.js'
import { hostname } from 'node:os'
import { dirname } from 'node:path'
import type { StoredRun } from '../../protocol/messages.js'
import { runtimeError, usageError, PlugcheckError } from '../../base/errors.js'
import type { Endpoint } from '../../protocol/endpoint.js'
import { judgeRun } from './judge.js'
import { judgeFilesRun } from './judge-files.js'
import type { RunReport } from './run-report.js'
import { reportVerdicts } from './listener-client.js'
import { listenerTimeoutMs } from '../../protocol/endpoint.js'
import { checkFileSystemPresent } from './file-checks.js'
import { checkGroupMembers, withMembersTheFilesHold } from './group-members.js'
import { checkMetaAgainstFiles } from './meta-check.js'
import { groupVerdict, verdictExitCodes } from './verdict-rules.js'
import { firstNotJudged, notJudgedExitCode, type NotJudgedCheck } from './not-judged-rules.js'
import { writerEnvironment } from '../environment.js'
import type { Io } from '../../base/io.js'
import type { NotJudgedFinding, NotJudgedReport, VerifyOptions, VerifyReport } from './verify-report.js'
import { Superblocks } from './superblocks.js'
import { openSource } from './run-source.js'
import { inReportOrder, runsTheFileStillHolds, withRunsTheFilesHold } from './run-lookup.js'
import { memberFileGroup, verifyCommand } from './member-file.js'
import { conflictingClaims, fileChangedDuringRun, rebootedSince, replacedLater, stillRunning, supersededBy } from './not-judged-checks.js'
import { storedVerdicts } from './stored-verdicts.js'
import { renderNotJudged, renderReport } from './verify-render.js'
import { oneLine } from '../../base/printable.js'

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
  if (report.verdict !== 'not-judged') return json ? `${JSON.stringify(report, null, 2)}\n` : renderReport(report)
  // groupRunIds is for storedVerdicts; the printed report names the runs in its detail and claims.
  const { groupRunIds: _groupRunIds, ...printed } = report
  return json ? `${JSON.stringify(printed, null, 2)}\n` : renderNotJudged(report)
}

/**
 * Finds the run and judges it, as `verify` does, without printing the report. Operating errors
 * (no run found, the file system under test missing, a listener answering nonsense) are thrown; the
 * warnings of an offline ack directory go to io.err.
 */
export async function verifyReport(asked: VerifyOptions, io: Pick<Io, 'err'> = { err: () => undefined }): Promise<VerifyOutcome> {
  const host = asked.host ?? hostname()
  const from = await openSource(asked, io)
  const source = from.name
  const notes: string[] = []
  let options = asked
  let { runs, claims } = await from.find(queryOf(options, host))
  if (runs.length === 0 && options.runId === undefined) {
    // --file names PATH.fsync or PATH.job1, the files of a write to PATH: the superblock says which write.
    const group = await memberFileGroup(options, host, from)
    options = { ...options, file: group.requestedPath }
    ;({ runs, claims } = group)
    notes.push(group.note)
  }
  const query = queryOf(options, host)
  runs = inReportOrder(runs)
  checkFoundRuns(runs, options, host, source)

  const files = new Superblocks()
  claims = await withRunsTheFilesHold(runs, claims, from, query, files)
  const thisBootId = readBootId()
  const thisHost = hostname()
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
    const { heldBy, ...finding } = notJudged
    const hint =
      heldBy === undefined ? {} : { hint: `judge that write: ${verifyCommand(options, heldBy.requestedPath, { host: heldBy.host }, host)}` }
    const report: NotJudgedReport = {
      verdict: 'not-judged',
      ...finding,
      ...hint,
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
  for (const run of runs) {
    const judge = run.meta.pattern === 'files' ? judgeFilesRun : judgeRun
    reports.push(await judge(run, { rebootedSinceWrite: rebootedSince(run, thisHost, thisBootId), acks: from.acks(run) }))
  }
  const verdict = groupVerdict(reports)
  notes.push(...methodCaveats(runs), ...storageLostNotes(runs), ...unknownBootNotes(runs, verdict, thisHost, thisBootId))
  const report: VerifyReport = { verdict, host, file: options.file, source, claims, notes, runs: reports }
  return { report, exitCode: verdictExitCodes[report.verdict] }
}

const queryOf = (options: VerifyOptions, host: string) => ({
  host,
  requestedPath: options.file,
  ...(options.runId === undefined ? {} : { runId: options.runId }),
})

/** The source's answer, checked before anything is judged: some run, and only runs of what was asked. */
function checkFoundRuns(runs: readonly StoredRun[], options: VerifyOptions, host: string, source: string): void {
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
}

/**
 * What a tested method promises on the platform its writer ran on, when that is less than its name
 * says (macOS fsync does not flush the drive's cache): a pass of such a method is read with it.
 */
function methodCaveats(runs: readonly StoredRun[]): string[] {
  let table: PlatformTable
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

/**
 * Whether the machine rebooted since the write could not be told (rebootedSinceWrite null: no boot id
 * here, none from the writer, or verify runs on another machine than the writer's): said with the
 * reason, since a pass then proves no more than the operator's word that the power was cut. Not
 * beside a fail: a loss is a loss whatever the boot.
 */
export function unknownBootNotes(
  runs: readonly StoredRun[],
  verdict: VerifyReport['verdict'],
  thisHost: string,
  thisBootId: string | null,
): string[] {
  const unknown = runs.find((r) => rebootedSince(r, thisHost, thisBootId) === null)
  if (verdict === 'fail' || unknown === undefined) return []
  const [machine, why] =
    unknown.meta.host !== thisHost
      ? [`${oneLine(unknown.meta.host)} (the machine that wrote)`, `verify runs on ${oneLine(thisHost)}`]
      : thisBootId === null
        ? ['this machine', 'no boot id on this platform']
        : ['this machine', 'its writer reported no boot id']
  return [`could not tell whether ${machine} rebooted since the write (${why}): a pass proves nothing unless the power was really cut`]
}

function readBootId(): string | null {
  try {
    return nativePort().bootId()
  } catch {
    return null
  }
}

/**
 * The writer stopped the run because a record of its own file read back wrong while it was going
 * (end 'storage-lost'): said beside the verdict, which the bytes as they are now decide. Once per
 * distinct detail (every run of a write ends with the same words).
 */
function storageLostNotes(runs: readonly StoredRun[]): string[] {
  const details = new Set(
    runs.filter((r) => r.end?.reason === 'storage-lost').map((r) => oneLine(r.end!.detail ?? 'an acknowledged record read back wrong')),
  )
  return [...details].map((detail) => `the writer stopped during the run: ${detail.replace(/\.$/, '')}`)
}
