/**
 * The listener's message rules (src/server/listen/message-rules.ts) over every input: each state of a
 * connection (before hello, writer, verifier), each client message, and every combination of what the
 * listener knows (over budget or not, the run announced here or not, ended or not, held or not),
 * against the rules as listener.ts wrote them case by case before they became a table (copied below):
 * the same refusal, with the same code and words, or none. Then that the table names every message of
 * the wire schema once.
 */
import t from 'tap'
import { clientMessageSchema, type ErrorCode } from '../../../../src/protocol/messages.js'
import {
  connectionStates,
  messageRules,
  messageTypes,
  refusalOf,
  refusalText,
  type ConnectionState,
  type MessageFacts,
  type MessageType,
} from '../../../../src/server/listen/message-rules.js'
import {
  maxQueriesPerConnection,
  maxRunsPerConnection,
  maxSpanPagesPerConnection,
  maxVerdictsPerConnection,
} from '../../../../src/server/listen/listener-options.js'

const runId = '0123456789abcdef'

/** listener.ts's handle() and handleServed() before the table: the first check that throws, or null. */
function before(state: ConnectionState, type: MessageType, f: MessageFacts): [ErrorCode, string] | null {
  if (type === 'hello') return state === 'awaiting-hello' ? null : ['out-of-order', 'hello sent twice']
  if (state === 'awaiting-hello') return ['out-of-order', `${type} before hello`]
  const writerOnly = (words: string): [ErrorCode, string] | null => (state !== 'writer' ? ['out-of-order', words] : null)
  const verifierOnly = (words: string): [ErrorCode, string] | null => (state !== 'verifier' ? ['out-of-order', words] : null)
  const over = (max: number, what: string): [ErrorCode, string] | null =>
    f.overBudget ? ['limit', `more than ${max} ${what} on one connection`] : null
  const announced = (about: string): [ErrorCode, string] | null =>
    !f.announcedHere ? ['unknown-run', `${about} ${runId}, which this connection did not announce`] : null
  const held = (about: string): [ErrorCode, string] | null =>
    !f.held ? ['unknown-run', `${about} ${runId}, which the listener does not hold`] : null
  switch (type) {
    case 'run':
      return writerOnly('run announced on a verifier connection') ?? over(maxRunsPerConnection, 'runs announced')
    case 'ack':
      return announced('ack for run') ?? (f.ended ? ['out-of-order', `ack for run ${runId} after its end`] : null)
    case 'end':
      return announced('end for run') ?? (f.ended ? ['limit', `end of run ${runId} sent twice`] : null)
    case 'steady':
      return (
        writerOnly('steady sent on a verifier connection') ??
        announced('steady for run') ??
        (f.ended ? ['out-of-order', `steady for run ${runId} after its end`] : null)
      )
    case 'verdict':
      return verifierOnly('verdict sent on a writer connection') ?? over(maxVerdictsPerConnection, 'verdicts') ?? held('verdict for run')
    case 'list':
      return verifierOnly('list sent on a writer connection') ?? over(maxQueriesPerConnection, 'queries')
    case 'campaign-query':
      return verifierOnly('campaign-query sent on a writer connection') ?? over(maxQueriesPerConnection, 'queries')
    case 'query':
      return over(maxQueriesPerConnection, 'queries')
    case 'spans':
      return verifierOnly('spans asked on a writer connection') ?? over(maxSpanPagesPerConnection, 'span pages') ?? held('spans of run')
  }
}

const budgetMaxes = {
  runs: maxRunsPerConnection,
  queries: maxQueriesPerConnection,
  verdicts: maxVerdictsPerConnection,
  'span-pages': maxSpanPagesPerConnection,
}

function* everyFacts(): Generator<MessageFacts> {
  for (const overBudget of [false, true])
    for (const announcedHere of [false, true])
      for (const ended of [false, true]) for (const held of [false, true]) yield { overBudget, announcedHere, ended, held }
}

t.test(
  'every state, message and combination of facts: the refusal (code and words) listener.ts gave before the table, or none',
  async (t) => {
    let checked = 0
    const wrong: string[] = []
    for (const state of connectionStates) {
      for (const type of messageTypes) {
        for (const facts of everyFacts()) {
          const refusal = refusalOf(state, type, facts)
          const budget = messageRules[type].budget
          const got =
            refusal === undefined
              ? null
              : [refusal.code, refusalText(type, refusal.kind, runId, budget === undefined ? 0 : budgetMaxes[budget])]
          const want = before(state, type, facts)
          if (JSON.stringify(got) !== JSON.stringify(want))
            wrong.push(`${state} ${type} ${JSON.stringify(facts)}: ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`)
          checked++
        }
      }
    }
    t.same(wrong, [])
    t.equal(checked, 3 * 10 * 16)
  },
)

t.test('the table names every client message of the wire schema exactly once', async (t) => {
  const wire = clientMessageSchema.options.map((o) => o.shape.type.value as string).sort()
  t.same([...messageTypes].sort(), wire)
  t.equal(new Set(messageTypes).size, messageTypes.length)
  for (const type of messageTypes) {
    const rule = messageRules[type]
    t.ok(rule.states.length > 0, `${type} is taken in some state`)
    // A message one role may not send says so in its own words.
    const roles = rule.states.filter((s) => s !== 'awaiting-hello')
    if (type !== 'hello' && roles.length < 2) t.type(rule.wrongRole, 'string', `${type}: words for the other role`)
  }
})
