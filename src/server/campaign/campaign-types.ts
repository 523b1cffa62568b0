/**
 * What the campaign engine (campaign.ts) takes and gives: its options, the listener events it
 * consumes, the events it emits, and what it needs of the listener.
 */
import type { CampaignTag, StoredVerdict } from '../../protocol/messages.js'

export interface CampaignOptions {
  readonly name: string
  readonly cycles: number
  readonly cutCommand: string
  /** [min, max] seconds after the writer is steady. */
  readonly cutAfterS: readonly [number, number]
  readonly rebootTimeoutS: number
  /** Seed of the cut moments; random (and logged) when absent. */
  readonly seed?: number
}

/** The listener events the engine consumes (src/server/listen/events.ts's ListenerEvent has them all). */
export type CampaignInputEvent =
  | { kind: 'run'; runId: string; groupId: string; host: string; path: string; campaign: CampaignTag | null; atMs: number }
  | { kind: 'steady'; runId: string; groupId: string; campaign: CampaignTag | null; atMs: number }
  | { kind: 'verdict'; runId: string; groupId: string; campaign: CampaignTag | null; result: StoredVerdict; atMs: number }
  | { kind: string }
export interface CampaignLogEvent {
  kind: 'campaign'
  name: string
  message: string
  atMs: number
}

/** What the engine needs of the listener. */
export interface CampaignListener {
  readonly events: {
    on(name: 'event', handler: (event: CampaignInputEvent) => void): unknown
    off(name: 'event', handler: (event: CampaignInputEvent) => void): unknown
  }
  emit(event: CampaignLogEvent): void
  /** The verdicts already on record, so a resumed campaign counts those that came while it was down. */
  readonly store?: { summaries?(campaign?: string): ReadonlyArray<{ runId: string; verdict: { readonly atMs: number } | null }> }
}
