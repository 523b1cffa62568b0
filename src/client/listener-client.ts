/** Verify's conversation with the listener: hello, query, runs. Event-loop based; nothing here is timing-critical. */
import { connect } from 'node:net'
import { networkInterfaces } from 'node:os'
import { FrameDecoder, encodeFrame, maxServerFrameBytes } from '../protocol/framing.js'
import { protocolVersion, serverMessageSchema, type Claim, type ServerMessage, type StoredRun } from '../protocol/messages.js'
import { PlugcheckError, describeSystemError, runtimeError } from '../errors.js'
import { nodeConnectHost } from '../native/sockaddr.js'
import { formatEndpoint, resolveEndpoint, type Endpoint } from './endpoint.js'
import { listenerTimeoutMs as defaultListenerTimeoutMs } from './ack-channel.js'
import { firstBytesKept, firstFrameAbsurd, listenerRefusal, noAnswer, notAListener, oneLine, startsWithListenerFrame } from './listener-errors.js'

/** The listener's answer: the runs to judge, and every run on record for the queried host and path. */
export interface RunsReply {
  readonly runs: StoredRun[]
  readonly claims: Claim[]
}

/** Everything received is schema-checked (messages.ts bounds every field); a bad frame is a one-line error. */
export async function queryRuns(
  endpoint: Endpoint,
  token: string | undefined,
  query: { host: string; requestedPath: string; runId?: string },
  timeoutMs = defaultListenerTimeoutMs,
): Promise<RunsReply> {
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
  return new Promise<RunsReply>((resolve, reject) => {
    const socket = connect({ host: nodeConnectHost(address, networkInterfaces()), port: address.port })
    const decoder = new FrameDecoder(serverMessageSchema, maxServerFrameBytes)
    // Until the welcome arrives the peer may be anything (an HTTP server on the port): keep its first bytes to quote.
    let welcomed = false
    let firstBytes = Buffer.alloc(0)
    const settle = (error: Error): void => {
      socket.destroy()
      reject(error)
    }
    const fail = (message: string, hint?: string): void => settle(runtimeError(message, hint))
    socket.setTimeout(timeoutMs, () => settle(noAnswer(where, timeoutMs, welcomed)))
    socket.on('error', (error) => fail(`could not reach the listener at ${where}: ${describeSystemError(error)}`, 'is `plugcheck listen` running there? or use --acks DIR with a copy of its directory'))
    socket.on('close', () =>
      !welcomed && firstBytes.length > 0 ? settle(notAListener(where, firstBytes)) : fail(`the listener at ${where} closed the connection before answering`),
    )
    socket.on('connect', () => {
      socket.write(encodeFrame({ type: 'hello', protocol: protocolVersion, role: 'verifier', ...(token === undefined ? {} : { token }) }))
      socket.write(encodeFrame({ type: 'query', ...query }))
    })
    socket.on('data', (chunk: Buffer) => {
      if (!welcomed) {
        if (firstBytes.length < firstBytesKept) firstBytes = Buffer.concat([firstBytes, chunk.subarray(0, firstBytesKept - firstBytes.length)])
        if (firstFrameAbsurd(firstBytes)) return settle(notAListener(where, firstBytes))
      }
      let messages: ServerMessage[]
      try {
        messages = decoder.push(chunk)
      } catch (error) {
        if (!welcomed && !startsWithListenerFrame(firstBytes)) return settle(notAListener(where, firstBytes))
        return fail(`the listener at ${where} sent a bad frame: ${oneLine((error as Error).message)}`)
      }
      for (const message of messages) {
        if (!welcomed && message.type !== 'welcome' && message.type !== 'error') return settle(notAListener(where, firstBytes))
        if (message.type === 'welcome') welcomed = true
        if (message.type === 'error') return settle(listenerRefusal(where, message.code, message.message))
        if (message.type === 'runs') {
          socket.removeAllListeners('close')
          socket.end()
          return resolve({ runs: message.runs, claims: message.claims })
        }
      }
    })
  })
}
