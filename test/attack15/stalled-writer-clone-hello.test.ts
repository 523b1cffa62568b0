/**
 * A writer sits in a slow sync (README: "a writer may sit for minutes in a slow sync") and sends
 * nothing for 3 s. Meanwhile a machine with the same host name and another boot id (a cloned VM with
 * the same token) runs a verify of its own. The writer's machine did not reboot: its run must stay
 * live, its connection open, and the writer must finish its --duration (exit 0), its run judged pass.
 * A 2 s silence is not a power cut. The stall is made with SIGSTOP/SIGCONT: on the wire it is what a
 * 3 s fdatasync looks like (the write loop is synchronous, nothing is sent while it syncs).
 */
import t from 'tap'
import { join } from 'node:path'
import { listRuns } from '../../src/client/listener-client.js'
import { parseEndpoint, type Endpoint } from '../../src/client/endpoint.js'
import { fileSize, runCli, sleep, spawnCli, startListener, tempDir, waitFor } from '../fixtures/cli.js'
import { newBootIdFile, runCliRebooted } from '../fixtures/rebooted.js'

t.test('a clone\'s hello does not end a writer stalled in a slow sync', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'), ['--token', 'T'])
  t.teardown(() => listener.kill())
  const file = join(dir, 'data.plugcheck')
  const writer = spawnCli(['write', '--server', listener.server, '--token', 'T', '--file', file, '--size', '16MiB', '--duration', '8'])
  let stdout = ''
  let stderr = ''
  writer.stdout!.on('data', (c: Buffer) => (stdout += c.toString()))
  writer.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
  const exited = new Promise<number>((resolve) => writer.on('exit', (c) => resolve(c ?? -1)))
  t.teardown(async () => {
    writer.kill('SIGCONT')
    writer.kill('SIGKILL')
    await exited
  })
  await waitFor('the writer to start writing', () => /after a power cut/.test(stdout) && fileSize(file) > 8192 * 10)

  // The writer's sync stalls: nothing on its connection for 3 s.
  writer.kill('SIGSTOP')
  await sleep(2500)
  // A clone (same host name, another boot id) verifies some other file of its own.
  const other = newBootIdFile(dir).path
  const cloneVerify = await runCliRebooted(other, ['verify', '--server', listener.server, '--token', 'T', '--file', join(dir, 'clone.plugcheck')])
  t.comment(`clone verify: ${cloneVerify.code} ${cloneVerify.stderr.trim()}`)
  writer.kill('SIGCONT')

  const endpoint = parseEndpoint(listener.server) as Endpoint
  const run = (await listRuns(endpoint, 'T', 10_000)).runs.find((r) => r.path === file || r.requestedPath === file) ?? (await listRuns(endpoint, 'T', 10_000)).runs[0]!
  t.not(run.end?.reason, 'vanished', `the stalled writer's run is not ended as vanished (${JSON.stringify(run.end)})`)
  t.notMatch(listener.stderr(), /machine rebooted/, 'the listener did not take the clone for a reboot')

  const code = await exited
  t.equal(code, 0, `the writer finishes its duration (stderr: ${stderr.trim()})`)
  const verify = await runCli(['verify', '--server', listener.server, '--token', 'T', '--file', file])
  t.equal(verify.code, 0, `its run is judged pass (${verify.stdout}${verify.stderr})`)
})
