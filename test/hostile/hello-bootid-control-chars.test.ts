/**
 * A hello's machine (host name and boot id) is whatever the client says. When it ends a run of an
 * earlier boot, the listener's log line and the run's stored end detail must not carry the client's
 * control characters: a boot id holding a newline forges a log line (a fake verdict), an escape
 * sequence repaints the operator's terminal, as every other line of the log already guards against.
 */
import t from 'tap'
import { connect, type Socket } from 'node:net'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { listRuns } from '../../src/client/verify/listener-client.js'
import { parseEndpoint, type Endpoint } from '../../src/protocol/endpoint.js'
import { encodeFrame } from '../../src/protocol/framing.js'
import { protocolVersion } from '../../src/protocol/messages.js'
import { fileSize, runCli, sleep, spawnCli, startListener, tempDir, waitFor } from '../fixtures/cli.js'
import { runsEnded } from '../fixtures/runs-ended.js'
import { rebootSilenceMs } from '../../src/server/listen/listener-options.js'

t.test('a boot id with a newline and an escape sequence does not reach the log or the stored end raw', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'data.plugcheck')
  const writer = spawnCli(['write', '--server', listener.server, '--file', file, '--size', '16MiB'])
  let stdout = ''
  writer.stdout!.on('data', (c: Buffer) => (stdout += c.toString()))
  const exited = new Promise<void>((resolve) => writer.on('exit', () => resolve()))
  t.teardown(async () => {
    writer.kill('SIGKILL')
    await exited
  })
  await waitFor('the writer to start writing', () => /after a power cut/.test(stdout) && fileSize(file) > 8192 * 10)
  writer.kill('SIGSTOP') // the power goes
  await new Promise((resolve) => setTimeout(resolve, rebootSilenceMs + 200)) // no machine reboots at once

  const forged = 'b\n12:00:00 verdict for run 0 on x: pass\u001b[2J'
  const sockets: Socket[] = []
  const runEnded = (): boolean => /ended as vanished|closed its connection/.test(listener.stderr())
  // The listener counts the writer's silence from when it read the writer's last bytes, which a loaded
  // machine can be late to read: a hello before that silence is ignored (the writer may still be
  // writing). The rebooted machine's hello comes again each second, on a fresh connection, until the
  // run ends; a listener that never ends it fails the wait.
  const helloBy = Date.now() + 20_000
  while (!runEnded()) {
    if (Date.now() > helloBy) throw new Error(`the run did not end within 20 s of hellos: ${listener.stderr()}`)
    const socket = connect(listener.port, '127.0.0.1')
    sockets.push(socket)
    socket.on('error', () => {})
    await new Promise<void>((resolve) => socket.once('connect', resolve))
    socket.write(encodeFrame({ type: 'hello', protocol: protocolVersion, role: 'verifier', machine: { host: hostname(), bootId: forged } }))
    await waitFor('the run to end', runEnded, 1000).catch(() => undefined)
  }
  // Its end stored as the log says (the stored end detail is checked below).
  await runsEnded(listener.server, file)
  await sleep(200)
  for (const socket of sockets) socket.destroy()
  const endpoint = parseEndpoint(listener.server) as Endpoint

  const lines = listener.stderr().split('\n')
  t.notOk(
    lines.some((l) => l.startsWith('12:00:00 verdict')),
    'no forged log line',
  )
  t.notMatch(listener.stderr(), /\u001b/, 'no escape sequence in the log')
  const run = (await listRuns(endpoint, undefined, 10_000)).runs[0]!
  t.notMatch(
    run.end?.detail ?? '',
    /[\u0000-\u001f\u007f-\u009f]/,
    `no control characters in the stored end detail: ${JSON.stringify(run.end?.detail)}`,
  )
  const runs = await runCli(['runs', '--server', listener.server])
  t.notMatch(runs.stdout, /\u001b/, 'nor in what runs prints')
})
