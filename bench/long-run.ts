/**
 * Verifying a long run through the listener: a crafted listener directory holding one group of
 * --methods runs, each with --days of acks at one span per ~100 ms (a week: maxStoredSpans, the most
 * a run keeps, ~12 billion seqs), loaded by a real `plugcheck listen` (a child process), then
 * `plugcheck verify` (a child process, default --listener-timeout) against crafted data files twice:
 *
 * - **fail**: one seq lost near the end of every file (where a cut loses records), so verify reads the
 *   span pages from that seq on to find its acknowledgement window;
 * - **pass**: the files intact, so no span is read at all;
 * - **all pages** (this tree only): every page of every run read as verify reads them when a run's
 *   first seq is lost too (test/fixtures/read-all-spans.ts, a child process): time and peak memory.
 *
 * Printed per tree: the listener's start (replaying the logs) and its resident memory once started,
 * each verify's exit code, time and peak memory (VmHWM, sampled every 50 ms), and the listener's peak
 * over the whole run. --baseline TREE runs the same against another checkout (a `git worktree` of an
 * older commit, with node_modules), before this one, on the same directory.
 *
 * Usage: node --import tsx bench/long-run.ts [--days 7] [--methods fdatasync,fsync] [--dir DIR] [--baseline TREE]
 */
import { execFile, spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs, promisify } from 'node:util'
import { maxStoredSpans } from '../src/protocol/messages.js'
import type { RunMeta } from '../src/record/format.js'
import { craftLongRun, repairDataFiles, spanGapMs, watchPeakRss, type LongRun } from '../test/fixtures/long-run-store.js'
import { plugcheckBin, startListenerProcess, table } from './common.js'

const readAllSpans = fileURLToPath(new URL('../test/fixtures/read-all-spans.ts', import.meta.url))
const listenerStartTimeoutMs = 300_000
const verifyTimeoutMs = 600_000

interface VerifyFigures {
  readonly code: number | null
  readonly seconds: number
  readonly peakMiB: number
  readonly firstLine: string
}

interface PagesFigures {
  readonly seconds: number
  readonly peakMiB: number
  readonly pages: number
}

interface TreeFigures {
  readonly label: string
  /** Per run; null for a tree that does not page. */
  readonly allPages: PagesFigures[] | null
  readonly startSeconds: number
  readonly heldMiB: number
  readonly fail: VerifyFigures
  readonly pass: VerifyFigures
  readonly listenerPeakMiB: number
}

function rssMiB(pid: number): number {
  const watch = watchPeakRss(pid)
  return watch.stop()
}

async function startListener(
  bin: string,
  dir: string,
): Promise<{ port: number; pid: number; stop(): Promise<void>; startSeconds: number }> {
  const startedMs = performance.now()
  const listener = await startListenerProcess(dir, bin, listenerStartTimeoutMs)
  return { port: listener.port, pid: listener.child.pid!, startSeconds: (performance.now() - startedMs) / 1000, stop: listener.stop }
}

async function verify(bin: string, port: number, file: string): Promise<VerifyFigures> {
  const startedMs = performance.now()
  const child = spawn(process.execPath, [bin, 'verify', '--server', `127.0.0.1:${port}`, '--file', file], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const watch = watchPeakRss(child.pid!)
  let output = ''
  child.stdout!.on('data', (c: Buffer) => (output += c.toString()))
  child.stderr!.on('data', (c: Buffer) => (output += c.toString()))
  const timer = setTimeout(() => child.kill('SIGKILL'), verifyTimeoutMs)
  const code = await new Promise<number | null>((done) => child.once('close', (c) => done(c)))
  clearTimeout(timer)
  return { code, seconds: (performance.now() - startedMs) / 1000, peakMiB: watch.stop(), firstLine: output.split('\n')[0]!.slice(0, 140) }
}

/** Every page of a run, read by verify's own code in a child process. */
async function readAllPages(port: number, long: LongRun, meta: RunMeta): Promise<PagesFigures> {
  const args = ['--import', 'tsx', readAllSpans, `127.0.0.1:${port}`, meta.runId, String(long.throughSeq), String(long.announcedMs)]
  const { stdout } = await promisify(execFile)(process.execPath, args, { timeout: verifyTimeoutMs })
  const read = JSON.parse(stdout) as { pages: number; seconds: number; peakMiB: number }
  return { seconds: read.seconds, peakMiB: read.peakMiB, pages: read.pages }
}

/** lose(): the data files with a seq lost near the end; repair(): intact. pages: read every page of every run too. */
async function measureTree(
  label: string,
  bin: string,
  dir: string,
  long: LongRun,
  pages: boolean,
  lose: () => void,
  repair: () => void,
): Promise<TreeFigures> {
  const file = join(dir, 'data')
  lose()
  const listener = await startListener(bin, join(dir, 'listener'))
  try {
    const heldMiB = rssMiB(listener.pid)
    const listenerPeak = watchPeakRss(listener.pid)
    const fail = await verify(bin, listener.port, file)
    repair()
    const pass = await verify(bin, listener.port, file)
    const allPages: PagesFigures[] = []
    if (pages) for (const meta of long.metas) allPages.push(await readAllPages(listener.port, long, meta))
    return {
      label,
      startSeconds: listener.startSeconds,
      heldMiB,
      fail,
      pass,
      allPages: pages ? allPages : null,
      listenerPeakMiB: listenerPeak.stop(),
    }
  } finally {
    await listener.stop()
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      days: { type: 'string', default: '7' },
      methods: { type: 'string', default: 'fdatasync,fsync' },
      dir: { type: 'string' },
      baseline: { type: 'string' },
    },
  })
  const days = Number(values.days)
  const spansPerRun = Math.round((days * 86_400_000) / spanGapMs)
  if (!(spansPerRun >= 1 && spansPerRun <= maxStoredSpans))
    throw new Error(`--days must give 1 to ${maxStoredSpans} spans a run (a week at most)`)
  const methods = values.methods.split(',') as Array<RunMeta['method']>
  const dir = mkdtempSync(join(values.dir ?? tmpdir(), 'plugcheck-long-run-'))
  try {
    const file = join(dir, 'data')
    process.stderr.write(`crafting ${methods.length} runs of ${spansPerRun.toLocaleString('en-US')} spans (${days} days) in ${dir}\n`)
    const craftedMs = performance.now()
    const long = craftLongRun({ dir: join(dir, 'listener'), file, methods, spansPerRun })
    // One seq near the end lost in every file: verify must read every page to find its window.
    const lostSeq = long.throughSeq - 10
    process.stderr.write(
      `crafted in ${((performance.now() - craftedMs) / 1000).toFixed(1)} s: ${long.throughSeq.toLocaleString('en-US')} seqs a run\n`,
    )
    const trees: Array<[string, string]> = [['this tree', plugcheckBin]]
    if (values.baseline !== undefined) trees.unshift(['baseline', join(resolve(values.baseline), 'bin', 'plugcheck.js')])
    const rows: TreeFigures[] = []
    for (const [label, bin] of trees) {
      process.stderr.write(`${label}: ${bin}\n`)
      rows.push(
        await measureTree(
          label,
          bin,
          dir,
          long,
          label === 'this tree',
          () => repairDataFiles(long, new Set([lostSeq])),
          () => repairDataFiles(long),
        ),
      )
    }
    printFigures(rows)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

function printFigures(rows: readonly TreeFigures[]): void {
  const mib = (v: number): string => `${Math.round(v)} MiB`
  const s = (v: number): string => `${v.toFixed(1)} s`
  const verifyCell = (v: VerifyFigures): string => `exit ${v.code}, ${s(v.seconds)}, ${mib(v.peakMiB)}`
  process.stdout.write(
    `${table([
      ['tree', 'listener start', 'listener held', 'verify, a seq lost', 'verify, intact', 'all pages, per run', 'listener peak'],
      ...rows.map((r) => [
        r.label,
        s(r.startSeconds),
        mib(r.heldMiB),
        verifyCell(r.fail),
        verifyCell(r.pass),
        r.allPages === null ? '-' : r.allPages.map((p) => `${p.pages} pages, ${s(p.seconds)}, ${mib(p.peakMiB)}`).join('; '),
        mib(r.listenerPeakMiB),
      ]),
    ])}\n`,
  )
  for (const r of rows) process.stdout.write(`${r.label}: fail said "${r.fail.firstLine}"; pass said "${r.pass.firstLine}"\n`)
}

await main()
