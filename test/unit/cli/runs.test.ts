/**
 * `plugcheck runs` through the real CLI against a real listener: the table (host, path, method, acked,
 * started, live / ended / vanished, verdict), --json {runs, truncated}, --campaign, and the errors of
 * an unreachable listener or a wrong token.
 */
import t from 'tap'
import { join } from 'node:path'
import { formatRunsTable } from '../../../src/cli/runs.js'
import { protocolVersion, type RunSummary } from '../../../src/protocol/messages.js'
import { runCli, runInProcess, startListener, tempDir } from '../../fixtures/cli.js'
import { Peer, runIdOf, runMeta } from '../../fixtures/peer.js'
import { verdictOf } from '../../fixtures/verdict-fixture.js'

t.test('runs lists every run newest first, as a table and as JSON', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'acks'), ['--token', 's3cret'])
  t.teardown(() => listener.kill())
  const [vanished, ended, live] = [runIdOf(0x701), runIdOf(0x702), runIdOf(0x703)]

  const hello = { type: 'hello', protocol: protocolVersion, role: 'writer', token: 's3cret' }
  const first = await Peer.open(listener.port)
  first.send(hello)
  first.send({ type: 'run', meta: runMeta(vanished, { host: 'box', requestedPath: '/mnt/a' }) })
  await first.next('run-ok')
  first.send({ type: 'ack', runId: vanished, fromSeq: 1, toSeq: 1234 })
  await first.next('recorded')
  first.close() // no end: vanished

  const second = await Peer.open(listener.port)
  second.send(hello)
  second.send({
    type: 'run',
    meta: runMeta(ended, { host: 'box', requestedPath: '/mnt/b', method: 'fsync' }),
    campaign: { name: 'ssd-a', cycle: 3 },
  })
  await second.next('run-ok')
  second.send({ type: 'ack', runId: ended, fromSeq: 1, toSeq: 5 })
  second.send({ type: 'end', runId: ended, reason: 'duration' })
  await second.next('recorded')
  const verifier = await Peer.open(listener.port)
  verifier.send({ ...hello, role: 'verifier' })
  verifier.send({ type: 'verdict', runId: ended, result: verdictOf() })
  await verifier.next('verdict-ok')
  verifier.close()

  const third = await Peer.open(listener.port)
  third.send(hello)
  third.send({ type: 'run', meta: runMeta(live, { host: 'other', requestedPath: '/mnt/c' }) })
  await third.next('run-ok')
  t.teardown(() => third.close())

  const text = await runCli(['runs', '--server', listener.server, '--token', 's3cret'])
  t.equal(text.code, 0, text.stderr)
  const lines = text.stdout.trimEnd().split('\n')
  t.equal(lines.length, 4, text.stdout)
  t.match(lines[0], /^run\s+host\s+path\s+method\s+acked\s+started\s+state\s+verdict$/)
  t.match(lines[1], new RegExp(`^${live}\\s+other\\s+/mnt/c\\s+fdatasync\\s+0\\s+\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d\\s+live\\s+-$`))
  t.match(
    lines[2],
    new RegExp(
      `^${ended}\\s+box\\s+/mnt/b\\s+fsync\\s+5\\s+\\S+ \\S+\\s+ended \\(duration\\) \\S+ \\S+ \\[ssd-a #3\\]\\s+fail \\(2 of 5 lost, torn or corrupt\\)$`,
    ),
  )
  t.match(lines[3], new RegExp(`^${vanished}\\s+box\\s+/mnt/a\\s+fdatasync\\s+1,234\\s+\\S+ \\S+\\s+vanished \\S+ \\S+\\s+-$`))

  const json = await runInProcess(['runs', '--server', listener.server, '--token', 's3cret', '--json'])
  t.equal(json.code, 0, json.stderr)
  const doc = JSON.parse(json.stdout) as { runs: RunSummary[]; truncated: boolean }
  t.equal(doc.truncated, false)
  t.same(
    doc.runs.map((r) => r.runId),
    [live, ended, vanished],
  )
  t.match(doc.runs[0], { live: true, host: 'other', ackedThroughSeq: 0, verdict: null, campaign: null })
  t.match(doc.runs[1], {
    live: false,
    end: { reason: 'duration' },
    campaign: { name: 'ssd-a', cycle: 3 },
    verdict: { verdict: 'fail', lost: 2, acked: 5 },
  })
  t.match(doc.runs[2], { live: false, end: { reason: 'vanished' }, ackedThroughSeq: 1234 })

  const campaign = await runInProcess(['runs', '--server', listener.server, '--token', 's3cret', '--json', '--campaign', 'ssd-a'])
  t.same(
    (JSON.parse(campaign.stdout) as { runs: RunSummary[] }).runs.map((r) => r.runId),
    [ended],
    '--campaign: only its runs',
  )
  const none = await runInProcess(['runs', '--server', listener.server, '--token', 's3cret', '--campaign', 'nothing-here'])
  t.equal(none.code, 0)
  t.match(none.stdout, /holds no runs of campaign nothing-here/)

  const wrongToken = await runInProcess(['runs', '--server', listener.server, '--token', 'guess'])
  t.equal(wrongToken.code, 2, 'a wrong token is exit 2')
  t.match(wrongToken.stderr, /^plugcheck: .*token/m)
})

t.test('runs against no listener is a one-line runtime error', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'acks'))
  const server = listener.server
  await listener.kill()
  const result = await runInProcess(['runs', '--server', server, '--listener-timeout', '2'])
  t.equal(result.code, 3)
  t.match(result.stderr, /^plugcheck: could not reach the listener at 127\.0\.0\.1:\d+: ECONNREFUSED/)
})

t.test('runs: a pass says when it was verified on the boot of its write, or the reboot could not be told', async (t) => {
  const pass = verdictOf({ verdict: 'pass', intact: 5, lost: 0, lostRanges: [], summary: 'PASS' })
  const summary = (runId: string, rebootedSinceWrite: boolean | null): RunSummary => ({
    runId,
    groupId: runId,
    host: 'box',
    path: '/mnt/a',
    method: 'fdatasync',
    announcedMs: 1_700_000_000_000,
    live: false,
    end: { reason: 'vanished', atMs: 1_700_000_060_000 },
    ackedThroughSeq: 5,
    steadyMs: null,
    verdict: { ...pass, rebootedSinceWrite },
    campaign: null,
  })
  const lines = formatRunsTable([summary(runIdOf(1), true), summary(runIdOf(2), false), summary(runIdOf(3), null)])
    .trimEnd()
    .split('\n')
  t.match(lines[1], / pass$/, 'verified after a reboot: a bare pass')
  t.match(lines[2], / pass, same boot$/, 'verified on the boot of its write')
  t.match(lines[3], / pass, reboot unknown$/, 'whether the writer rebooted could not be told')
})
