/**
 * What the peer on --server said, turned into one sentence with the exit code of its kind. Shared by
 * the writer's blocking channel and verify's query, so both name a stranger on the port and map the
 * listener's refusals the same way: a refusal the operator fixes by changing the command or the setup
 * is a usage error (2), everything else a runtime failure (3).
 */
import { FrameDecoder, frameHeaderBytes } from './framing.js'
import { serverMessageSchema, type ErrorCode } from './messages.js'
import { runtimeError, usageError, type PlugcheckError } from '../base/errors.js'
import { oneLine } from '../base/printable.js'

/** A welcome (or an error) is a few dozen bytes: a first frame claiming more is not from a listener. */
export const maxFirstFrameBytes = 8 * 1024
/** How much of a stranger's first bytes we quote. */
const maxQuotedBytes = 48
/** How much of the peer's first bytes we keep: enough to hold a whole welcome frame. */
export const firstBytesKept = 512

/** Refusals the operator fixes by changing the command or the setup: exit 2. */
const usageErrorCodes: ReadonlySet<ErrorCode> = new Set(['unauthorized', 'path-busy', 'protocol-version'])
const hints: Partial<Record<ErrorCode, string>> = {
  unauthorized: "pass the listener's --token with --token",
  'path-busy': 'wait for that run to end, or give --file another path',
  'protocol-version': 'run the same plugcheck version on both machines',
}

/** The listener's error frame as an operating error of the right kind, in its own words. */
export function listenerRefusal(endpointText: string, code: ErrorCode, text: string): PlugcheckError {
  const said = oneLine(text)
  if (usageErrorCodes.has(code)) return usageError(`the listener at ${endpointText} refused: ${said}`, hints[code])
  if (code === 'storage') return runtimeError(`the listener at ${endpointText} failed: ${said}`)
  // A bound of the listener's store (quotas.ts): the run, not the connection, was refused.
  if (code === 'limit' && said.startsWith('the listener takes no new runs'))
    return runtimeError(`the listener at ${endpointText} refused the run: ${said}`)
  if (code === 'limit') return runtimeError(`the listener at ${endpointText} refused the connection: ${said}`)
  return runtimeError(`the listener at ${endpointText} refused: ${said} (${code})`)
}

/** A peer whose first bytes do not frame like a listener's answer. */
export function notAListener(endpointText: string, firstBytes: Buffer): PlugcheckError {
  return runtimeError(
    `the peer at ${endpointText} is not a plugcheck listener (it sent "${quote(firstBytes)}")`,
    'check --server: is `plugcheck listen` running on that port?',
  )
}

/** The peer said nothing in time. Before a welcome that may be a server of another protocol waiting for its request. */
export function noAnswer(endpointText: string, timeoutMs: number, welcomed: boolean): PlugcheckError {
  return runtimeError(
    `the listener at ${endpointText} did not answer within ${timeoutMs / 1000} s`,
    welcomed
      ? 'raise --listener-timeout if the listener is busy'
      : 'a plugcheck listener answers at once: is `plugcheck listen` the program on that port?',
  )
}

/** True when the first bytes already show the peer is not a listener ("HTTP" read as a frame length). */
export function firstFrameAbsurd(firstBytes: Buffer): boolean {
  return firstBytes.length >= frameHeaderBytes && firstBytes.readUInt32BE(0) > maxFirstFrameBytes
}

/**
 * True when the first bytes hold a complete frame that is a listener's welcome or error: a later bad
 * frame in the same read is then a listener's fault, not a stranger's.
 */
export function startsWithListenerFrame(firstBytes: Buffer): boolean {
  if (firstBytes.length < frameHeaderBytes) return false
  const length = firstBytes.readUInt32BE(0)
  if (length > maxFirstFrameBytes || firstBytes.length < frameHeaderBytes + length) return false
  try {
    const [first] = new FrameDecoder(serverMessageSchema, maxFirstFrameBytes).push(firstBytes.subarray(0, frameHeaderBytes + length))
    return first?.type === 'welcome' || first?.type === 'error'
  } catch {
    return false
  }
}

/** A stranger's first bytes, up to the end of its first line, as printable text. */
function quote(bytes: Buffer): string {
  const text = bytes.subarray(0, maxQuotedBytes).toString('latin1')
  const firstLine = text.split(/\r|\n/)[0]!
  return (
    firstLine.replace(/[^\x20-\x7e]/g, '.').replace(/"/g, "'") +
    (firstLine.length < text.length || bytes.length < maxQuotedBytes ? '' : '...')
  )
}
