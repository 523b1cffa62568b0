/**
 * write --jobs N against a real listener: N threads, N files (PATH.jobK), one group that verify judges
 * together. An honest run passes; a flipped byte in one job's file fails the group, naming the file; a
 * job's file deleted mid-run ends the whole write as file-changed with every run ended; a SIGKILLed
 * writer leaves N runs that verify judges; SIGINT ends every job (130), even one that lands before the
 * last job has announced; 16 jobs that start at different times all join the group; bad --jobs values
 * are refused.
 */
import t from 'tap'
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, unlinkSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { listRuns } from '../../src/client/verify/listener-client.js'
import { parseEndpoint, type Endpoint } from '../../src/protocol/endpoint.js'
import { fileSize, runCli, runInProcess, sleep, spawnCli, startListener, tempDir, waitFor } from '../fixtures/cli.js'
import { runsEnded } from '../fixtures/runs-ended.js'

const small = ['--size', '4MiB']
/** The default record size. */
const recordBytes = 8192

/** Flips one byte in the middle of the first record of a data file (8 KiB records: block 1). */
function flipByte(path: string): void {
  const fd = openSync(path, 'r+')
  const byte = Buffer.alloc(1)
  const offset = 8192 + 4000
  readSync(fd, byte, 0, 1, offset)
  byte[0] = byte[0]! ^ 0xff
  writeSync(fd, byte, 0, 1, offset)
  closeSync(fd)
}

/** A listener and a `write --jobs` child, started and past its trail (every run line and the verify command). */
async function startJobs(t: { teardown(fn: () => unknown): void }, runs: number, args: readonly string[]) {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'data')
  const writer = spawnCli(['write', '--server', listener.server, '--file', file, '--trace-file', `${file}.trace`, ...small, ...args])
  t.teardown(() => writer.kill('SIGKILL'))
  let out = ''
  let err = ''
  writer.stdout!.on('data', (c: Buffer) => (out += c.toString()))
  writer.stderr!.on('data', (c: Buffer) => (err += c.toString()))
  const exit = new Promise<number | null>((resolve) => writer.on('close', (code) => resolve(code)))
  await waitFor(
    `${runs} run lines and the verify command (${err})`,
    () => (out.match(/^run /gm)?.length ?? 0) >= runs && /after a power cut/.test(out),
  )
  return { listener, file, writer, out: () => out, err: () => err, exit }
}

t.test('--jobs 3: three files, one group; verify passes, then fails on a flipped byte naming the file', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'data')
  const written = await runCli(['write', '--server', listener.server, '--file', file, '--duration', '1.5', '--jobs', '3', ...small])
  t.equal(written.code, 0, written.stderr)
  for (const k of [1, 2, 3]) t.ok(existsSync(`${file}.job${k}`), `job ${k} wrote ${file}.job${k}`)
  t.notOk(existsSync(file), 'no file at PATH itself')
  t.equal(written.stdout.match(/^after a power cut and reboot: /gm)?.length, 1, 'the verify command once before the loop, for after a cut')
  t.match(written.stdout, /\nto check it now: plugcheck verify .*\n$/, 'and in the summary of a write that ended by --duration: to run now')
  t.equal(written.stdout.match(/^run [0-9a-f]{16}: fdatasync, append, 8 KiB records/gm)?.length, 3, 'one summary per job')

  const verified = await runInProcess(['verify', '--server', listener.server, '--file', file, '--json'])
  t.equal(verified.code, 0, verified.stdout + verified.stderr)
  const report = JSON.parse(verified.stdout) as { verdict: string; runs: Array<{ path: string; acked: number; lost: number }> }
  t.same(
    report.runs.map((r) => r.path),
    [1, 2, 3].map((k) => `${file}.job${k}`),
    'verify judges the three jobs together, in job order',
  )
  t.ok(report.runs.every((r) => r.acked > 0 && r.lost === 0))

  flipByte(`${file}.job2`)
  const failed = await runInProcess(['verify', '--server', listener.server, '--file', file])
  t.equal(failed.code, 1, failed.stdout)
  t.match(failed.stdout, /^FAIL: fdatasync \(job 2 of 3\) lost acknowledged data \(1 of 3 tested runs\)/m)
  t.match(
    failed.stdout,
    new RegExp(
      // A job that wrapped its small file judges the records still in it (the latest in each slot).
      `1 of [\\d,]+ acknowledged records (still in the file \\(the latest in each slot\\) )?of run [0-9a-f]{16} \\(fdatasync, append, 8 KiB records, ${file}\\.job2\\) did not survive`,
    ),
  )
})

t.test("a job's file deleted mid-run ends the whole write as file-changed; every run is ended", async (t) => {
  const w = await startJobs(t, 4, ['--duration', '60', '--jobs', '2', '--method', 'fdatasync,none'])
  const { listener, file } = w
  // A run line comes before its file exists: wait for the loop's first record in it (a superblock, then records).
  await waitFor(`records in ${file}.none.job2`, () => fileSize(`${file}.none.job2`) >= 2 * recordBytes)
  unlinkSync(`${file}.none.job2`)
  t.equal(await w.exit, 3, w.err())
  t.match(w.err(), new RegExp(`plugcheck: the data file ${file}\\.none\\.job2 was deleted during the run`))
  t.notMatch(w.err(), /stopped by SIGTERM/, 'the jobs stopped for the failure do not speak of a signal')

  const listed = await runInProcess(['runs', '--server', listener.server, '--json'])
  const runs = (JSON.parse(listed.stdout) as { runs: Array<{ end?: { reason: string } }> }).runs
  t.equal(runs.length, 4)
  t.ok(
    runs.every((r) => r.end !== undefined && r.end.reason !== 'vanished'),
    `every run ended by its writer, none vanished: ${JSON.stringify(runs.map((r) => r.end))}`,
  )
  t.ok(runs.some((r) => r.end?.reason === 'file-changed'))
  const verified = await runInProcess(['verify', '--server', listener.server, '--file', file])
  t.equal(verified.code, 2, verified.stdout)
  t.match(
    verified.stdout,
    /^NOT JUDGED: run [0-9a-f]{16} \((none|fdatasync)\) ended because the data file .*\.none\.job2 was deleted during the run/m,
  )
})

t.test('SIGKILL mid-run: verify judges all N runs', async (t) => {
  const w = await startJobs(t, 3, ['--jobs', '3'])
  const { listener, file, writer } = w
  t.match(
    w.out(),
    new RegExp(`^after a power cut and reboot: plugcheck verify --server ${listener.server} --file ${file}$`, 'm'),
    'the trail names PATH, not a job file',
  )
  // Every job acks records before the kill (checked below): the listener is asked until each of the 3
  // runs holds acks, where a fixed second could pass on a loaded machine before a job got to write.
  const endpoint = parseEndpoint(listener.server) as Endpoint
  for (const ackedBy = Date.now() + 60_000; Date.now() < ackedBy; ) {
    const { runs } = await listRuns(endpoint, undefined, 10_000)
    if (runs.length === 3 && runs.every((r) => r.ackedThroughSeq > 0)) break // else the assertions below say which did not
    await sleep(50)
  }
  writer.kill('SIGKILL')
  await w.exit
  await runsEnded(listener.server, file) // the killed jobs' last acks and their ends taken in
  let verified = await runInProcess(['verify', '--server', listener.server, '--file', file, '--json'])
  // The listener notices the closed connections at once; until it has, verify says the run is live.
  for (let i = 0; i < 100 && verified.code === 2; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    verified = await runInProcess(['verify', '--server', listener.server, '--file', file, '--json'])
  }
  t.equal(verified.code, 0, verified.stdout + verified.stderr)
  const report = JSON.parse(verified.stdout) as { runs: Array<{ runId: string; path: string; acked: number; ended: string | null }> }
  t.equal(report.runs.length, 3, 'all three runs judged')
  t.ok(
    report.runs.every((r) => r.acked > 0),
    'every job acked records before the kill',
  )
  // --trace-file: one file per job (the lab's record-then-replay reads each run's completed syncs there), each
  // holding one run's seqs 1, 2, 3... in order, at least as many as it acked.
  t.notOk(existsSync(`${file}.trace`), 'no shared trace file')
  const traced = new Map<string, number>()
  for (let k = 1; k <= 3; k++) {
    const bytes = readFileSync(`${file}.trace.job${k}`)
    const ids = new Set<string>()
    let seqsInOrder = true
    for (let at = 0; at + 24 <= bytes.length; at += 24) {
      ids.add(bytes.subarray(at, at + 8).toString('hex'))
      seqsInOrder &&= bytes.readDoubleLE(at + 8) === at / 24 + 1
    }
    t.equal(ids.size, 1, `job ${k}'s trace holds one run`)
    t.ok(seqsInOrder, `job ${k}'s trace holds seqs 1..${bytes.length / 24}`)
    traced.set([...ids][0]!, bytes.length / 24)
  }
  for (const { runId, acked } of report.runs)
    t.ok((traced.get(runId) ?? 0) >= acked, `run ${runId}: traced ${traced.get(runId)} >= acked ${acked}`)
})

t.test('SIGINT ends every job (130) and every ack is recorded', async (t) => {
  const w = await startJobs(t, 2, ['--jobs', '2'])
  const { listener, writer } = w
  writer.kill('SIGINT')
  t.equal(await w.exit, 130, w.err())
  t.equal(w.err().match(/plugcheck: stopped by SIGINT; every ack is recorded at the listener/g)?.length, 1, 'said once')
  const listed = await runInProcess(['runs', '--server', listener.server, '--json'])
  const runs = (JSON.parse(listed.stdout) as { runs: Array<{ end?: { reason: string } }> }).runs
  t.same(
    runs.map((r) => r.end?.reason),
    ['interrupted', 'interrupted'],
  )
})

t.test('--jobs 16 --duration 0.01 on tmpfs: every job joins the group, however late it starts; verify judges all 16 runs', async (t) => {
  // Jobs start one by one (16 threads on a shared box, each loading its modules): the early ones must
  // not finish and close before the late ones announce, or the listener refuses the late ones' join
  // (the start barrier). A short duration makes that certain without the barrier.
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const memory = existsSync('/dev/shm') ? mkdtempSync('/dev/shm/plugcheck-jobs-') : tempDir(t)
  t.teardown(() => rmSync(memory, { recursive: true, force: true }))
  const file = join(memory, 'data')
  const written = await runCli(['write', '--server', listener.server, '--file', file, '--duration', '0.01', '--jobs', '16', ...small])
  t.equal(written.code, 0, written.stderr)
  t.notMatch(written.stderr, /refused/)
  const verified = await runInProcess(['verify', '--server', listener.server, '--file', file, '--json'])
  t.equal(verified.code, 0, verified.stdout + verified.stderr)
  const report = JSON.parse(verified.stdout) as { runs: Array<{ path: string; acked: number; lost: number }> }
  t.same(
    report.runs.map((r) => r.path),
    Array.from({ length: 16 }, (_, k) => `${file}.job${k + 1}`),
    'all 16 runs judged, in job order',
  )
  t.ok(
    report.runs.every((r) => r.acked > 0 && r.lost === 0),
    'every job wrote once all had joined',
  )
})

t.test('SIGINT as soon as the first run line prints: 130, and every announced run is ended as interrupted', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const jobs = 16
  const writer = spawnCli(['write', '--server', listener.server, '--file', join(dir, 'data'), '--jobs', String(jobs), ...small])
  t.teardown(() => writer.kill('SIGKILL'))
  let out = ''
  let err = ''
  writer.stdout!.on('data', (c: Buffer) => {
    out += c.toString()
    if (/^run /m.test(out) && writer.signalCode === null && !writer.killed) writer.kill('SIGINT')
  })
  writer.stderr!.on('data', (c: Buffer) => (err += c.toString()))
  const code = await new Promise<number | null>((resolve) => writer.on('close', (c) => resolve(c)))
  t.equal(code, 130, err)
  t.notMatch(err, /refused/)
  const listed = await runInProcess(['runs', '--server', listener.server, '--json'])
  const runs = (JSON.parse(listed.stdout) as { runs: Array<{ end?: { reason: string } }> }).runs
  t.equal(runs.length, jobs, 'every job announced its run (they wait for each other before stopping)')
  t.same(
    runs.map((r) => r.end?.reason),
    Array(jobs).fill('interrupted'),
    'every run ended by its writer, none vanished',
  )
})

t.test('--jobs must be a whole number from 1 to 64, and jobs x methods at most 64', async (t) => {
  for (const jobs of ['0', '1.5', '1000', 'many']) {
    const result = await runInProcess(['write', '--server', '127.0.0.1:9', '--file', '/tmp/plugcheck-jobs-never', '--jobs', jobs])
    t.equal(result.code, 2, `--jobs ${jobs}`)
    t.match(result.stderr, /^plugcheck: --jobs (must be|is at most)/, result.stderr)
  }
  const many = await runInProcess([
    'write',
    '--server',
    '127.0.0.1:9',
    '--file',
    '/tmp/plugcheck-jobs-never',
    '--jobs',
    '20',
    '--method',
    'fsync,fdatasync,none,open_datasync',
  ])
  t.equal(many.code, 2)
  t.match(many.stderr, /--jobs 20 with 4 methods makes 80 runs; one write makes at most 64/)
})
