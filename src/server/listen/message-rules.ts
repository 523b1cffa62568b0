/**
 * The listener's message rules, as a table (STYLE.md principle 12): per client message, in which state
 * of the connection it is taken (before hello, or after it as a writer or a verifier), which budget of
 * the connection it spends, and which run it must name (one this connection announced, or one the
 * listener holds). connection.ts asks refusalOf() before it handles a message; a refusal is a protocol
 * error that closes the connection (its code and words below), and nothing stored is touched.
 *
 * Checks are made in this order, the first that fails refuses: the connection's state (hello once and
 * first; the role), the budget, the run named. What each message then does is served-messages.ts's.
 */
import { assert } from '../../base/assert.js'
import type { ClientMessage, ErrorCode } from '../../protocol/messages.js'

export type MessageType = ClientMessage['type']
export type ConnectionRole = 'writer' | 'verifier'
/** Before its hello a connection has no role. */
export type ConnectionState = 'awaiting-hello' | ConnectionRole
export const connectionStates: readonly ConnectionState[] = ['awaiting-hello', 'writer', 'verifier']

/** What a connection may send only so many of (the counts are listener-options.ts's). */
export type Budget = 'runs' | 'queries' | 'verdicts' | 'span-pages'
/** How a refusal over budget names what was sent. */
export const budgetWords: Readonly<Record<Budget, string>> = {
  runs: 'runs announced',
  queries: 'queries',
  verdicts: 'verdicts',
  'span-pages': 'span pages',
}

interface RunRule {
  /** announced-here: a run this connection announced (acks, its end, steady); held: a run the listener holds, created. */
  readonly must: 'announced-here' | 'held'
  /** How a refusal names the message and its run: "ack for run", "spans of run". */
  readonly about: string
  /** A run that has ended takes no more of this message. */
  readonly ended?: { readonly code: ErrorCode; readonly says: (runId: string) => string }
}

export interface MessageRule {
  /** The states in which the message is taken. */
  readonly states: readonly ConnectionState[]
  /** The refusal's words when a connection of the other role sends it. */
  readonly wrongRole?: string
  readonly budget?: Budget
  readonly run?: RunRule
}

const both: readonly ConnectionState[] = ['writer', 'verifier']

export const messageRules: Readonly<Record<MessageType, MessageRule>> = {
  hello: { states: ['awaiting-hello'] },
  run: { states: ['writer'], wrongRole: 'run announced on a verifier connection', budget: 'runs' },
  // Only the connection that announced a run sends its acks and its end (a verifier announces none).
  ack: {
    states: both,
    run: {
      must: 'announced-here',
      about: 'ack for run',
      ended: { code: 'out-of-order', says: (runId) => `ack for run ${runId} after its end` },
    },
  },
  end: {
    states: both,
    run: { must: 'announced-here', about: 'end for run', ended: { code: 'limit', says: (runId) => `end of run ${runId} sent twice` } },
  },
  steady: {
    states: ['writer'],
    wrongRole: 'steady sent on a verifier connection',
    run: {
      must: 'announced-here',
      about: 'steady for run',
      ended: { code: 'out-of-order', says: (runId) => `steady for run ${runId} after its end` },
    },
  },
  verdict: {
    states: ['verifier'],
    wrongRole: 'verdict sent on a writer connection',
    budget: 'verdicts',
    run: { must: 'held', about: 'verdict for run' },
  },
  list: { states: ['verifier'], wrongRole: 'list sent on a writer connection', budget: 'queries' },
  'campaign-query': { states: ['verifier'], wrongRole: 'campaign-query sent on a writer connection', budget: 'queries' },
  // A writer asks too: what its path last held (evidence.ts).
  query: { states: both, budget: 'queries' },
  spans: {
    states: ['verifier'],
    wrongRole: 'spans asked on a writer connection',
    budget: 'span-pages',
    run: { must: 'held', about: 'spans of run' },
  },
}

export const messageTypes = Object.keys(messageRules) as MessageType[]

/** What the listener knows when a message comes, as the rules need it. */
export interface MessageFacts {
  /** The message would pass its budget (the connection already sent the most it may). */
  readonly overBudget: boolean
  /** The run the message names was announced on this connection. */
  readonly announcedHere: boolean
  /** That run has ended. */
  readonly ended: boolean
  /** The listener holds the run the message names, created. */
  readonly held: boolean
}

export type RefusalKind = 'hello-twice' | 'before-hello' | 'wrong-role' | 'over-budget' | 'not-announced-here' | 'ended' | 'not-held'

export interface Refusal {
  readonly kind: RefusalKind
  readonly code: ErrorCode
}

/** Why the message is refused in this state with these facts, or undefined when it is taken. */
export function refusalOf(state: ConnectionState, type: MessageType, facts: MessageFacts): Refusal | undefined {
  const rule = messageRules[type]
  if (!rule.states.includes(state)) {
    if (type === 'hello') return { kind: 'hello-twice', code: 'out-of-order' }
    return { kind: state === 'awaiting-hello' ? 'before-hello' : 'wrong-role', code: 'out-of-order' }
  }
  if (rule.budget !== undefined && facts.overBudget) return { kind: 'over-budget', code: 'limit' }
  if (rule.run?.must === 'announced-here') {
    if (!facts.announcedHere) return { kind: 'not-announced-here', code: 'unknown-run' }
    if (rule.run.ended !== undefined && facts.ended) return { kind: 'ended', code: rule.run.ended.code }
  }
  if (rule.run?.must === 'held' && !facts.held) return { kind: 'not-held', code: 'unknown-run' }
  return undefined
}

/** The refusal's words: runId is the run the message names, budgetMax the budget it passed. */
export function refusalText(type: MessageType, kind: RefusalKind, runId: string, budgetMax: number): string {
  const rule = messageRules[type]
  switch (kind) {
    case 'hello-twice':
      return 'hello sent twice'
    case 'before-hello':
      return `${type} before hello`
    case 'wrong-role':
      assert(rule.wrongRole !== undefined, `${type}: refused for its role without words for it`)
      return rule.wrongRole
    case 'over-budget':
      return `more than ${budgetMax} ${budgetWords[rule.budget!]} on one connection`
    case 'not-announced-here':
      return `${rule.run!.about} ${runId}, which this connection did not announce`
    case 'ended':
      return rule.run!.ended!.says(runId)
    case 'not-held':
      return `${rule.run!.about} ${runId}, which the listener does not hold`
  }
}
