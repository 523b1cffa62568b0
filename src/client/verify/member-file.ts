/**
 * verify --file PATH.fsync or PATH.job1: the names `ls` shows for a write of several methods or
 * --jobs (record/format.ts memberPath), where the listener knows runs by the path given to write.
 * Asked only when the plain lookup of --file found no run (a file found today is judged as before).
 *
 * The file's superblock names its run, the host that wrote it and the path given to write. When the
 * listener's latest write of this host to that path has a member at this very file, that group is
 * judged exactly as `verify --file PATH` judges it (the listener stays the authority on which run to
 * judge: a cut that lost the newest run's file creation still leaves that run's acks to be judged).
 * Otherwise nothing is judged (exit 2, no run found) and the message says why and, where one exists,
 * the exact command that judges it: another host wrote it (--host), an older write than the latest
 * (--run), or a superblock that cannot be read, when the path its name suggests has such a group.
 */
import { PlugcheckError, usageError } from '../../base/errors.js'
import { quotePath, shellQuote } from '../../base/shell-quote.js'
import { methodNames } from '../../native/methods.js'
import { formatEndpoint } from '../../protocol/endpoint.js'
import type { Claim, StoredRun } from '../../protocol/messages.js'
import type { RunMeta } from '../../record/format.js'
import { readSuperblock } from './data-file-read.js'
import type { RunSource } from './run-source.js'
import type { VerifyOptions } from './verify-report.js'

/** The group to judge in place of --file's: the path given to write, its runs and claims, and the note saying so. */
export interface MemberFileGroup {
  readonly requestedPath: string
  readonly runs: StoredRun[]
  readonly claims: Claim[]
  readonly note: string
}

export async function memberFileGroup(options: VerifyOptions, host: string, from: RunSource): Promise<MemberFileGroup> {
  const file = options.file
  const noRun = `no run found for ${file} written from host ${host} (${from.name})`
  const reading = superblockOf(file)
  if (reading.kind === 'missing') return throwByName(options, host, from, `${noRun}, and there is no file at that path`)
  if (reading.kind !== 'valid')
    return throwByName(options, host, from, `${noRun}; its superblock cannot say which write it belongs to (${reading.detail})`)
  const meta = reading.meta
  const written = `its superblock says run ${meta.runId} (${meta.method}) of ${meta.host}:${meta.requestedPath}`
  if (meta.path !== file && meta.requestedPath !== file)
    throw usageError(`${noRun}; ${written}, whose data file is ${meta.path}, not this one (copied or renamed?)`)
  if (meta.host === host && meta.requestedPath === file)
    throw usageError(noRun, `${written}: check --server/--acks (is it the listener this file was written to?)`)
  const found = await from.find({ host: meta.host, requestedPath: meta.requestedPath })
  if (found.runs.length === 0)
    throw usageError(
      `${noRun}, nor for ${meta.host}:${meta.requestedPath}: ${written}`,
      'check --server/--acks: is it the listener this file was written to?',
    )
  const member = found.runs.find((r) => r.meta.path === file)
  if (member === undefined) {
    throw usageError(
      `${noRun}; ${written}, and the latest write there (group ${found.runs[0]!.meta.groupId}) has no file ${file}`,
      `judge that run alone: ${verifyCommand(options, meta.requestedPath, { host: meta.host, runId: meta.runId }, host)}`,
    )
  }
  if (meta.host !== host) {
    throw usageError(
      `${noRun}; ${written}: another machine wrote it`,
      `if it did: ${verifyCommand(options, meta.requestedPath, { host: meta.host }, host)}`,
    )
  }
  return {
    requestedPath: meta.requestedPath,
    runs: found.runs,
    claims: found.claims,
    note: `${file} is ${memberName(member.meta)} of the write to ${meta.requestedPath} (its superblock says so): that write is judged, as ${verifyCommand(options, meta.requestedPath, {}, host)} judges it`,
  }
}

/** The superblock, or why it cannot be read (a read error too: nothing was found, so it stays a usage error). */
function superblockOf(file: string): { kind: 'valid'; meta: RunMeta } | { kind: 'missing' } | { kind: 'unreadable'; detail: string } {
  try {
    const reading = readSuperblock(file)
    if (reading.kind === 'missing') return { kind: 'missing' }
    return reading.kind === 'valid' ? reading : { kind: 'unreadable', detail: reading.detail }
  } catch (error) {
    if (error instanceof PlugcheckError) return { kind: 'unreadable', detail: error.message }
    throw error
  }
}

/**
 * A superblock that cannot be read names no write: the paths the file's name suggests (PATH.method,
 * PATH.jobK, PATH.method.jobK) are asked, and a latest write there with a member at this file is
 * named with its command. Nothing is judged: only the superblock ties the file to its run.
 */
async function throwByName(options: VerifyOptions, host: string, from: RunSource, message: string): Promise<never> {
  for (const candidate of pathsByName(options.file)) {
    const found = await from.find({ host, requestedPath: candidate })
    const member = found.runs.find((r) => r.meta.path === options.file)
    if (member !== undefined)
      throw usageError(
        `${message}; the latest write to ${candidate} has ${memberName(member.meta)} at ${options.file}`,
        `judge that write: ${verifyCommand(options, candidate, {}, host)}`,
      )
  }
  throw usageError(
    message,
    pathsByName(options.file).length > 0
      ? 'give --file the path given to write (for a write of several methods or --jobs, without .METHOD or .jobK)'
      : 'check --file (the path given to write) and --server/--acks, or pick a run with --run',
  )
}

/** The paths given to write that memberPath turns into this file's name, longest first. */
export function pathsByName(file: string): string[] {
  const withoutJob = file.replace(/\.job[1-9]\d*$/, '')
  const methods = new RegExp(`\\.(${methodNames.join('|')})$`)
  const candidates = [withoutJob, withoutJob.replace(methods, '')]
  return [...new Set(candidates)].filter((c) => c !== file && c.length > 0)
}

/** "the fsync data file", "the job 2 data file", "the fsync data file of job 2". */
function memberName(meta: RunMeta): string {
  const method = meta.member === undefined || meta.member.methods.length > 1 ? `${meta.method} ` : ''
  const job = meta.member !== undefined && meta.member.jobs > 1 ? ` of job ${meta.member.job}` : ''
  return `the ${method}data file${job}`
}

/** The verify command that judges it: this command's source and token (named, never printed), another --file, --host, --run. */
export function verifyCommand(options: VerifyOptions, file: string, extra: { host?: string; runId?: string }, host: string): string {
  const source =
    'server' in options.source
      ? `--server ${shellQuote(formatEndpoint(options.source.server))}`
      : `--acks ${quotePath(options.source.acksDir)}`
  const parts = [`plugcheck verify ${source} --file ${quotePath(file)}`]
  if (extra.host !== undefined && extra.host !== host) parts.push(`--host ${shellQuote(extra.host)}`)
  else if (options.host !== undefined) parts.push(`--host ${shellQuote(options.host)}`)
  if (extra.runId !== undefined) parts.push(`--run ${extra.runId}`)
  if (options.token !== undefined && 'server' in options.source)
    parts.push(options.tokenFile === undefined ? "--token 'YOUR-TOKEN'" : `--token-file ${quotePath(options.tokenFile)}`)
  return parts.join(' ')
}
