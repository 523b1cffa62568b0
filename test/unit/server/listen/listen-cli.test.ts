/**
 * `plugcheck listen` as a command: a warning when anyone on the network could announce runs (a
 * non-loopback address without --token), none on loopback or with a token, and --max-connections.
 */
import t from 'tap'
import { exitedWithOutput, spawnCli, runInProcess, tempDir, waitFor } from '../../../fixtures/cli.js'
import { isLoopbackHost } from '../../../../src/server/listen/listen.js'
import { Peer } from '../../../fixtures/peer.js'

async function listenOutput(args: readonly string[]): Promise<{ stdout: string; stderr: string; port: number; stop: () => Promise<void> }> {
  const child = spawnCli(['listen', '--port', '0', ...args])
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()))
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
  const exited = exitedWithOutput(child) // stop() resolves once its last lines are read: the tests match them after
  await waitFor(`listening (${stderr})`, () => /listening on .*:\d+/.test(stdout), 60_000)
  await new Promise((resolve) => setTimeout(resolve, 100)) // the warning follows the listening line
  return {
    get stdout() {
      return stdout
    },
    get stderr() {
      return stderr
    },
    port: Number(/:(\d+),/.exec(stdout)![1]),
    stop: async () => {
      child.kill('SIGTERM')
      await exited
    },
  }
}

t.test('a non-loopback address without --token is warned about', async (t) => {
  const open = await listenOutput(['--host', '0.0.0.0', '--dir', tempDir(t)])
  await open.stop()
  t.match(
    open.stderr,
    /^plugcheck: warning: listening on 0\.0\.0\.0:\d+ without --token: anyone who can reach this port can announce runs/m,
  )
  t.match(open.stderr, /^hint: .*--token/m)

  const loopback = await listenOutput(['--host', '127.0.0.1', '--dir', tempDir(t)])
  await loopback.stop()
  t.notMatch(loopback.stderr, /warning/)

  const withToken = await listenOutput(['--host', '0.0.0.0', '--dir', tempDir(t), '--token', 's3cret'])
  await withToken.stop()
  t.notMatch(withToken.stderr, /warning/)

  t.same(['127.0.0.1', '127.1.2.3', '::1', 'localhost', '0.0.0.0', '::', '10.0.0.7', '::ffff:127.0.0.1'].map(isLoopbackHost), [
    true,
    true,
    true,
    true,
    false,
    false,
    false,
    true,
  ])
})

t.test('--max-connections limits the listener, and a bad value is a usage error', async (t) => {
  const listener = await listenOutput(['--host', '127.0.0.1', '--dir', tempDir(t), '--max-connections', '1'])
  t.teardown(() => listener.stop())
  const first = await Peer.open(listener.port)
  first.send({ type: 'hello', protocol: 2, role: 'verifier' })
  await first.next('welcome')
  const second = await Peer.open(listener.port)
  second.send({ type: 'hello', protocol: 2, role: 'verifier' })
  t.match(await second.next('error'), { code: 'limit', message: /1 connections open, its limit \(--max-connections\)/ })
  first.close()
  await waitFor('the refusal logged', () => /refused a connection from 127\.0\.0\.1/.test(listener.stderr))

  const bad = await runInProcess(['listen', '--max-connections', '0'])
  t.equal(bad.code, 2)
  t.match(bad.stderr, /--max-connections must be at least 1/)
})
