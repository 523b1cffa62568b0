/**
 * A campaign read back from its file when the listener starts: the file parsed and checked against
 * the engine's invariants (a damaged file stops the campaign, it is never guessed at), and the flags
 * given compared with the stored ones (resumeFlags spells the stored ones for the hint); the one
 * change a stopped campaign takes, another cut command after a failed cut (retryCycle).
 */
import { runtimeError } from '../../base/errors.js'
import { campaignChecksumProblem, campaignFileSchema, type CampaignFile } from '../../store/campaign-file.js'
import type { CampaignOptions } from './campaign-types.js'
import { assert } from '../../base/assert.js'
import { movesTo } from './campaign-transitions.js'
import { newCycle } from './campaign-cycle.js'

export function parseCampaignFile(text: string, path: string, name: string): CampaignFile {
  const damaged = (why: string) =>
    runtimeError(
      `the campaign file ${path} is damaged: ${why}`,
      'the campaign cannot resume from it; keep the file for the record and start a campaign of another name',
    )
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (error) {
    throw damaged((error as Error).message)
  }
  const checksum = campaignChecksumProblem(json)
  if (checksum !== undefined) throw damaged(checksum)
  const parsed = campaignFileSchema.safeParse(json)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!
    throw damaged(`${issue.path.join('.') || 'the file'}: ${issue.message}`)
  }
  const file = parsed.data
  if (file.name !== name) throw damaged(`it holds campaign ${file.name}`)
  // The engine's own invariants: the current cycle has its record, the history is in order.
  if (file.history.some((r, i) => r.cycle !== i + 1)) throw damaged('its history is out of order')
  const running = file.phase !== 'done'
  if (running && file.cycle > file.cycles) throw damaged(`cycle ${file.cycle} is beyond its ${file.cycles} cycles`)
  if (file.phase !== 'done' && file.history.length !== file.cycle) throw damaged(`cycle ${file.cycle} has no record of its own`)
  if (file.phase === 'done' && (file.cycle !== file.cycles + 1 || file.history.length !== file.cycles))
    throw damaged('it is done without a record of every cycle')
  const record = file.history[file.cycle - 1]
  if (file.phase === 'waiting-to-cut' && record?.plannedCutMs === null) throw damaged('it waits to cut without a planned cut')
  if ((file.phase === 'cutting' || file.phase === 'waiting-for-agent') && record?.cutMs === null)
    throw damaged(`it is ${file.phase} without a cut moment`)
  return file
}

export function optionDifferences(file: CampaignFile, options: CampaignOptions): string[] {
  const differences: string[] = []
  if (file.cycles !== options.cycles) differences.push(`--cycles ${options.cycles}, stored ${file.cycles}`)
  if (file.cutCommand !== options.cutCommand)
    differences.push(`--cut-command ${JSON.stringify(options.cutCommand)}, stored ${JSON.stringify(file.cutCommand)}`)
  if (file.cutAfterS[0] !== options.cutAfterS[0] || file.cutAfterS[1] !== options.cutAfterS[1]) {
    differences.push(`--cut-after ${options.cutAfterS[0]}-${options.cutAfterS[1]}, stored ${file.cutAfterS[0]}-${file.cutAfterS[1]}`)
  }
  if (file.rebootTimeoutS !== options.rebootTimeoutS)
    differences.push(`--reboot-timeout ${options.rebootTimeoutS}, stored ${file.rebootTimeoutS}`)
  if (options.seed !== undefined && options.seed !== file.seed) differences.push(`--seed ${options.seed}, stored ${file.seed}`)
  return differences
}

/**
 * A campaign stopped by a failed cut, resumed with another cut command (readCampaignFile lets nothing
 * else through): the change and the cycle's failed attempt are kept in cutCommandChanges, and the
 * cycle starts again from the agent's writer (its earlier writer was told to stop: agent.ts).
 */
export function retryCycle(next: CampaignFile, to: string, atMs: number): void {
  const nextPhase = movesTo(next.phase, 'cut-command-changed')
  assert(nextPhase !== undefined && stoppedByFailedCut(next), () => `campaign ${next.name}: another cut command in phase ${next.phase}`)
  const record = next.history[next.cycle - 1]!
  const change = { cycle: next.cycle, atMs, from: next.cutCommand, to, failedAttempt: structuredClone(record) }
  next.cutCommandChanges = [...(next.cutCommandChanges ?? []), change]
  next.cutCommand = to
  next.phase = nextPhase
  delete next.detail
  Object.assign(record, newCycle(next.cycle))
}

/** Stopped because the cut command of its current cycle failed: the one stop another --cut-command may resume. */
export function stoppedByFailedCut(file: CampaignFile): boolean {
  return file.phase === 'stopped' && file.history[file.cycle - 1]?.outcome === 'cut-failed'
}

/** The flags that resume the stored campaign (cutCommand: a placeholder to show in place of the stored command). */
export function resumeFlags(file: CampaignFile, cutCommand?: string): string {
  const quoted = cutCommand ?? `'${file.cutCommand.replaceAll("'", `'\\''`)}'`
  return `--campaign ${file.name} --cycles ${file.cycles} --cut-command ${quoted} --cut-after ${file.cutAfterS[0]}-${file.cutAfterS[1]} --reboot-timeout ${file.rebootTimeoutS} --seed ${file.seed}`
}
