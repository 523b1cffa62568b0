/**
 * What the peer on --server said, as one operating error: the listener's refusals that the operator
 * fixes by changing the command (unauthorized, path-busy, protocol-version) exit 2 with a hint, the
 * rest exit 3; the listener's words arrive over the network, so they are put on one line without
 * control characters and cut; a stranger on the port is named with its first line, quoted printably.
 * Frames here are built by hand (a 4-byte big-endian length, then msgpack), not with framing.ts.
 */
import { pack } from 'msgpackr'
import t from 'tap'
import { errorCodes, type ErrorCode } from '../../../src/protocol/messages.js'
import {
  firstFrameAbsurd,
  maxFirstFrameBytes,
  listenerRefusal,
  noAnswer,
  notAListener,
  startsWithListenerFrame,
} from '../../../src/protocol/listener-errors.js'
import { oneLine } from '../../../src/base/printable.js'
import { PlugcheckError } from '../../../src/base/errors.js'

const where = '192.0.2.7:5400'

/** A frame as the wire has it: length, then the msgpack body. */
function frame(message: object): Buffer {
  const body = pack(message)
  const header = Buffer.alloc(4)
  header.writeUInt32BE(body.length, 0)
  return Buffer.concat([header, body])
}

t.test('refusals the operator fixes exit 2 with a hint; every other code exits 3', async (t) => {
  const usage: ErrorCode[] = ['unauthorized', 'path-busy', 'protocol-version']
  for (const code of errorCodes) {
    const error = listenerRefusal(where, code, 'no')
    t.ok(error instanceof PlugcheckError, code)
    t.equal(error.exitCode, usage.includes(code) ? 2 : 3, code)
    t.equal(error.hint !== undefined, usage.includes(code), `${code}: a hint only for a usage refusal`)
  }
})

t.test('each kind of refusal in its words', async (t) => {
  const unauthorized = listenerRefusal(where, 'unauthorized', 'wrong token')
  t.equal(unauthorized.message, `the listener at ${where} refused: wrong token`)
  t.equal(unauthorized.hint, "pass the listener's --token with --token")
  t.equal(listenerRefusal(where, 'path-busy', 'busy').hint, 'wait for that run to end, or give --file another path')
  t.equal(listenerRefusal(where, 'protocol-version', 'v9').hint, 'run the same plugcheck version on both machines')
  t.equal(listenerRefusal(where, 'storage', 'EIO on journal').message, `the listener at ${where} failed: EIO on journal`)
  t.equal(
    listenerRefusal(where, 'limit', 'the listener takes no new runs: 100 GiB stored').message,
    `the listener at ${where} refused the run: the listener takes no new runs: 100 GiB stored`,
  )
  t.equal(
    listenerRefusal(where, 'limit', '--max-connections 64 reached').message,
    `the listener at ${where} refused the connection: --max-connections 64 reached`,
  )
  t.equal(listenerRefusal(where, 'unknown-run', 'no run 00').message, `the listener at ${where} refused: no run 00 (unknown-run)`)
})

t.test('the listener’s text cannot steer the terminal or break the line', async (t) => {
  const error = listenerRefusal(where, 'bad-frame', '\x1b[2J\x1b]0;owned\x07bad\r\nframe\x00\x7f here ')
  t.notMatch(error.message, /[\x00-\x1f\x7f]/, 'no control characters')
  t.equal(error.message, `the listener at ${where} refused: [2J ]0;owned bad frame here (bad-frame)`)
  // The run-refusal test looks at the text after flattening, so a line break cannot hide the prefix.
  t.match(listenerRefusal(where, 'limit', 'the listener\ntakes no new runs').message, /refused the run:/)
})

t.test('oneLine: C1 control characters (U+0080..U+009F, such as U+009B, a terminal’s CSI) do not get through either', async (t) => {
  t.equal(oneLine('a\u009b2Jb\u0085c\u0090d'), 'a 2Jb c d')
})

t.test('oneLine: runs of spaces and controls become one space, trimmed; cut after 300 characters', async (t) => {
  t.equal(oneLine('  a \t\t b\n\nc  '), 'a b c')
  t.equal(oneLine(''), '')
  t.equal(oneLine('x'.repeat(300)), 'x'.repeat(300))
  t.equal(oneLine('x'.repeat(301)), `${'x'.repeat(300)}...`)
  t.equal(oneLine(`${'y'.repeat(5000)}\n`).length, 303)
})

t.test('a stranger is named by its first line, printable, quotes turned', async (t) => {
  const http = notAListener(where, Buffer.from('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n'))
  t.equal(http.exitCode, 3)
  t.equal(http.message, `the peer at ${where} is not a plugcheck listener (it sent "HTTP/1.1 400 Bad Request")`)
  t.equal(http.hint, 'check --server: is `plugcheck listen` running on that port?')
  const ssh = notAListener(where, Buffer.from('SSH-2.0-OpenSSH_9.2\r\n'))
  t.match(ssh.message, /\(it sent "SSH-2\.0-OpenSSH_9\.2"\)$/)
  const binary = notAListener(where, Buffer.from([0x16, 0x03, 0x01, 0x22, 0x41, 0xff, 0x7f]))
  t.equal(binary.message.endsWith(`(it sent "...'A..")`), true, binary.message)
  t.equal(notAListener(where, Buffer.from('say "hi"')).message.endsWith(`(it sent "say 'hi'")`), true)
})

t.test('a stranger’s long first line is cut at 48 bytes and says so; a short whole one does not', async (t) => {
  const long = notAListener(where, Buffer.from('A'.repeat(100)))
  t.match(long.message, new RegExp(`it sent "${'A'.repeat(48)}\\.\\.\\."\\)$`))
  const short = notAListener(where, Buffer.from('hello'))
  t.match(short.message, /it sent "hello"\)$/)
  const lineThenMore = notAListener(where, Buffer.from(`hi\n${'B'.repeat(100)}`))
  t.match(lineThenMore.message, /it sent "hi"\)$/)
})

t.test('noAnswer: seconds, and a hint that depends on whether a welcome came', async (t) => {
  const before = noAnswer(where, 2500, false)
  t.equal(before.message, `the listener at ${where} did not answer within 2.5 s`)
  t.equal(before.hint, 'a plugcheck listener answers at once: is `plugcheck listen` the program on that port?')
  t.equal(before.exitCode, 3)
  t.equal(noAnswer(where, 30_000, true).hint, 'raise --listener-timeout if the listener is busy')
  t.match(noAnswer(where, 30_000, true).message, /within 30 s$/)
})

t.test('firstFrameAbsurd: a first length over the bound is no listener’s', async (t) => {
  t.ok(firstFrameAbsurd(Buffer.from('HTTP/1.1 200 OK')), '"HTTP" read as a length is about 1.2 GB')
  t.notOk(firstFrameAbsurd(Buffer.from('HTT')), 'three bytes are not a length yet')
  t.notOk(firstFrameAbsurd(Buffer.alloc(0)))
  const at = Buffer.alloc(4)
  at.writeUInt32BE(maxFirstFrameBytes, 0)
  t.notOk(firstFrameAbsurd(at), 'exactly the bound')
  at.writeUInt32BE(maxFirstFrameBytes + 1, 0)
  t.ok(firstFrameAbsurd(at), 'one over')
  t.notOk(firstFrameAbsurd(frame({ type: 'welcome', protocol: 5, listenerId: 'l' })))
})

t.test('startsWithListenerFrame: a whole welcome or error first, and nothing else', async (t) => {
  const welcome = frame({ type: 'welcome', protocol: 5, listenerId: 'lab-1', nowMs: 1_760_000_000_000 })
  const error = frame({ type: 'error', code: 'unauthorized', message: 'wrong token' })
  t.ok(startsWithListenerFrame(welcome))
  t.ok(startsWithListenerFrame(error))
  t.ok(startsWithListenerFrame(Buffer.concat([welcome, Buffer.from('garbage after it')])), 'what follows is the listener’s fault')
  t.notOk(startsWithListenerFrame(welcome.subarray(0, welcome.length - 1)), 'a frame cut short')
  t.notOk(startsWithListenerFrame(welcome.subarray(0, 3)), 'not even a length')
  t.notOk(startsWithListenerFrame(frame({ type: 'recorded', runId: '0123456789abcdef', throughSeq: 1 })), 'valid, but not a first answer')
  t.notOk(startsWithListenerFrame(frame({ type: 'welcome', protocol: 'five', listenerId: 'l' })), 'the schema refuses it')
  t.notOk(startsWithListenerFrame(frame({ type: 'error', code: 'no-such-code', message: 'x' })))
  t.notOk(startsWithListenerFrame(Buffer.from([0, 0, 0, 2, 0xc1, 0xc1])), 'not msgpack (0xc1 is never used)')
  t.notOk(startsWithListenerFrame(Buffer.from('HTTP/1.1 200 OK\r\n\r\n')))
  const huge = Buffer.alloc(4 + maxFirstFrameBytes + 1)
  huge.writeUInt32BE(maxFirstFrameBytes + 1, 0)
  t.notOk(startsWithListenerFrame(huge), 'a length over the bound, even with the bytes there')
})
