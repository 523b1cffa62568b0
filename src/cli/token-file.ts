/**
 * --token-file PATH: the listener's token read from a file instead of the command line, where `ps`,
 * a shell's history and a systemd unit (world-readable) would show it. The agent's systemd unit gives
 * it the credential systemd copied from a root-only file (agent --print-service systemd).
 *
 * The file holds the token on one line, UTF-8 text; one line end after it (\n or \r\n) and a byte
 * order mark before it are not part of it. It is read with O_NONBLOCK and must be a regular file: a
 * FIFO nobody writes cannot hang a writer at boot.
 * A file that cannot be read or holds no token is a configuration error (exit 2), like a wrong token.
 */
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs'
import { PlugcheckError, describeSystemError, usageError } from '../base/errors.js'
import { maxTokenChars } from '../protocol/names.js'

/** A token of maxTokenChars characters of up to 4 bytes each, its line end, and one byte more to see a longer file. */
const maxTokenFileBytes = maxTokenChars * 4 + 3

/** The token from --token or --token-file (not both); undefined when neither is given. */
export function tokenOfFlags(flags: { readonly token?: string | undefined; readonly tokenFile?: string | undefined }): string | undefined {
  if (flags.token !== undefined && flags.tokenFile !== undefined)
    throw usageError('give the token once: --token T or --token-file PATH, not both')
  return flags.tokenFile === undefined ? flags.token : readTokenFile(flags.tokenFile)
}

/** The token a file holds: its one line, without the line end. */
export function readTokenFile(path: string): string {
  const hint =
    "the file holds the listener's token on one line (create it with: install -m 0600 /dev/null FILE, then write the token into it)"
  let fd: number
  try {
    fd = openSync(path, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0))
  } catch (error) {
    throw usageError(`could not read the token file ${path}: ${describeSystemError(error)}`, hint)
  }
  const bytes = Buffer.alloc(maxTokenFileBytes)
  let length = 0
  try {
    if (!fstatSync(fd).isFile()) throw usageError(`the token file ${path} is not a regular file`, hint)
    for (;;) {
      const n = readSync(fd, bytes, length, bytes.length - length, null)
      length += n
      if (n === 0 || length === bytes.length) break
    }
  } catch (error) {
    if (error instanceof PlugcheckError) throw error
    throw usageError(`could not read the token file ${path}: ${describeSystemError(error)}`, hint)
  } finally {
    closeSync(fd)
  }
  if (length === bytes.length)
    throw usageError(`the token file ${path} holds more than a token (at most ${maxTokenChars} characters)`, hint)
  let text: string
  try {
    // A UTF-8 byte order mark (Notepad, PowerShell) is no part of the token; UTF-16 is no UTF-8 text.
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(bytes.subarray(0, length))
  } catch {
    throw usageError(`the token file ${path} is not UTF-8 text (saved as UTF-16?)`, hint)
  }
  if (text.includes('\0')) throw usageError(`the token file ${path} is not UTF-8 text (saved as UTF-16?)`, hint)
  const token = text.replace(/\r?\n$/, '')
  if (token === '') throw usageError(`the token file ${path} is empty`, hint)
  if (/[\r\n]/.test(token)) throw usageError(`the token file ${path} holds more than one line`, hint)
  if (token.length > maxTokenChars) throw usageError(`the token in ${path} is longer than ${maxTokenChars} characters`, hint)
  return token
}
