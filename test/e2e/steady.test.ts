/**
 * The writer tells the listener when each run is steady (it has acked for 3 s and the listener records
 * its acks), with stdout and stderr not a terminal: an unattended agent's writer must say it too.
 */
import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { listRuns } from '../../src/client/verify/listener-client.js'
import { parseEndpoint } from '../../src/protocol/endpoint.js'
import type { Endpoint } from '../../src/protocol/endpoint.js'
import { runCli, startListener, tempDir } from '../fixtures/cli.js'

t.test('write --duration 5 with two methods, no TTY: one steady per run, stored and logged', async (t) => {
  const dir = tempDir(t)
  const events = join(dir, 'events.jsonl')
  const listener = await startListener(join(dir, 'listener'), ['--events', events])
  t.teardown(() => listener.kill())
  const file = join(dir, 'data.plugcheck')
  const result = await runCli([
    'write',
    '--server',
    listener.server,
    '--file',
    file,
    '--method',
    'fdatasync,none',
    '--size',
    '16MiB',
    '--duration',
    '5',
  ])
  t.equal(result.code, 0, result.stderr)
  t.equal(
    result.stderr.match(/^steady: .*; cut the power now /gm)?.length,
    1,
    'without a terminal, the moment to cut as a plain line, once',
  )
  const runIds = [...result.stdout.matchAll(/^run ([0-9a-f]{16}): /gm)].map((m) => m[1]!)
  const announced = [...new Set(runIds)]
  t.equal(announced.length, 2, result.stdout)

  const { runs } = await listRuns(parseEndpoint(listener.server) as Endpoint, undefined, 10_000)
  for (const runId of announced) {
    const summary = runs.find((r) => r.runId === runId)
    t.ok(summary, `the listener lists run ${runId}`)
    t.type(summary?.steadyMs, 'number', `run ${runId} is stored as steady`)
    t.ok(summary!.steadyMs! >= summary!.announcedMs, 'steady after the announcement')
    t.equal(summary?.campaign, null, 'a plain write carries no campaign tag')
  }
  const steadies = readFileSync(events, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { kind: string; runId?: string })
    .filter((e) => e.kind === 'steady')
  t.same(steadies.map((e) => e.runId).sort(), [...announced].sort(), 'one steady event per run')
})
