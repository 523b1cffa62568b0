/**
 * What an attack on the writer found, each pinned: a reader that goes away (`write ... | head -1`)
 * must not end or crash the run, and a server that waits silently for its own protocol's request is
 * named as possibly not a listener.
 */
import t from 'tap'
import { createServer, type Socket } from 'node:net'
import { join } from 'node:path'
import { runCli, spawnCli, startListener, tempDir } from '../fixtures/cli.js'

t.test('write | head -1: the run goes on to its end and verifies', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'data')
  const writer = spawnCli(['write', '--server', listener.server, '--file', file, '--size', '4MiB', '--duration', '2'])
  let stderr = ''
  writer.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
  // Like head -1: read the first chunk, then close the pipe.
  await new Promise<void>((resolve) => writer.stdout!.once('data', () => resolve()))
  writer.stdout!.destroy()
  const code = await new Promise<number>((resolve) => writer.on('close', (c) => resolve(c ?? -1)))
  t.equal(code, 0, 'exit 0: the run is the job, the trail is not')
  t.notMatch(stderr, /EPIPE|internal error|\n\s+at /)
  const verify = await runCli(['verify', '--server', listener.server, '--file', file])
  t.equal(verify.code, 0)
})

t.test('a server that waits silently is named as possibly not a listener', async (t) => {
  const held = new Set<Socket>()
  const silent = createServer((socket) => void held.add(socket.on('error', () => undefined)))
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    for (const socket of held) socket.destroy()
    return new Promise((resolve) => silent.close(resolve))
  })
  const server = `127.0.0.1:${(silent.address() as { port: number }).port}`
  const file = join(tempDir(t), 'data')
  const write = await runCli(['write', '--server', server, '--file', file, '--listener-timeout', '0.5'])
  t.equal(write.code, 3)
  t.match(write.stderr, /did not answer within 0\.5 s\nhint: a plugcheck listener answers at once/)
  const verify = await runCli(['verify', '--server', server, '--file', file, '--listener-timeout', '0.5'])
  t.equal(verify.code, 3)
  t.match(verify.stderr, /hint: a plugcheck listener answers at once/)
})
