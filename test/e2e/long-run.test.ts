/**
 * A week of two methods verified through a real listener (child processes, real TCP on 127.0.0.1),
 * with the default --listener-timeout: each run holds the most spans a run keeps (maxStoredSpans, one
 * per 100 ms for a week), ~12 billion acknowledged seqs, and two seqs lost in each data file, one
 * six million spans in. The verdict names them with the windows in which the listener received their
 * acks, read page by page from the first lost seq; an intact copy passes; reading every page of both
 * runs (what verify reads when a run's first seq is lost too) holds one page at a time; a protocol 3
 * verifier is told why it cannot be answered. Memory stays bounded on both sides: the listener holds
 * the spans in a compact table and never builds a reply of all of them, verify holds one page.
 *
 * (Before, the listener tried to build one ~400 MB reply: verify gave up after 10 s with "did not
 * answer", the listener peaked at ~2.7 GB, and with more room it said the reply "does not fit the
 * listener's budget... try again later".)
 */
import t from 'tap'
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { craftLongRun, repairDataFiles, seqsPerSpan, watchPeakRss } from '../fixtures/long-run-store.js'
import { spawnCli, startListener, tempDir, type CliResult } from '../fixtures/cli.js'
import { Peer } from '../fixtures/peer.js'
import { bundledChild } from '../fixtures/bundled-child.js'
import { maxSpansPerPage } from '../../src/protocol/messages.js'

/** Bounds, not timings: far above what the listener (~450 MiB) and verify (~130 MiB) take, far below the old reply. */
const listenerPeakMiBMax = 1024
const verifierPeakMiBMax = 512

async function runWatched(args: readonly string[], timeoutMs = 120_000): Promise<CliResult & { peakMiB: number }> {
  const child = spawnCli(args)
  const watch = watchPeakRss(child.pid!)
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()))
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
  const code = await new Promise<number>((resolve) => child.on('close', (c) => resolve(c ?? -1)))
  clearTimeout(timer)
  return { code, stdout, stderr, peakMiB: watch.stop() }
}

t.test('a week of two methods verifies through the listener with the default timeout, in bounded memory', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'data')
  const listenerDir = join(dir, 'listener')
  const spans = 7 * 24 * 36_000
  // The file holds the last 4000 seqs (two spans); one seq of each span lost.
  const throughSeq = spans * seqsPerSpan
  const lost = [throughSeq - 3000, throughSeq - 10]
  const long = craftLongRun({
    dir: listenerDir,
    file,
    methods: ['fdatasync', 'fsync'],
    spansPerRun: spans,
    slotCount: 4000,
    lostSeqs: new Set(lost),
  })
  t.equal(long.throughSeq, throughSeq)

  const listener = await startListener(listenerDir, [], 300_000)
  t.teardown(() => listener.kill())
  const listenerPeak = watchPeakRss(listener.process.pid!)

  const failed = await runWatched(['verify', '--server', listener.server, '--file', file, '--json'])
  t.equal(failed.code, 1, `FAIL, exit 1 (${failed.stderr.trim()})`)
  const report = failed.stdout === '' ? { runs: [] } : JSON.parse(failed.stdout)
  t.equal(report.runs.length, 2, 'both methods judged')
  for (const run of report.runs) {
    t.match(
      run,
      { verdict: 'fail', acked: throughSeq, superseded: throughSeq - 4000, intact: 3998, lost: 2, lostRangeCount: 2 },
      `${run.method}: the two lost seqs`,
    )
    t.same(
      run.lostRanges.map((r: { fromSeq: number; toSeq: number; ackedFromMs: number; ackedToMs: number }) => [
        r.fromSeq,
        r.toSeq,
        r.ackedFromMs,
        r.ackedToMs,
      ]),
      lost.map((seq) => [seq, seq, long.ackedMs(seq), long.ackedMs(seq)]),
      `${run.method}: each lost seq with the window in which the listener received its ack, a week into the run`,
    )
  }
  t.ok(failed.peakMiB < verifierPeakMiBMax, `verify peaked at ${Math.round(failed.peakMiB)} MiB (bound ${verifierPeakMiBMax})`)

  repairDataFiles(long)
  const passed = await runWatched(['verify', '--server', listener.server, '--file', file])
  t.equal(passed.code, 0, `an intact copy passes (${passed.stderr.trim()})`)
  t.match(passed.stdout, /^PASS: every acknowledged record of all 2 methods survived/)

  // Every page of each run, from seq 1 to the last: the windows of both ends, one page held at a time.
  const readAll = await bundledChild(fileURLToPath(new URL('../fixtures/read-all-spans.ts', import.meta.url)))
  for (const meta of long.metas) {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [readAll, listener.server, meta.runId, String(throughSeq), String(long.announcedMs)],
      { timeout: 120_000 },
    )
    const read = JSON.parse(stdout) as { windows: number[][]; pages: number; peakMiB: number }
    t.same(
      read.windows,
      [1, throughSeq].map((seq) => [long.ackedMs(seq), long.ackedMs(seq)]),
      `${meta.method}: the windows of seq 1 and seq ${throughSeq}`,
    )
    t.equal(read.pages, Math.ceil(spans / maxSpansPerPage), `${meta.method}: every page read (${read.pages})`)
    t.ok(
      read.peakMiB < verifierPeakMiBMax,
      `${meta.method}: reading all ${spans} spans peaked at ${Math.round(read.peakMiB)} MiB (bound ${verifierPeakMiBMax})`,
    )
  }

  // A verifier of protocol 3 would take every span in one reply: it is told why not, never sent a partial one.
  const old = await Peer.open(listener.port)
  old.send({ type: 'hello', protocol: 3, role: 'verifier' })
  old.send({ type: 'query', host: long.metas[0]!.host, requestedPath: file })
  t.match(await old.next('error', 60_000), {
    code: 'protocol-version',
    message: /are 12096000 spans, more than one reply of protocol 3 carries .*run the same plugcheck version here/,
  })
  old.close()

  const listenerPeakMiB = listenerPeak.stop()
  t.ok(listenerPeakMiB < listenerPeakMiBMax, `the listener peaked at ${Math.round(listenerPeakMiB)} MiB (bound ${listenerPeakMiBMax})`)
})
