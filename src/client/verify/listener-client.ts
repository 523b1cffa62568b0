/**
 * A verifier's conversations with the listener: hello, then query -> runs (verify), list -> run-list
 * (`plugcheck runs`), verdict -> verdict-ok (the agent reports what verify found), campaign-query ->
 * campaign-state. Event-loop based; nothing here is timing-critical. Everything received is
 * schema-checked (messages.ts bounds every field); a bad frame, a refusal or silence is a one-line error.
 */
import { connect } from 'node:net'
import { performance } from 'node:perf_hooks'
import { hostname, networkInterfaces } from 'node:os'
import { FrameDecoder, encodeFrame, maxServerFrameBytes } from '../../protocol/framing.js'
import {
  machineSchema,
  protocolVersion,
  serverMessageSchema,
  type CampaignState,
  type Claim,
  type ClientMessage,
  type Machine,
  type RunSummary,
  type ServerMessage,
  type StoredRun,
  type StoredVerdict,
} from '../../protocol/messages.js'
import { PlugcheckError, describeSystemError, runtimeError } from '../../base/errors.js'
import { nodeConnectHost } from '../../native/sockaddr.js'
import { nativePort } from '../../native/index.js'
import { formatEndpoint, resolveEndpoint, type Endpoint } from '../../protocol/endpoint.js'
import { listenerTimeoutMs as defaultListenerTimeoutMs } from '../../protocol/endpoint.js'
import { epochAt, listenerClockOf, type TimeBase } from '../run-clock.js'
import {
  firstBytesKept,
  firstFrameAbsurd,
  listenerRefusal,
  noAnswer,
  notAListener,
  oneLine,
  startsWithListenerFrame,
} from '../../protocol/listener-errors.js'

/**
 * The listener's clock as its latest welcome gave it (with the monotonic time it arrived), when it
 * sent a real time: a verdict is stamped with it, so the campaign compares it with its own cut time
 * and a verifier whose clock is at 1970 still reports (run-clock.ts).
 */
let latestListenerClock: TimeBase | undefined

/** The listener's time now, by the latest welcome of any conversation; undefined when none gave one. */
export function listenerNowMs(): number | undefined {
  return latestListenerClock === undefined ? undefined : Math.round(epochAt(latestListenerClock))
}

/** The listener's answer: the runs to judge, and every run on record for the queried host and path. */
export interface RunsReply {
  readonly runs: StoredRun[]
  readonly claims: Claim[]
}

/** Verify's question: the runs to judge for a host and path (or one run by id), and the claims on it. */
export async function queryRuns(
  endpoint: Endpoint,
  token: string | undefined,
  query: { host: string; requestedPath: string; runId?: string },
  timeoutMs = defaultListenerTimeoutMs,
): Promise<RunsReply> {
  return converse<RunsReply>(endpoint, token, timeoutMs, [{ type: 'query', ...query }], (message, done) => {
    if (message.type === 'runs') done({ runs: message.runs, claims: message.claims })
  })
}

/** Every run the listener holds, newest first (only one campaign's when named); truncated when it holds more than it lists. */
export async function listRuns(
  endpoint: Endpoint,
  token: string | undefined,
  timeoutMs = defaultListenerTimeoutMs,
  campaign?: string,
): Promise<{ runs: RunSummary[]; truncated: boolean }> {
  return converse(endpoint, token, timeoutMs, [{ type: 'list', ...(campaign === undefined ? {} : { campaign }) }], (message, done) => {
    if (message.type === 'run-list') done({ runs: message.runs, truncated: message.truncated })
  })
}

/**
 * Reports verdicts to the listener; resolves once it has stored every one (a verdict-ok for each).
 * At most maxVerdictsPerConversation per connection: more are sent on further connections.
 */
export async function reportVerdicts(
  endpoint: Endpoint,
  token: string | undefined,
  timeoutMs: number,
  verdicts: ReadonlyArray<{ runId: string; result: StoredVerdict }>,
): Promise<void> {
  for (let i = 0; i < verdicts.length; i += maxVerdictsPerConversation) {
    const batch = verdicts.slice(i, i + maxVerdictsPerConversation)
    // A listener that stored a verdict answers with its run id; the same run may be reported twice.
    const waiting = new Map<string, number>()
    for (const { runId } of batch) waiting.set(runId, (waiting.get(runId) ?? 0) + 1)
    let outstanding = batch.length
    await converse<void>(
      endpoint,
      token,
      timeoutMs,
      batch.map(({ runId, result }) => ({ type: 'verdict', runId, result })),
      (message, done, fail) => {
        if (message.type !== 'verdict-ok') return
        const left = waiting.get(message.runId) ?? 0
        if (left === 0)
          return fail(`the listener at ${formatEndpoint(endpoint)} confirmed a verdict for run ${message.runId}, which was not reported`)
        waiting.set(message.runId, left - 1)
        if (--outstanding === 0) done()
      },
      batch.length === 0,
    )
  }
}

/** The listener's campaign, or null when it runs none. */
export async function queryCampaign(
  endpoint: Endpoint,
  token: string | undefined,
  timeoutMs = defaultListenerTimeoutMs,
): Promise<CampaignState | null> {
  return converse(endpoint, token, timeoutMs, [{ type: 'campaign-query' }], (message, done) => {
    if (message.type === 'campaign-state') done(message.campaign)
  })
}

/**
 * The spans of a run that a runs reply left out, read page by page on one connection: the spans after
 * seq run.afterSeq first, then after the seq onPage says it has read through, until onPage says it has
 * what it needs (null) or the listener fails. onPage checks the page (the listener may send anything) and
 * throws an Error saying what is wrong; that ends the read with a one-line error (exit 3).
 */
export async function readSpanPages(
  endpoint: Endpoint,
  token: string | undefined,
  timeoutMs: number,
  run: { runId: string; afterSeq: number; throughSeq: number },
  onPage: (page: Uint8Array, afterSeq: number) => number | null,
): Promise<void> {
  const where = formatEndpoint(endpoint)
  const ask = (afterSeq: number): ClientMessage => ({ type: 'spans', runId: run.runId, afterSeq, throughSeq: run.throughSeq })
  let afterSeq = run.afterSeq
  await converse<void>(endpoint, token, timeoutMs, [ask(afterSeq)], (message, done, fail, send) => {
    if (message.type !== 'span-page') return
    if (message.runId !== run.runId || message.afterSeq !== afterSeq) {
      return fail(
        `the listener at ${where} sent spans of run ${message.runId} after seq ${message.afterSeq}, asked for run ${run.runId} after seq ${afterSeq}`,
      )
    }
    let through: number | null
    try {
      through = onPage(message.spans, afterSeq)
    } catch (error) {
      return fail(`the listener at ${where} sent bad spans of run ${run.runId}: ${(error as Error).message}`)
    }
    if (through === null || through >= run.throughSeq) return done()
    afterSeq = through
    send(ask(afterSeq))
  })
}

/** Bytes of an answer still arriving that count as progress (converse's answer timer). */
const answerProgressBytes = 1024 * 1024

/** What the listener takes from one connection (its maxVerdictsPerConnection). */
export const maxVerdictsPerConversation = 1024

/**
 * One verifier connection: hello, the requests, then onMessage for each message after the welcome
 * until it calls done (the answer) or fail. The socket's timeout bounds every wait for the listener.
 */
async function converse<T>(
  endpoint: Endpoint,
  token: string | undefined,
  timeoutMs: number,
  requests: readonly ClientMessage[],
  onMessage: (
    message: ServerMessage,
    done: (value: T) => void,
    fail: (message: string) => void,
    send: (request: ClientMessage) => void,
  ) => void,
  nothingToAsk = false,
): Promise<T> {
  if (nothingToAsk) return undefined as T
  const where = formatEndpoint(endpoint)
  // The writer's address, resolved the same way: the first the OS resolver gives, a mapped address
  // as IPv4, the scope as an interface. Node's own lookup could pick another (it races the
  // families), and its parser drops a numeric scope on POSIX (nodeConnectHost says why).
  let address
  try {
    address = await resolveEndpoint(endpoint)
  } catch (error) {
    if (error instanceof PlugcheckError) throw error
    throw runtimeError(`could not resolve listener ${where}: ${describeSystemError(error)}`)
  }
  return new Promise<T>((resolve, reject) => {
    const socket = connect({ host: nodeConnectHost(address, networkInterfaces()), port: address.port })
    const decoder = new FrameDecoder(serverMessageSchema, maxServerFrameBytes)
    // Until the welcome arrives the peer may be anything (an HTTP server on the port): keep its first bytes to quote.
    let welcomed = false
    let settled = false
    let firstBytes = Buffer.alloc(0)
    // The socket's timeout is an idle timeout, reset by any frame: a listener that keeps sending frames
    // that answer nothing (a welcome again and again) would hold verify for ever. This one is reset
    // only by an answer (a message handed to onMessage) or by a large answer still arriving (a MiB
    // more of it: a slow link), so every wait for one is bounded.
    let answerTimer: NodeJS.Timeout | undefined
    let bytesSinceAnswer = 0
    const awaitAnswer = (): void => {
      bytesSinceAnswer = 0
      clearTimeout(answerTimer)
      answerTimer = setTimeout(() => settle(noAnswer(where, timeoutMs, welcomed)), timeoutMs)
    }
    const settle = (error: Error): void => {
      settled = true
      clearTimeout(answerTimer)
      socket.destroy()
      reject(error)
    }
    const fail = (message: string, hint?: string): void => settle(runtimeError(message, hint))
    const done = (value: T): void => {
      settled = true
      clearTimeout(answerTimer)
      socket.removeAllListeners('close')
      socket.end()
      resolve(value)
    }
    socket.setTimeout(timeoutMs, () => settle(noAnswer(where, timeoutMs, welcomed)))
    awaitAnswer()
    socket.on('error', (error) =>
      fail(
        `could not reach the listener at ${where}: ${describeSystemError(error)}`,
        'is `plugcheck listen` running there? or use --acks DIR with a copy of its directory',
      ),
    )
    socket.on('close', () =>
      !welcomed && firstBytes.length > 0
        ? settle(notAListener(where, firstBytes))
        : fail(`the listener at ${where} closed the connection before answering`),
    )
    socket.on('connect', () => {
      const machine = thisMachine()
      socket.write(
        encodeFrame({
          type: 'hello',
          protocol: protocolVersion,
          role: 'verifier',
          ...(token === undefined ? {} : { token }),
          ...(machine === undefined ? {} : { machine }),
        }),
      )
      for (const request of requests) socket.write(encodeFrame(request))
    })
    socket.on('data', (chunk: Buffer) => {
      if (settled) return
      if (!welcomed) {
        if (firstBytes.length < firstBytesKept)
          firstBytes = Buffer.concat([firstBytes, chunk.subarray(0, firstBytesKept - firstBytes.length)])
        if (firstFrameAbsurd(firstBytes)) return settle(notAListener(where, firstBytes))
      }
      let messages: ServerMessage[]
      try {
        messages = decoder.push(chunk)
        // Only the bytes of a frame still arriving (no whole frame in them) are progress: a flood of
        // frames that answer nothing never is.
        if (messages.length === 0) bytesSinceAnswer += chunk.length
        if (bytesSinceAnswer >= answerProgressBytes) awaitAnswer()
      } catch (error) {
        if (!welcomed && !startsWithListenerFrame(firstBytes)) return settle(notAListener(where, firstBytes))
        return fail(`the listener at ${where} sent a bad frame: ${oneLine((error as Error).message)}`)
      }
      for (const message of messages) {
        if (settled) return
        if (!welcomed && message.type !== 'welcome' && message.type !== 'error') return settle(notAListener(where, firstBytes))
        if (message.type === 'welcome') {
          welcomed = true
          latestListenerClock = listenerClockOf(message.nowMs, performance.now()) ?? latestListenerClock
          continue
        }
        if (message.type === 'error') return settle(listenerRefusal(where, message.code, message.message))
        awaitAnswer()
        onMessage(
          message,
          done,
          (text) => fail(text),
          (request) => void socket.write(encodeFrame(request)),
        )
      }
    })
  })
}

/**
 * This machine's host name and boot id, said in every verifier hello: after a power cut the listener
 * may still hold the dead writer's connection open, and learns here that its machine came back (so
 * the runs of the old boot end, and their verdicts are taken). Nothing where there is no boot id.
 */
function thisMachine(): Machine | undefined {
  let bootId: string | null
  try {
    bootId = nativePort().bootId()
  } catch {
    return undefined
  }
  const machine = machineSchema.safeParse({ host: hostname(), bootId })
  return machine.success ? machine.data : undefined
}
