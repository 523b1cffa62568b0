/**
 * The listener's options (ListenerOptions) with their defaults, and the bounds it holds every
 * connection and reply to; why each bound exists is in listener.ts's header.
 */
import { maxGroupRuns } from '../../record/run-id.js'
import { maxInlineSpans, maxSpansPerPage, maxStoredSpans, type CampaignState } from '../../protocol/messages.js'
import type { ListenerEvent } from './events.js'
import type { QuotaLimits, Reserve } from './quotas.js'

export const defaultMaxConnections = 1024
export const defaultHelloTimeoutMs = 10_000
/**
 * Connections still waiting for their hello; beyond this the oldest is evicted. As many as may be
 * served: a fleet whose writers all connect at once (after a cut) must not evict its own members,
 * whose hellos sit unread behind the burst of connections.
 */
export const defaultMaxPendingHandshakes = 1024
/** Closed connections kept open to read their error frame; beyond this they are closed at once. */
export const maxLingering = 256
/** Bytes of replies queued for all peers together, in user space and in the kernel's send buffers. */
export const defaultMaxQueuedReplyBytes = 256 * 1024 * 1024
/** A peer that took none of the bytes queued for it this long, while another reply is to be queued, is dropped. */
export const defaultReplyStallMs = 30_000
/** A write announces its whole group (jobs x methods runs) on one connection; no writer sends more. Runs hold no descriptor between commits, so the cap bounds memory only. */
export const maxRunsPerConnection = maxGroupRuns
export const maxQueriesPerConnection = 100
/** An agent reports one verdict per method of a run group; no verifier comes near this. */
export const maxVerdictsPerConnection = 1024
/** The oldest protocol still served: versions 3 and 4 only added messages and fields. */
export const minProtocolVersion = 2
/** A protocol 2 or 3 verifier gets every span of the group in one reply, up to this many (~30 MB, a day of acks). */
export const maxLegacyReplySpans = 1_000_000
/** Spans inline in one protocol 4 runs reply, over all its runs (a group of maxGroupRuns runs each under maxInlineSpans would be ~500,000); the other runs' spans are paged. */
export const maxInlineSpansPerReply = maxInlineSpans
/** Protocol 2 and 3 replies built at once (each holds its ~30 MB while built); later ones wait their turn. */
export const legacyRepliesAtOnce = 2
/** Span pages per connection: every page of every run of a group (maxGroupRuns runs of maxStoredSpans spans each). */
export const maxSpanPagesPerConnection = Math.ceil(maxStoredSpans / maxSpansPerPage) * maxGroupRuns
/** A list reply stays under this many bytes (verdicts carry fingerprints); older runs beyond are left out. */
export const listReplyBudgetBytes = 16 * 1024 * 1024
/**
 * A live run's connection silent this long may be a machine that lost power: only then may the same
 * host's new boot end its runs. A writer sends an ack after every sync, so a live writer is never
 * silent this long, and no machine reboots faster (firmware, kernel, network, then node): a machine
 * sharing the host name (a clone) cannot end a writer that is still writing.
 */
export const rebootSilenceMs = 2_000

export interface ListenerOptions {
  readonly host: string
  readonly port: number
  readonly dir: string
  readonly token?: string
  readonly log?: (line: string) => void
  readonly maxConnections?: number
  readonly helloTimeoutMs?: number
  readonly maxPendingHandshakes?: number
  readonly maxQueuedReplyBytes?: number
  readonly replyStallMs?: number
  /** SO_SNDBUF of every served socket (default defaultSendBufferBytes). */
  readonly sendBufferBytes?: number
  /** The longest wait before a hello from an address that sent wrong tokens is answered (default 5 s). */
  readonly maxTokenBackoffMs?: number
  /** How long a live run's connection must have been silent before a rebooted machine may end it (default rebootSilenceMs); 0 in tests of the takeover itself. */
  readonly rebootSilenceMs?: number
  /** Spans kept per run (default maxStoredSpans); lower for tests of span merging. */
  readonly maxStoredSpans?: number
  /** The campaign, if the listener runs one: the answer to campaign-query. */
  readonly campaignState?: () => CampaignState | null
  /** Subscribed to events before the listener starts, so that the warnings at start reach it. */
  readonly onEvent?: (event: ListenerEvent) => void
  /** Bounds on runs and bytes on record (quotas.ts); absent fields take the defaults. */
  readonly quotas?: Partial<QuotaLimits>
  /** Free space of --dir below which new runs are refused (default: 1 GiB or 5 %, the smaller). */
  readonly reserve?: Reserve
}
