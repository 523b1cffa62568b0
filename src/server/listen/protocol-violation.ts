/** A message the listener refuses: the peer gets an error frame with the code and text, and the connection is closed. */
import type { ErrorCode } from '../../protocol/messages.js'

export class ProtocolViolation extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message)
  }
}
