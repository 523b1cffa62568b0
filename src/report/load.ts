/**
 * Reads a listener's directory for the report, without changing it: the runs through AckStore.load
 * (the read-only path verify --acks uses) and the campaigns' state files <dir>/campaigns/<name>.json.
 *
 * Fault model: everything on disk is hostile. A directory without runs/ is not a listener's (exit 2);
 * a run the store refuses, or a campaign file that is unreadable, not a regular file, too large, not
 * JSON, not a campaign file or named for another campaign, is damage: one line naming the file (exit 3),
 * never a crash and never a report that silently leaves it out. Files are opened with O_NONBLOCK and
 * must be regular files, so a FIFO planted there cannot hang the report. A verdict that disagrees with
 * its own counts or with its run's acks (verdict-rules.ts) is not shown, and said: the store refuses
 * such verdict files already, and any other source of records is held to the same rules.
 */
import { constants as fsConstants } from 'node:fs'
import { open, readdir, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { AckStore } from '../store/ack-store.js'
import { describeInvalid } from '../store/run-files.js'
import { campaignChecksumProblem, campaignFileSchema, type CampaignFile } from '../store/campaign-file.js'
import { campaignNameSchema } from '../protocol/messages.js'
import { verdictDisagreement } from '../protocol/verdict-rules.js'
import { describeSystemError, runtimeError, usageError } from '../base/errors.js'
import type { CampaignInput, RunRecord } from './inputs.js'

/** A campaign file of 100,000 cycles with long cut outputs stays well under this. */
export const maxCampaignFileBytes = 256 * 1024 * 1024

export interface ListenerDir {
  readonly records: readonly RunRecord[]
  /** What the store skipped or could not use (a damaged verdict file, a torn log tail), for the report. */
  readonly warnings: readonly string[]
  readonly campaigns: readonly CampaignInput[]
}

/** Where the run records come from: the ack store's (tests may hand in their own). */
export type RecordSource = (dir: string) => Promise<{ records: readonly RunRecord[]; warnings: readonly string[] }>

export const storeRecords: RecordSource = async (dir) => {
  const store = await AckStore.load(dir)
  return { records: store.runRecords(), warnings: store.warnings }
}

/**
 * The runs and the campaigns asked for (every campaign in the directory when names is undefined): a
 * campaign exists when its file does or when runs are tagged with its name. Without names, a directory
 * with runs outside campaigns only is reported too; one with neither is refused (exit 2).
 */
export async function loadListenerDir(
  dir: string,
  names: readonly string[] | undefined,
  source: RecordSource = storeRecords,
): Promise<ListenerDir> {
  await requireListenerDir(dir)
  let loaded: Awaited<ReturnType<RecordSource>>
  try {
    loaded = await source(dir)
  } catch (error) {
    if ((error as { exitCode?: number }).exitCode !== undefined) throw error
    throw runtimeError(`could not read the runs in ${join(dir, 'runs')}: ${describeSystemError(error)}`)
  }
  const warnings = [...loaded.warnings]
  const records = loaded.records.map((record) => withoutDisagreeingVerdict(record, warnings))
  const onDisk = await campaignFileNames(dir)
  const tagged = new Set(records.flatMap((r) => (r.summary.campaign === null ? [] : [r.summary.campaign.name])))
  const known = [...new Set([...onDisk, ...tagged])].sort()

  let wanted: string[]
  if (names === undefined) {
    // Runs of no campaign (a write and a verify run by hand) are reported on their own.
    if (known.length === 0 && !records.some((r) => r.summary.campaign === null))
      throw usageError(
        `${dir} holds no campaign and no run`,
        'a run is recorded once plugcheck write --server reaches this listener; a campaign starts with plugcheck listen --campaign NAME --cycles N --cut-command CMD --cut-after MIN-MAX',
      )
    wanted = known
  } else {
    wanted = [...new Set(names)]
    const unknown = wanted.filter((name) => !known.includes(name))
    if (unknown.length > 0) {
      throw usageError(
        `${dir} holds no campaign named ${unknown.join(', ')}`,
        known.length === 0 ? 'that directory holds no campaign at all' : `campaigns there: ${known.join(', ')}`,
      )
    }
  }
  const campaigns: CampaignInput[] = []
  for (const name of wanted) {
    campaigns.push({ name, file: onDisk.includes(name) ? await readCampaignFile(dir, name) : null })
  }
  return { records, warnings, campaigns }
}

/** The record, without its verdict (said in warnings) when the verdict disagrees with its counts or its run's acks. */
function withoutDisagreeingVerdict(record: RunRecord, warnings: string[]): RunRecord {
  const { verdict, method, ackedThroughSeq, runId } = record.summary
  const problem =
    verdict === null
      ? undefined
      : verdictDisagreement(verdict, method, ackedThroughSeq, record.summary.end !== undefined || !record.summary.live)
  if (problem === undefined) return record
  warnings.push(`run ${runId}: the verdict ${problem}; it is not shown`)
  return { ...record, summary: { ...record.summary, verdict: null } }
}

async function requireListenerDir(dir: string): Promise<void> {
  const hint = 'give --dir the directory the listener was started with (its --dir, ./plugcheck-data by default)'
  let runs
  try {
    runs = await stat(join(dir, 'runs'))
  } catch (error) {
    const code = (error as { code?: string }).code
    if (code === 'ENOENT' || code === 'ENOTDIR') throw usageError(`${dir} is not a listener's directory (it has no runs/)`, hint)
    throw runtimeError(`could not read ${join(dir, 'runs')}: ${describeSystemError(error)}`)
  }
  if (!runs.isDirectory()) throw usageError(`${dir} is not a listener's directory (its runs is not a directory)`, hint)
}

/** Names of the campaign files in <dir>/campaigns (temporary files and other names are not campaigns). */
async function campaignFileNames(dir: string): Promise<string[]> {
  let entries: string[]
  try {
    entries = await readdir(join(dir, 'campaigns'))
  } catch (error) {
    if ((error as { code?: string }).code === 'ENOENT') return []
    throw runtimeError(`could not read ${join(dir, 'campaigns')}: ${describeSystemError(error)}`)
  }
  return entries
    .filter((entry) => entry.endsWith('.json'))
    .map((entry) => entry.slice(0, -'.json'.length))
    .filter((name) => campaignNameSchema.safeParse(name).success)
    .sort()
}

export async function readCampaignFile(dir: string, name: string): Promise<CampaignFile> {
  const path = join(dir, 'campaigns', `${name}.json`)
  const damaged = (what: string) =>
    runtimeError(`campaign file ${path} is damaged: ${what}`, 'restore it, or move it out of campaigns/ to report the other campaigns')
  let text: string
  try {
    const file = await open(path, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK)
    try {
      const stats = await file.stat()
      if (!stats.isFile()) throw damaged('not a regular file')
      if (stats.size > maxCampaignFileBytes)
        throw damaged(`it is over ${maxCampaignFileBytes / 1024 / 1024} MiB, more than any campaign's file`)
      text = (await file.readFile()).toString('utf8')
    } finally {
      await file.close().catch(() => undefined)
    }
  } catch (error) {
    if ((error as { exitCode?: number }).exitCode !== undefined) throw error
    throw runtimeError(`could not read campaign file ${path}: ${describeSystemError(error)}`)
  }
  let decoded: unknown
  try {
    decoded = JSON.parse(text)
  } catch {
    throw damaged(`its ${Buffer.byteLength(text)} bytes are not JSON`)
  }
  const checksum = campaignChecksumProblem(decoded)
  if (checksum !== undefined) throw damaged(checksum)
  const parsed = campaignFileSchema.safeParse(decoded)
  if (!parsed.success) throw damaged(describeInvalid(parsed.error).replace("it is not a run's metadata", 'it is not a campaign file'))
  if (parsed.data.name !== name) throw damaged(`it describes campaign ${parsed.data.name}`)
  // The engine writes one entry per cycle, in order (as it checks when it resumes).
  const outOfOrder = parsed.data.history.findIndex((r, i) => r.cycle !== i + 1)
  if (outOfOrder >= 0)
    throw damaged(`its history is out of order (entry ${outOfOrder + 1} is cycle ${parsed.data.history[outOfOrder]!.cycle})`)
  return parsed.data
}
