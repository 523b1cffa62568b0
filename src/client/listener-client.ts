/** Verify's conversation with the listener: hello, query, runs. Event-loop based; nothing here is timing-critical. */
import { connect } from 'node:net'
import { FrameDecoder, encodeFrame, maxServerFrameBytes } from '../protocol/framing.js'
import { protocolVersion, serverMessageSchema, type Claim, type ServerMessage, type StoredRun } from '../protocol/messages.js'
import { describeSystemError, runtimeError } from '../errors.js'
import { formatEndpoint, type Endpoint } from './endpoint.js'
import { listenerTimeoutMs } from './ack-channel.js'

/** The listener's answer: the runs to judge, and every run on record for the queried host and path. */
export interface RunsReply {
  readonly runs: StoredRun[]
  readonly claims: Claim[]
}

/** Everything received is schema-checked (messages.ts bounds every field); a bad frame is a one-line error. */
export async function queryRuns(endpoint: Endpoint, token: string | undefined, query: { host: string; requestedPath: string; runId?: string }): Promise<RunsReply> {
  const where = formatEndpoint(endpoint)
  return new Promise<RunsReply>((resolve, reject) => {
    const socket = connect({ host: endpoint.host, port: endpoint.port })
    const decoder = new FrameDecoder(serverMessageSchema, maxServerFrameBytes)
    const fail = (message: string, hint?: string): void => {
      socket.destroy()
      reject(runtimeError(message, hint))
    }
    socket.setTimeout(listenerTimeoutMs, () => fail(`the listener at ${where} did not answer within ${listenerTimeoutMs / 1000} s`))
    socket.on('error', (error) => fail(`could not reach the listener at ${where}: ${describeSystemError(error)}`, 'is `plugcheck listen` running there? or use --acks DIR with a copy of its directory'))
    socket.on('close', () => fail(`the listener at ${where} closed the connection before answering`))
    socket.on('connect', () => {
      socket.write(encodeFrame({ type: 'hello', protocol: protocolVersion, role: 'verifier', ...(token === undefined ? {} : { token }) }))
      socket.write(encodeFrame({ type: 'query', ...query }))
    })
    socket.on('data', (chunk) => {
      let messages: ServerMessage[]
      try {
        messages = decoder.push(chunk)
      } catch (error) {
        return fail(`the listener at ${where} sent a bad frame: ${oneLine((error as Error).message)}`)
      }
      for (const message of messages) {
        if (message.type === 'error') return fail(`the listener refused: ${message.message} (${message.code})`)
        if (message.type === 'runs') {
          socket.removeAllListeners('close')
          socket.end()
          return resolve({ runs: message.runs, claims: message.claims })
        }
      }
    })
  })
}

function oneLine(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim()
  return flat.length > 300 ? `${flat.slice(0, 300)}...` : flat
}
