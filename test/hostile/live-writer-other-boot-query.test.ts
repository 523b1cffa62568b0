/**
 * A writer that is alive and acknowledging records at this very moment cannot belong to a machine
 * that rebooted. A read-only `runs` query (or a verify of another file) from a machine with the same
 * host name but another boot id (cloned VMs named alike, sharing one listener and its token) must not
 * end that writer's run as vanished nor close its connection: the test on the other machine goes on.
 */
import t from 'tap'
import { join } from 'node:path'
import { listRuns } from '../../src/client/verify/listener-client.js'
import { parseEndpoint, type Endpoint } from '../../src/protocol/endpoint.js'
import { fileSize, sleep, spawnCli, startListener, tempDir, waitFor } from '../fixtures/cli.js'
import { newBootIdFile, runCliRebooted } from '../fixtures/rebooted.js'

t.test('a runs query with another boot id does not end a writer that is acking right now', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'), ['--token', 'T'])
  t.teardown(() => listener.kill())
  const file = join(dir, 'data.plugcheck')
  const writer = spawnCli(['write', '--server', listener.server, '--token', 'T', '--file', file, '--size', '16MiB'])
  let stdout = ''
  let stderr = ''
  writer.stdout!.on('data', (c: Buffer) => (stdout += c.toString()))
  writer.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
  const exited = new Promise<void>((resolve) => writer.on('exit', () => resolve()))
  t.teardown(async () => {
    writer.kill('SIGKILL')
    await exited
  })
  await waitFor('the writer to start writing', () => /after a power cut/.test(stdout) && fileSize(file) > 8192 * 10)

  const endpoint = parseEndpoint(listener.server) as Endpoint
  const before = (await listRuns(endpoint, 'T', 10_000)).runs[0]!
  t.equal(before.live, true, 'the run is live')

  // Another machine with the same host name (a new boot id): it only asks for the list of runs.
  const other = newBootIdFile(dir).path
  const query = await runCliRebooted(other, ['runs', '--server', listener.server, '--token', 'T'])
  t.equal(query.code, 0, query.stderr)
  await sleep(1000)

  const after = (await listRuns(endpoint, 'T', 10_000)).runs[0]!
  t.equal(after.live, true, `the writer's run is still live (it ended: ${JSON.stringify(after.end)})`)
  t.ok((after.ackedThroughSeq ?? 0) > (before.ackedThroughSeq ?? 0), 'and still acknowledged')
  t.equal(writer.exitCode, null, `the writer goes on (stderr: ${stderr.trim()})`)
  t.notMatch(listener.stderr(), /ended as vanished/, 'the listener ended nothing')
})
