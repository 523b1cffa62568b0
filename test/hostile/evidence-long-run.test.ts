/**
 * Evidence (issue class 11) for a long run: a runs reply leaves a long run's spans out (more than
 * maxInlineSpans of them: ~7 minutes of acks; verify reads them page by page), so `spans` is empty
 * although the run acknowledged hundreds of thousands of records. A `write` on the path of such a run
 * that vanished and was never verified must be refused (exit 2) exactly like a short run's, not
 * treated as a run that acknowledged nothing, whose files it may replace.
 *
 * The listener runs under libfaketime at 100x speed (its monotonic clock too), so a few real seconds
 * of acks spread over many 100 ms span windows, as a run of many minutes does.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { queryRuns } from '../../src/client/verify/listener-client.js'
import { parseEndpoint, type Endpoint } from '../../src/protocol/endpoint.js'
import { maxInlineSpans } from '../../src/protocol/messages.js'
import { binPath, runCli, sleep, spawnCli, tempDir } from '../fixtures/cli.js'
import { runsEnded } from '../fixtures/runs-ended.js'

t.test('a long vanished run that was never verified is evidence: write refuses', async (t) => {
  const dir = tempDir(t)
  // libfaketime preloaded into the listener itself (not the faketime wrapper, which would stand between the signal and it).
  const env = { ...process.env, LD_PRELOAD: '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1', FAKETIME: '+0 x100' }
  const listener = spawn(process.execPath, [binPath, 'listen', '--host', '127.0.0.1', '--port', '0', '--dir', join(dir, 'listener')], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env,
  })
  const listenerExited = new Promise<void>((resolve) => listener.on('exit', () => resolve()))
  t.teardown(async () => {
    listener.kill('SIGKILL')
    await listenerExited
  })
  let out = ''
  listener.stdout!.on('data', (c: Buffer) => (out += c.toString()))
  const deadline = Date.now() + 60_000
  while (!/listening on 127\.0\.0\.1:\d+/.test(out) && Date.now() < deadline) await sleep(50)
  const server = `127.0.0.1:${/listening on 127\.0\.0\.1:(\d+)/.exec(out)![1]}`

  const file = join(dir, 'data.plugcheck')
  const writer = spawnCli(['write', '--server', server, '--file', file, '--size', '8MiB', '--method', 'none'])
  const writerExited = new Promise<void>((resolve) => writer.on('exit', () => resolve()))
  // Until the listener leaves the run's spans out of its answer (~7 minutes of acks by its clock: a few
  // real seconds at 100x, more on a loaded machine).
  const endpoint = parseEndpoint(server) as Endpoint
  // The listener's hello deadline (10 s) runs 100x fast too: 0.1 s real, which a loaded machine can miss
  // between connect and hello. Such a refusal ('no hello within') is asked again, a few times at most.
  const query = async (): ReturnType<typeof queryRuns> => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await queryRuns(endpoint, undefined, { host: hostname(), requestedPath: file }, 30_000)
      } catch (error) {
        if (attempt >= 5 || !/no hello within/.test((error as Error).message)) throw error
      }
    }
  }
  // A loaded machine sends acks in fewer, larger batches, each one span: it takes longer there (minutes).
  const longBy = performance.now() + 300_000
  for (;;) {
    await sleep(1000)
    const { runs: now } = await query()
    if ((now[0]?.ackedThroughSeq ?? 0) > 0 && now[0]?.spans.length === 0) break
    if (performance.now() > longBy) break // the assertions below say what was missing
  }
  writer.kill('SIGKILL') // the power goes (the connection closes: vanished)
  await writerExited
  // Its end (vanished) taken in once the listener reads the connection's EOF (a query before would see it live).
  await runsEnded(server, file)

  const { runs } = await query()
  t.equal(runs.length, 1)
  t.equal(runs[0]?.end?.reason, 'vanished', 'the run vanished')
  t.ok((runs[0]?.ackedThroughSeq ?? 0) > 10_000, `it acknowledged ${runs[0]?.ackedThroughSeq} records`)
  t.same(runs[0]?.spans, [], `a long run: its spans (more than ${maxInlineSpans}) are left out of the runs reply`)

  const again = await runCli(['write', '--server', server, '--file', file, '--size', '8MiB', '--method', 'none', '--duration', '1'])
  t.equal(again.code, 2, `write refuses to destroy the evidence (stderr: ${again.stderr.trim()})`)
  t.match(again.stderr, /refusing to write to .*never verified/)
  t.match(again.stderr, /--discard-unverified/)
})
