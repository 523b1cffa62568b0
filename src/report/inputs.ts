/** What a report is built from: the runs of a listener's directory and its campaigns, as load.ts found them. */
import type { CampaignFile } from '../store/campaign-file.js'
import type { RunSummary, StoredRun } from '../protocol/messages.js'

/** One run as the ack store holds it: its summary (verdict, steady time, campaign tag) and its acks. */
export interface RunRecord {
  readonly summary: RunSummary
  readonly run: StoredRun
}

/** A campaign as found on disk: its state file (null when only tagged runs name it) and its runs. */
export interface CampaignInput {
  readonly name: string
  readonly file: CampaignFile | null
}
