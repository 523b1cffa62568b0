/**
 * What a connection (connection.ts) and its listener (listener.ts) ask of each other, and what the
 * handlers of served-messages.ts use of a connection. As interfaces here, the three files import
 * each other in one direction only: listener.ts -> connection.ts -> served-messages.ts -> this file.
 */
import type { Claim, ClientMessage, Machine, RunSummary, ServerMessage } from '../../protocol/messages.js'
import type { AckStore } from '../../store/ack-store.js'
import type { ListenerEvent } from './events.js'
import type { Turns } from './legacy-reply.js'
import type { ListenerOptions } from './listener-options.js'
import type { RateLimitedLog } from './rate-limited-log.js'
import type { ServedSockets } from './served-socket.js'
import type { TokenBackoff } from './token-backoff.js'

/**
 * What a connection asks of its listener (Listener, listener.ts): the store, the shared bounds, logs
 * and events, and the owners of live runs.
 */
export interface ConnectionListener {
  readonly options: ListenerOptions
  readonly store: AckStore
  readonly served: ServedSockets
  readonly tokenBackoff: TokenBackoff
  readonly connectionLog: RateLimitedLog
  readonly legacyReplies: Turns
  readonly listenerId: string
  readonly helloTimeoutMs: number
  readonly maxConnections: number
  readonly pending: Set<ServedConnection>
  readonly authenticated: Set<ServedConnection>
  lingering: number
  emit(event: ListenerEvent): void
  tokenAccepted(offered: string | undefined): boolean
  endRunsOfEarlierBoot(machine: Machine, peer: string): string[]
  admitRun(peer: string, writer: object | undefined): void
  mayJoinGroup(groupId: string, groupKey: string | undefined, peer: string): boolean
  liveRunOn(host: string, requestedPath: string, except: ServedConnection, groupId: string): string | undefined
  takeOverFromRebooted(runId: string, newBootId: string | null | undefined, newPeer: string): boolean
  claimRun(meta: { runId: string; host: string; requestedPath: string }, owner: ServedConnection): void
  releaseRun(runId: string, owner: ServedConnection): void
  isLive(runId: string): boolean
  listRuns(campaign: string | undefined): { runs: RunSummary[]; truncated: boolean }
  claims(host: string, requestedPath: string): Claim[]
  makeRoomForReply(reply: number, requester: ServedConnection): boolean
}

/** What the handlers of messages after hello (served-messages.ts) use of their connection (Connection). */
export interface ServedConnection {
  readonly listener: ConnectionListener
  readonly peer: string
  /** The protocol the peer said hello with. */
  readonly protocol: number
  readonly ownedRuns: Set<string>
  readonly ownedGroups: Set<string>
  readonly groupKeys: Map<string, string>
  isClosed(): boolean
  send(message: ServerMessage): void
  sendQueryReply(reply: Buffer | readonly Buffer[]): void
  handleAcks(first: Extract<ClientMessage, { type: 'ack' }>): undefined
}
