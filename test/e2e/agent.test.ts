/**
 * plugcheck agent without a campaign, against a real listener and real child processes: nothing to
 * verify and nothing to write; a SIGKILLed writer's run verified and its verdicts stored at the
 * listener; a live run never given a verdict; a power cut that leaves the writer's connection open
 * (the writer SIGSTOPped) and the agent of the rebooted machine (a new boot id); a listener that
 * comes up late.
 */
import t from 'tap'
import { existsSync, truncateSync } from 'node:fs'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { listRuns } from '../../src/client/verify/listener-client.js'
import { parseEndpoint, type Endpoint } from '../../src/protocol/endpoint.js'
import {
  fileSize,
  runCli,
  spawnCli,
  startListener,
  startListenerOnPort,
  tempDir,
  waitFor,
  watchCli,
  writeThenKill,
  sleep,
} from '../fixtures/cli.js'
import { runsEnded } from '../fixtures/runs-ended.js'
import { newBootIdFile, runCliRebooted } from '../fixtures/rebooted.js'
import { rebootSilenceMs } from '../../src/server/listen/listener-options.js'

const endpoint = (server: string): Endpoint => parseEndpoint(server) as Endpoint
const summaries = async (server: string) => (await listRuns(endpoint(server), undefined, 10_000)).runs

t.test('no campaign, no earlier run: exit 0, nothing written', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'data.plugcheck')
  const result = await runCli(['agent', '--server', listener.server, '--file', file])
  t.equal(result.code, 0, result.stderr)
  t.match(result.stdout, /nothing to verify/)
  t.match(result.stdout, /runs no campaign: nothing to write/)
  t.notOk(existsSync(file), 'no data file')
  t.same(await summaries(listener.server), [], 'no run announced')
})

t.test('after a SIGKILLed writer: verified, verdicts stored, exit code of verify; a second agent does not report again', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'data.plugcheck')
  await writeThenKill(listener.server, file, ['--method', 'fdatasync,none', '--size', '16MiB'], 300)
  await runsEnded(listener.server, file) // their last acks and their ends taken in (verify would judge live runs)

  const first = await runCli(['agent', '--server', listener.server, '--file', file, '--method', 'fdatasync,none', '--size', '16MiB'])
  // No power cut: the control lost nothing, so verify calls it inconclusive (exit 4).
  t.equal(first.code, 4, first.stderr)
  t.match(first.stdout, /INCONCLUSIVE/)
  t.match(first.stdout, /reported 2 verdicts to the listener/)
  const runs = await summaries(listener.server)
  t.equal(runs.length, 2)
  for (const run of runs) {
    const v = run.verdict
    t.ok(v, `run ${run.runId} (${run.method}) has a verdict`)
    if (v === null) continue
    t.equal(v.verdict, run.method === 'none' ? 'inconclusive' : 'pass')
    t.equal(v.acked, run.ackedThroughSeq)
    t.equal(v.intact, v.acked)
    t.equal(v.lost + v.torn + v.corrupt, 0)
    t.equal(v.lossWindowMs, null)
    t.same(v.lostRanges, [])
    t.equal(v.rebootedSinceWrite, false, 'same boot')
    t.match(v.summary, run.method === 'none' ? /^INCONCLUSIVE: control \(none\)/ : /^PASS: all [\d,]+ acknowledged records/)
  }

  const second = await runCli(['agent', '--server', listener.server, '--file', file, '--method', 'fdatasync,none', '--size', '16MiB'])
  t.equal(second.code, 0, second.stderr)
  t.match(second.stdout, /has its verdicts at the listener already/)
  t.notMatch(second.stdout, /reported/)
})

t.test('a truncated data file: fail (exit 1), lost ranges and their window stored', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'data.plugcheck')
  await writeThenKill(listener.server, file, ['--method', 'fdatasync'], 400) // 256 MiB: no wrap-around
  await runsEnded(listener.server, file)
  const recordBytes = 8192
  truncateSync(file, recordBytes * 101) // the superblock and records 1-100 stay

  const result = await runCli(['agent', '--server', listener.server, '--file', file])
  t.equal(result.code, 1, result.stderr)
  t.match(result.stdout, /FAIL/)
  const [run] = await summaries(listener.server)
  const v = run?.verdict
  t.equal(v?.verdict, 'fail')
  t.equal(v?.intact, 100)
  t.equal(v?.lost, run!.ackedThroughSeq - 100)
  t.same(v?.lostRanges, [[101, run!.ackedThroughSeq]])
  t.type(v?.lossWindowMs, 'number')
  t.match(v?.summary, /^FAIL: [\d,]+ of [\d,]+ acknowledged records/)
})

t.test('a live run is never given a verdict: exit 2, nothing reported', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'data.plugcheck')
  const writer = spawnCli(['write', '--server', listener.server, '--file', file, '--size', '16MiB'])
  const exited = new Promise<void>((resolve) => writer.on('exit', () => resolve()))
  t.teardown(async () => {
    writer.kill('SIGKILL')
    await exited
  })
  let stdout = ''
  writer.stdout!.on('data', (c: Buffer) => (stdout += c.toString()))
  await waitFor('the writer to start writing', () => /after a power cut/.test(stdout) && fileSize(file) > 8192 * 10)

  const result = await runCli(['agent', '--server', listener.server, '--file', file])
  t.equal(result.code, 2, result.stderr)
  t.match(result.stdout, /NOT JUDGED: .*still being written/)
  t.match(result.stderr, /not reporting a verdict for a run that is still being written/)
  const runs = await summaries(listener.server)
  t.equal(runs.length, 1)
  t.equal(runs[0]?.live, true)
  t.equal(runs[0]?.verdict, null, 'no verdict for the live run')
  t.equal(writer.exitCode, null, 'the writer goes on')
})

// The first contact of the rebooted machine: a plain verify (which stores its verdict as the agent
// does) or the agent itself; either ends the old boot's run at the listener and has its verdict taken.
for (const first of ['verify', 'agent'] as const)
  t.test(
    `a power cut leaves the writer's connection open: the rebooted machine's ${first} verifies, and its verdict is taken`,
    async (t) => {
      const dir = tempDir(t)
      const listener = await startListener(join(dir, 'listener'))
      t.teardown(() => listener.kill())
      const file = join(dir, 'data.plugcheck')
      const writer = spawnCli(['write', '--server', listener.server, '--file', file, '--size', '16MiB'])
      const exited = new Promise<void>((resolve) => writer.on('exit', () => resolve()))
      t.teardown(async () => {
        writer.kill('SIGKILL')
        await exited
      })
      let stdout = ''
      writer.stdout!.on('data', (c: Buffer) => (stdout += c.toString()))
      await waitFor('the writer to start writing', () => /after a power cut/.test(stdout) && fileSize(file) > 8192 * 10)
      // The power goes: the writer stops dead and its connection sends nothing more, not even a FIN.
      writer.kill('SIGSTOP')
      await sleep(300) // acks already in the listener's socket buffer are taken in
      const sameBoot = await runCli(['verify', '--server', listener.server, '--file', file])
      t.equal(sameBoot.code, 2, 'on the same boot the run is still being written (its connection is open)')
      t.match(sameBoot.stdout, /NOT JUDGED: .*still being written/)

      // The machine comes back with a new boot id (never at once: a writer silent for less than
      // rebootSilenceMs may still be writing); its first contact ends the old boot's run at the listener.
      await sleep(rebootSilenceMs)
      const boot = newBootIdFile(dir).path
      if (first === 'verify') {
        const verify = await runCliRebooted(boot, ['verify', '--server', listener.server, '--file', file, '--json'])
        t.equal(verify.code, 0, `verify on the rebooted machine judges the run (${verify.stderr})`)
        const claims = verify.stdout === '' ? [] : (JSON.parse(verify.stdout).claims as Array<{ live: boolean; end?: { reason: string } }>)
        t.match(claims, [{ live: false, end: { reason: 'vanished' } }], 'and the listener no longer holds it live: it ended as vanished')
      }
      const agent = await runCliRebooted(boot, ['agent', '--server', listener.server, '--file', file, '--size', '16MiB'])
      t.equal(agent.code, 0, `the rebooted machine's agent verified and reported (${agent.stderr})`)
      if (first === 'agent') {
        t.match(agent.stdout, /PASS: all [\d,]+ acknowledged records/)
        t.match(agent.stdout, /reported 1 verdict to the listener/)
      } else t.match(agent.stdout, /has its verdicts at the listener already/, 'the verify before it stored the verdict')
      const [run] = await summaries(listener.server)
      t.match(
        run,
        {
          live: false,
          end: { reason: 'vanished', detail: /its writer's machine rebooted: \S+ connected from 127\.0\.0\.1 with boot id / },
        },
        'the old run ended as vanished',
      )
      t.match(run?.verdict, { verdict: 'pass', rebootedSinceWrite: true }, 'its verdict is stored')
      t.equal(run?.verdict?.acked, run?.ackedThroughSeq)
      t.match(listener.stderr(), /ended as vanished: its writer's machine rebooted/, 'the listener says why')
    },
  )

t.test('a listener that comes up late: the agent waits for it, then goes on', async (t) => {
  const dir = tempDir(t)
  // A free port, for a listener started after the agent.
  const probe = createServer()
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve))
  const port = (probe.address() as { port: number }).port
  await new Promise((resolve) => probe.close(resolve))
  const file = join(dir, 'data.plugcheck')
  const spawnedMs = Date.now()
  const agent = watchCli(['agent', '--server', `127.0.0.1:${port}`, '--file', file])
  t.teardown(() => agent.child.kill('SIGKILL'))
  // The listener comes up once the agent has tried it and said it waits (a loaded machine may take
  // seconds to start the agent): an agent that did not wait would have exited by then.
  await waitFor(
    `the agent waiting (${agent.out.stderr})`,
    () => /waiting for the listener/.test(agent.out.stderr) || agent.child.exitCode !== null,
    60_000,
  )
  const listener = await startListenerOnPort(join(dir, 'listener'), port)
  t.teardown(() => listener.kill())
  const result = { code: await agent.exited, ...agent.out }
  const waitedMs = Date.now() - spawnedMs
  t.equal(result.code, 0, result.stderr)
  t.match(result.stderr, /^plugcheck: waiting for the listener at 127\.0\.0\.1:\d+ \(0 s of 300\): could not reach/m, 'said so at once')
  // Once every 30 s, not at every attempt: once, unless a loaded machine took more than 30 s to bring the listener up.
  const waiting = result.stderr.split('\n').filter((l) => l.includes('waiting for the listener')).length
  if (waitedMs < 30_000) t.equal(waiting, 1, 'once within 30 s')
  else t.ok(waiting >= 1 && waiting <= 1 + Math.floor(waitedMs / 30_000), `once per 30 s: ${waiting} in ${waitedMs} ms`)
  t.match(result.stdout, /nothing to verify/)
})

t.test('a wrong token is not waited out: exit 2 at once', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'), ['--token', 'right'])
  t.teardown(() => listener.kill())
  const result = await runCli(['agent', '--server', listener.server, '--file', join(dir, 'data.plugcheck'), '--token', 'wrong'])
  t.equal(result.code, 2, result.stderr)
  t.notMatch(result.stderr, /waiting for the listener/)
})
