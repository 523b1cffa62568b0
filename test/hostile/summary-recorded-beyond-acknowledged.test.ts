/**
 * The write's summary says how many acknowledged records the listener recorded. It can never be more
 * than were acknowledged: a listener whose "recorded" reports (on the write's connection) or whose runs
 * list (asked on a new connection when the write's did not confirm every ack) names seqs the writer
 * never sent is broken or lying. Today the summary prints whatever it was told: "4,538 records synced
 * and acknowledged, 1,004,537 recorded by the listener", exit 0, and the JSON summary's recorded the
 * same. The write must not claim more recorded than acknowledged, and a listener that confirmed seqs
 * never sent is a runtime failure (exit 3), not a write that went well.
 */
import t from 'tap'
import { join } from 'node:path'
import { runCli, startFakeListener, tempDir, welcomeAndAccept } from '../fixtures/cli.js'
import { protocolVersion } from '../../src/protocol/messages.js'

/** Each run's acknowledged and recorded counts from the text summary (recorded undefined: unknown). */
function textCounts(stdout: string): Array<{ acked: number; recorded: number | undefined; line: string }> {
  return [...stdout.matchAll(/^ {2}([\d,]+) records synced and acknowledged.*$/gm)].map((m) => {
    const recorded = /, ([\d,]+) recorded by the listener$/.exec(m[0])
    return {
      acked: Number(m[1]!.replaceAll(',', '')),
      recorded: recorded === null ? undefined : Number(recorded[1]!.replaceAll(',', '')),
      line: m[0].trim(),
    }
  })
}

t.test("'recorded' reports beyond the last ack: the summary never says more recorded than acknowledged", async (t) => {
  const fake = await startFakeListener((m, reply) => {
    welcomeAndAccept(m, reply)
    if (m.type === 'ack') reply({ type: 'recorded', runId: m.runId, throughSeq: m.toSeq + 1_000_000 })
    if (m.type === 'end') reply({ type: 'recorded', runId: m.runId, throughSeq: 9_000_000 })
  })
  t.teardown(() => fake.close())
  const dir = tempDir(t)

  const text = await runCli(['write', '--server', fake.server, '--file', join(dir, 'p.dat'), '--method', 'fdatasync', '--duration', '2'])
  const counts = textCounts(text.stdout)
  t.equal(counts.length, 1, `one run in the summary (${text.stdout.trim()})`)
  for (const c of counts) t.ok(c.recorded === undefined || c.recorded <= c.acked, `never more recorded than acknowledged (${c.line})`)
  t.equal(text.code, 3, `a listener that confirmed seqs never sent is a runtime failure (exit ${text.code}: ${text.stderr.trim()})`)

  const json = await runCli([
    'write',
    '--json',
    '--server',
    fake.server,
    '--file',
    join(dir, 'q.dat'),
    '--method',
    'fdatasync',
    '--duration',
    '2',
  ])
  const lines = json.stdout.split('\n').filter((l) => l !== '')
  const summary = JSON.parse(lines.at(-1) ?? '{}') as {
    event?: string
    acknowledged: number
    recorded: number | null
    runs: Array<{ acknowledged: number; recorded: number | null }>
  }
  t.equal(summary.event, 'summary', 'the last line is the summary')
  for (const run of summary.runs ?? []) t.ok(run.recorded === null || run.recorded <= run.acknowledged, `run: ${JSON.stringify(run)}`)
  t.ok(
    summary.recorded === null || summary.recorded <= summary.acknowledged,
    `totals: ${summary.recorded} recorded of ${summary.acknowledged}`,
  )
  t.equal(json.code, 3, `--json: exit 3 too (${json.stderr.trim()})`)
})

t.test('a runs list that holds more of the run than was acknowledged: the summary never says so', async (t) => {
  let acks = 0
  const fake = await startFakeListener((m, reply, socket) => {
    if (m.type === 'hello' && m.role === 'verifier') {
      reply({ type: 'welcome', protocol: protocolVersion, listenerId: 'fake', nowMs: Date.now() })
      return
    }
    if (m.type === 'list') {
      // What the write announced, listed with a million acks it never sent.
      const run = fake.received.find((r) => r.type === 'run')
      if (run?.type !== 'run') return
      const meta = run.meta
      reply({
        type: 'run-list',
        truncated: false,
        runs: [
          {
            runId: meta.runId,
            groupId: meta.groupId,
            host: meta.host,
            path: meta.requestedPath,
            method: meta.method,
            announcedMs: Date.now() - 1000,
            live: false,
            ackedThroughSeq: 1_000_000,
            steadyMs: null,
            verdict: null,
            campaign: null,
          },
        ],
      })
      return
    }
    welcomeAndAccept(m, reply)
    // No 'recorded' reports: after 20 acks the listener refuses (its disk filled), so the summary asks it on a new connection.
    if (m.type === 'ack' && ++acks === 20) {
      reply({ type: 'error', code: 'storage', message: 'could not record acks: ENOSPC (no space left on device)' })
      socket.end()
    }
  })
  t.teardown(() => fake.close())
  const file = join(tempDir(t), 'p.dat')
  const result = await runCli(['write', '--server', fake.server, '--file', file, '--method', 'fdatasync', '--duration', '20'])
  t.equal(result.code, 3, `the listener failed: exit 3 (${result.stderr.trim()})`)
  const counts = textCounts(result.stdout)
  t.equal(counts.length, 1, `one run in the summary (${result.stdout.trim()})`)
  for (const c of counts) t.ok(c.recorded === undefined || c.recorded <= c.acked, `never more recorded than acknowledged (${c.line})`)
})
