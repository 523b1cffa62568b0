/**
 * A verifier's conversations with the listener: hello, then query -> runs (verify), list -> run-list
 * (`plugcheck runs`), verdict -> verdict-ok (the agent reports what verify found), campaign-query ->
 * campaign-state. Event-loop based; nothing here is timing-critical. Everything received is
 * schema-checked (messages.ts bounds every field); a bad frame, a refusal or silence is a one-line error.
 */
import { connect, type Socket } from 'node:net'
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
  startsWithListenerFrame,
} from '../../protocol/listener-errors.js'
import { oneLine } from '../../base/printable.js'

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
    if (message.type !== 'runs') return false
    done({ runs: message.runs, claims: message.claims })
    return true
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
    if (message.type !== 'run-list') return false
    done({ runs: message.runs, truncated: message.truncated })
    return true
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
        if (message.type !== 'verdict-ok') return false
        const left = waiting.get(message.runId) ?? 0
        if (left === 0) {
          fail(`the listener at ${formatEndpoint(endpoint)} confirmed a verdict for run ${message.runId}, which was not reported`)
          return true
        }
        waiting.set(message.runId, left - 1)
        if (--outstanding === 0) done()
        return true
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
    if (message.type !== 'campaign-state') return false
    done(message.campaign)
    return true
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
    if (message.type !== 'span-page') return false
    if (message.runId !== run.runId || message.afterSeq !== afterSeq) {
      fail(
        `the listener at ${where} sent spans of run ${message.runId} after seq ${message.afterSeq}, asked for run ${run.runId} after seq ${afterSeq}`,
      )
      return true
    }
    let through: number | null
    try {
      through = onPage(message.spans, afterSeq)
    } catch (error) {
      fail(`the listener at ${where} sent bad spans of run ${run.runId}: ${(error as Error).message}`)
      return true
    }
    if (through === null || through >= run.throughSeq) done()
    else {
      afterSeq = through
      send(ask(afterSeq))
    }
    return true
  })
}

/** Bytes of an answer still arriving that count as progress (converse's answer timer). */
const answerProgressBytes = 1024 * 1024

/**
 * Frames a conversation takes that answer nothing it asked (another welcome, a 'recorded' meant for a
 * writer): a listener sends none, so more than this is a broken or hostile peer, refused at once.
 */
export const maxNonAnswerFrames = 64

/** What the listener takes from one connection (its maxVerdictsPerConnection). */
export const maxVerdictsPerConversation = 1024

/**
 * What converse hands each message to: done with the value, fail with a one-line error, or send another
 * request. Returns whether the message answers (part of) what was asked: only an answer restarts the
 * wait for the next one; any other message is counted against maxNonAnswerFrames and extends nothing.
 */
type OnMessage<T> = (
  message: ServerMessage,
  done: (value: T) => void,
  fail: (message: string) => void,
  send: (request: ClientMessage) => void,
) => boolean

/**
 * One verifier connection: hello, the requests, then onMessage for each message after the welcome
 * until it calls done (the answer) or fail. The socket's timeout bounds every wait for the listener.
 */
async function converse<T>(
  endpoint: Endpoint,
  token: string | undefined,
  timeoutMs: number,
  requests: readonly ClientMessage[],
  onMessage: OnMessage<T>,
  nothingToAsk = false,
): Promise<T> {
  if (nothingToAsk) return undefined as T
  const where = formatEndpoint(endpoint)
  const address = await resolveListener(endpoint, where)
  return new Promise<T>((resolve, reject) => {
    const socket = connect({ host: nodeConnectHost(address, networkInterfaces()), port: address.port })
    const conversation = new Conversation<T>(socket, where, timeoutMs, onMessage, resolve, reject)
    socket.setTimeout(timeoutMs, () => conversation.settle(noAnswer(where, timeoutMs, conversation.welcomed)))
    conversation.awaitAnswer()
    socket.on('error', (error) =>
      conversation.fail(
        `could not reach the listener at ${where}: ${describeSystemError(error)}`,
        'is `plugcheck listen` running there? or use --acks DIR with a copy of its directory',
      ),
    )
    socket.on('close', () => conversation.closed())
    socket.on('connect', () => {
      socket.write(helloFrame(token))
      for (const request of requests) socket.write(encodeFrame(request))
    })
    socket.on('data', (chunk: Buffer) => conversation.receive(chunk))
  })
}

/**
 * The writer's address, resolved the same way: the first the OS resolver gives, a mapped address
 * as IPv4, the scope as an interface. Node's own lookup could pick another (it races the
 * families), and its parser drops a numeric scope on POSIX (nodeConnectHost says why).
 */
async function resolveListener(endpoint: Endpoint, where: string): Promise<Awaited<ReturnType<typeof resolveEndpoint>>> {
  try {
    return await resolveEndpoint(endpoint)
  } catch (error) {
    if (error instanceof PlugcheckError) throw error
    throw runtimeError(`could not resolve listener ${where}: ${describeSystemError(error)}`)
  }
}

/** The verifier's hello: the token when there is one, and this machine when it has a boot id. */
function helloFrame(token: string | undefined): Uint8Array {
  const machine = thisMachine()
  return encodeFrame({
    type: 'hello',
    protocol: protocolVersion,
    role: 'verifier',
    ...(token === undefined ? {} : { token }),
    ...(machine === undefined ? {} : { machine }),
  })
}

/** One connection's state: whether the peer has shown itself a listener, the answer timer, and the end of converse's promise. */
class Conversation<T> {
  /** Until the welcome arrives the peer may be anything (an HTTP server on the port): keep its first bytes to quote. */
  welcomed = false
  private settled = false
  private firstBytes = Buffer.alloc(0)
  private readonly decoder = new FrameDecoder(serverMessageSchema, maxServerFrameBytes)
  // The socket's timeout is an idle timeout, reset by any frame: a listener that keeps sending frames
  // that answer nothing (a welcome again and again) would hold verify for ever. This one is reset
  // only by an answer (a message onMessage says answers what was asked) or by a large answer still arriving (a MiB
  // more of it: a slow link), so every wait for one is bounded.
  private answerTimer: NodeJS.Timeout | undefined
  private bytesSinceAnswer = 0
  private nonAnswers = 0

  constructor(
    private readonly socket: Socket,
    private readonly where: string,
    private readonly timeoutMs: number,
    private readonly onMessage: OnMessage<T>,
    private readonly resolve: (value: T) => void,
    private readonly reject: (error: Error) => void,
  ) {}

  /** (Re)starts the wait for an answer. */
  awaitAnswer(): void {
    this.bytesSinceAnswer = 0
    clearTimeout(this.answerTimer)
    this.answerTimer = setTimeout(() => this.settle(noAnswer(this.where, this.timeoutMs, this.welcomed)), this.timeoutMs)
  }

  /** Ends the conversation with an error. */
  settle(error: Error): void {
    this.settled = true
    clearTimeout(this.answerTimer)
    this.socket.destroy()
    this.reject(error)
  }

  fail(message: string, hint?: string): void {
    this.settle(runtimeError(message, hint))
  }

  /** Ends the conversation with the answer. */
  done(value: T): void {
    this.settled = true
    clearTimeout(this.answerTimer)
    this.socket.removeAllListeners('close')
    this.socket.end()
    this.resolve(value)
  }

  /** The peer closed before the answer: a listener's words, or a stranger's first bytes quoted. */
  closed(): void {
    if (!this.welcomed && this.firstBytes.length > 0) this.settle(notAListener(this.where, this.firstBytes))
    else this.fail(`the listener at ${this.where} closed the connection before answering`)
  }

  /** Bytes from the peer: its first ones kept until the welcome, then whole frames decoded and taken. */
  receive(chunk: Buffer): void {
    if (this.settled) return
    if (!this.welcomed) {
      if (this.firstBytes.length < firstBytesKept)
        this.firstBytes = Buffer.concat([this.firstBytes, chunk.subarray(0, firstBytesKept - this.firstBytes.length)])
      if (firstFrameAbsurd(this.firstBytes)) {
        this.settle(notAListener(this.where, this.firstBytes))
        return
      }
    }
    let messages: ServerMessage[]
    try {
      messages = this.decoder.push(chunk)
      // Only the bytes of a frame still arriving (no whole frame in them) are progress: a flood of
      // frames that answer nothing never is.
      if (messages.length === 0) this.bytesSinceAnswer += chunk.length
      if (this.bytesSinceAnswer >= answerProgressBytes) this.awaitAnswer()
    } catch (error) {
      if (!this.welcomed && !startsWithListenerFrame(this.firstBytes)) {
        this.settle(notAListener(this.where, this.firstBytes))
        return
      }
      this.fail(`the listener at ${this.where} sent a bad frame: ${oneLine((error as Error).message)}`)
      return
    }
    this.take(messages)
  }

  /** The welcome (its clock kept), a refusal, or an answer for onMessage; anything else first is no listener's. */
  private take(messages: readonly ServerMessage[]): void {
    for (const message of messages) {
      if (this.settled) return
      if (!this.welcomed && message.type !== 'welcome' && message.type !== 'error') {
        this.settle(notAListener(this.where, this.firstBytes))
        return
      }
      if (message.type === 'welcome' && this.welcomed) {
        this.nonAnswer(message.type)
        continue
      }
      if (message.type === 'welcome') {
        this.welcomed = true
        latestListenerClock = listenerClockOf(message.nowMs, performance.now()) ?? latestListenerClock
        continue
      }
      if (message.type === 'error') {
        this.settle(listenerRefusal(this.where, message.code, message.message))
        return
      }
      const answered = this.onMessage(
        message,
        (value) => this.done(value),
        (text) => this.fail(text),
        (request) => void this.socket.write(encodeFrame(request)),
      )
      // Only an answer restarts the wait (a drip of other frames every second would hold it for ever).
      if (!answered) this.nonAnswer(message.type)
      else if (!this.settled) this.awaitAnswer()
    }
  }

  /** A frame that answers nothing asked: it extends no wait, and past maxNonAnswerFrames ends the conversation. */
  private nonAnswer(type: ServerMessage['type']): void {
    if (++this.nonAnswers <= maxNonAnswerFrames) return
    this.fail(`the listener at ${this.where} sent more than ${maxNonAnswerFrames} frames that answer nothing asked (the last: '${type}')`)
  }
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
