/**
 * A campaign's file on disk, <dir>/campaigns/<name>.json: read back (and checked against the flags
 * given) when the listener starts, made for a new campaign, and written whole for every state change
 * (temporary file, fsync, rename, directory fsync), so that a kill at any moment leaves the old state
 * or the new one, never a mix. campaign.ts decides what to write; this module only reads and writes.
 */
import { randomInt } from 'node:crypto'
import { mkdir, open, readFile, rename } from 'node:fs/promises'
import { join } from 'node:path'
import { describeSystemError, runtimeError, usageError } from '../../base/errors.js'
import { syncDirectoryAsync } from '../../base/directory-sync.js'
import { campaignFileText, campaignFileVersion, maxCutCommandChanges, type CampaignFile } from '../../store/campaign-file.js'
import type { CampaignOptions } from './campaign-types.js'
import { optionDifferences, parseCampaignFile, resumeFlags, stoppedByFailedCut } from './campaign-resume.js'
import { newCycle } from './campaign-cycle.js'

/** The file of a campaign in a listener's directory. */
export function campaignFilePath(dir: string, name: string): string {
  return join(dir, 'campaigns', `${name}.json`)
}

/** A campaign read back: its file, and the new cut command when the listener was started with another one (a campaign stopped by a failed cut). */
export interface StoredCampaign {
  readonly file: CampaignFile
  readonly newCutCommand?: string
}

/**
 * The stored campaign of options.name, or undefined if there is none yet. A damaged file refuses
 * (exit 3); options that differ from the stored campaign's refuse too (exit 2): a resumed campaign
 * is the same campaign. One exception: a campaign stopped because its cut command failed takes
 * another --cut-command (the other options as stored), to write the failed cycle again.
 */
export async function readCampaignFile(dir: string, options: CampaignOptions): Promise<StoredCampaign | undefined> {
  const path = campaignFilePath(dir, options.name)
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw runtimeError(`could not read the campaign file ${path}: ${describeSystemError(error)}`)
  }
  const file = parseCampaignFile(text, path, options.name)
  const differences = optionDifferences(file, options)
  const failedCut = stoppedByFailedCut(file)
  if (failedCut && differences.length === 1 && file.cutCommand !== options.cutCommand) {
    // The change could not be recorded: refused now, before the campaign takes it and halts on its own file.
    if ((file.cutCommandChanges?.length ?? 0) >= maxCutCommandChanges)
      throw usageError(
        `campaign ${options.name} in ${path} has changed its cut command ${maxCutCommandChanges} times, the most its file keeps: it takes no other --cut-command`,
        'start a campaign of another name (another --campaign) with the new cut command',
      )
    return { file, newCutCommand: options.cutCommand }
  }
  if (differences.length > 0) {
    throw usageError(
      `campaign ${options.name} in ${path} was started with other options: ${differences.join('; ')}`,
      failedCut
        ? `it stopped because its cut command failed: resume it with ${resumeFlags(file, "'NEW-COMMAND'")} (only the cut command may change), or give the new campaign another --campaign name`
        : `resume it with ${resumeFlags(file)}, or give the new campaign another --campaign name`,
    )
  }
  return { file }
}

/** A new campaign's first state (cycle 1, waiting for the writer), written durably before it is acted on. */
export async function createCampaignFile(dir: string, options: CampaignOptions): Promise<CampaignFile> {
  const campaignsDir = join(dir, 'campaigns')
  const path = campaignFilePath(dir, options.name)
  const created = await mkdir(campaignsDir, { recursive: true }).catch((error: unknown) => {
    throw runtimeError(`could not create ${campaignsDir}: ${describeSystemError(error)}`)
  })
  if (created !== undefined) await syncDirectoryAsync(dir)
  const file: CampaignFile = {
    version: campaignFileVersion,
    name: options.name,
    cycles: options.cycles,
    cutCommand: options.cutCommand,
    cutAfterS: [options.cutAfterS[0], options.cutAfterS[1]],
    rebootTimeoutS: options.rebootTimeoutS,
    seed: options.seed ?? randomInt(2 ** 32 - 1),
    createdMs: Date.now(),
    phase: 'waiting-for-writer',
    cycle: 1,
    history: [newCycle(1)],
  }
  try {
    await writeCampaignFile(path, file)
  } catch (error) {
    throw runtimeError(`could not write the campaign file ${path}: ${describeSystemError(error)}`)
  }
  return file
}

/** Replaces the file at path with file, durably: the old state or the new one survives a kill, never a mix. */
export async function writeCampaignFile(path: string, file: CampaignFile): Promise<void> {
  const tmpPath = `${path}.tmp`
  const handle = await open(tmpPath, 'w')
  try {
    await handle.writeFile(campaignFileText(file))
    await handle.sync()
  } finally {
    await handle.close()
  }
  await rename(tmpPath, path)
  await syncDirectoryAsync(join(path, '..'))
}
