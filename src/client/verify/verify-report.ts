/**
 * What `plugcheck verify` is asked (VerifyOptions) and what it reports: a judged group (VerifyReport)
 * or why nothing was judged (NotJudgedReport). Shared by the lookup, the checks, the rendering and
 * the stored verdicts, so none of them imports verify.ts.
 */
import type { Claim } from '../../protocol/messages.js'
import type { Endpoint } from '../../protocol/endpoint.js'
import type { RunReport } from './run-report.js'
import type { RunVerdict } from './verdict-rules.js'

export interface VerifyOptions {
  readonly source: { readonly server: Endpoint } | { readonly acksDir: string }
  /** Absolute path, as given to write --file. */
  readonly file: string
  readonly runId?: string
  readonly token?: string
  /** --token-file, absolute, when the token came from a file: a command printed names it. */
  readonly tokenFile?: string
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
  /** The command that judges what the file holds, when it is known (else the reason's own hint). */
  readonly hint?: string
  readonly host: string
  readonly file: string
  readonly source: string
  readonly claims: readonly Claim[]
  readonly runs: readonly []
  /** The runs of the group that was not judged (not printed): each gets a 'not-judged' stored verdict. */
  readonly groupRunIds?: readonly string[]
}

/** What one not-judged check found (not-judged-rules.ts decides which checks are asked, in what order). */
export type NotJudgedFinding = Pick<NotJudgedReport, 'reason' | 'detail'> & {
  /** The write (host and path given to write) whose data file this is, when the file is a member of a write to another path. */
  readonly heldBy?: { readonly host: string; readonly requestedPath: string }
}
