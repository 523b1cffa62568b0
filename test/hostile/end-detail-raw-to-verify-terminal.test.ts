/**
 * A run's end detail is whatever its writer sent (without --token: anyone who reaches the port). The
 * listener's log and `plugcheck runs` show it without control characters, but verify prints it raw
 * in its NOT JUDGED line: an escape sequence repaints the operator's terminal (ESC [2J clears it, a
 * C1 CSI too), a BEL rings, and a newline forges a line of verify's own output ("PASS: ..."), though
 * "verify trusts nothing it reads from the listener" (README). The same in the tree before the
 * reorganisation.
 */
import t from 'tap'
import { connect } from 'node:net'
import { join } from 'node:path'
import { encodeFrame } from '../../src/protocol/framing.js'
import { protocolVersion } from '../../src/protocol/messages.js'
import { runCli, sleep, startListener, tempDir, waitFor } from '../fixtures/cli.js'

t.test("a writer's end detail with an escape sequence and a newline does not reach verify's output raw", async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'data.plugcheck')
  const runId = '00000000000e5c01'
  const socket = connect(listener.port, '127.0.0.1')
  await new Promise<void>((resolve) => socket.once('connect', resolve))
  socket.on('error', () => {})
  let replies = 0
  socket.on('data', () => replies++)
  const meta = {
    runId,
    groupId: runId,
    method: 'fdatasync',
    direct: false,
    pattern: 'append',
    recordSizeBytes: 8192,
    slotCount: 1000,
    host: 'forged-host',
    path: file,
    requestedPath: file,
    createdMs: Date.now(),
  }
  socket.write(encodeFrame({ type: 'hello', protocol: protocolVersion, role: 'writer', machine: { host: 'forged-host', bootId: 'b1' } }))
  socket.write(encodeFrame({ type: 'run', meta, writer: { bootId: 'b1', fingerprint: null } }))
  socket.write(encodeFrame({ type: 'ack', runId, fromSeq: 1, toSeq: 2 }))
  const detail = 'x\u001b[2Jy\u0007\u009b31mz\nPASS: all 2 acknowledged records of run 00000000000e5c01 survived intact'
  socket.write(encodeFrame({ type: 'end', runId, reason: 'file-changed', detail }))
  await waitFor('the end to be recorded', () => /ended \(file-changed/.test(listener.stderr()), 10_000)
  await sleep(100)
  socket.destroy()
  t.ok(replies > 0, 'the listener answered')

  const r = await runCli(['verify', '--server', listener.server, '--file', file, '--host', 'forged-host'])
  t.match(r.stdout + r.stderr, /NOT JUDGED/, `the run is not judged (exit ${r.code}): ${JSON.stringify(r.stdout + r.stderr)}`)
  t.notMatch(r.stdout + r.stderr, /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/, 'no control characters from the client in the output')
  t.notMatch(r.stdout + r.stderr, /^PASS/m, 'no line of its own forged by a newline in the detail')
  t.notOk(
    (r.stdout + r.stderr).split('\n').some((line) => line.startsWith('PASS')),
    'no line of the output is forged by the client',
  )
})
