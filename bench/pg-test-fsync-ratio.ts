/**
 * plugcheck bench against pg_test_fsync, row by row: ratio = plugcheck's ops/sec / pg_test_fsync's,
 * for every row both print, on the same file system, the two interleaved in one run.
 *
 *   node --import tsx bench/pg-test-fsync-ratio.ts [--dir /tmp] [--secs 2] [--rounds 5] [--mode rows|runs]
 *
 * --mode rows (default) interleaves test by test, so that each pair is measured seconds apart, not
 * half a minute: pg_test_fsync runs with a small LD_PRELOAD shim (compiled here with gcc) whose
 * alarm() - pg_test_fsync calls it to start each test's timer - first waits for a byte from us.
 * While pg_test_fsync waits, we run the matching row with the code plugcheck bench uses (runRow,
 * in this process); then we let it go. Each round alternates who goes first.
 * --mode runs interleaves whole runs: pg_test_fsync, then `plugcheck bench --json` (the CLI), and
 * the reverse next round. On a shared machine its pairs are noisier; it checks the CLI path.
 *
 * Prints a table (median ops/sec of each tool, the median of the per-round ratios and their range)
 * and writes the raw figures to bench/out/. No thresholds: this measures, it does not judge.
 *
 * pg_test_fsync comes from Debian's postgresql-15; it is installed with apt-get when missing.
 * Differences that remain by design: plugcheck writes fresh offsets across the 16 MiB file where
 * pg_test_fsync rewrites the same 8 kB, times every op, and settles the file before each test.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import type { Socket } from 'node:net'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { runRow } from '../src/bench/bench.js'
import { collectFingerprint } from '../src/env/fingerprint.js'
import { benchReportSchema, type BenchReport } from '../src/bench/schema.js'
import { createScratchFile, fillScratchFile, removeScratchFile } from '../src/bench/scratch-file.js'
import { benchPlan, type RowSpec } from '../src/bench/sections/plan.js'
import { nativePort } from '../src/native/index.js'

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const pgTestFsync = '/usr/lib/postgresql/15/bin/pg_test_fsync'
const runTimeoutMs = 30 * 60 * 1000
const recordSizeBytes = 8192

const { values: args } = parseArgs({
  options: {
    dir: { type: 'string', default: '/tmp' },
    secs: { type: 'string', default: '2' },
    rounds: { type: 'string', default: '5' },
    mode: { type: 'string', default: 'rows' },
  },
})
const secs = Number(args.secs)
const rounds = Number(args.rounds)
if (!Number.isInteger(secs) || secs < 1) throw new Error('--secs must be a whole number >= 1 (pg_test_fsync takes whole seconds)')
if (!Number.isInteger(rounds) || rounds < 1) throw new Error('--rounds must be a whole number >= 1')
if (args.mode !== 'rows' && args.mode !== 'runs') throw new Error('--mode is rows or runs')
const dir = path.resolve(args.dir)

function ensurePgTestFsync(): void {
  if (fs.existsSync(pgTestFsync)) return
  console.error(`${pgTestFsync} is missing: installing Debian's postgresql-15`)
  execFileSync('apt-get', ['install', '-y', '--no-install-recommends', 'postgresql-15'], {
    stdio: 'inherit',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  })
}

// --- pg_test_fsync's output -----------------------------------------------------------------

/** Which section a pg_test_fsync heading starts, by its text. */
const pgSectionHeadings: readonly (readonly [RegExp, string])[] = [
  [/using one .* write/, 'one-write'],
  [/using two .* writes/, 'two-writes'],
  [/open_sync with different write sizes/, 'open-sync-sizes'],
  [/fsync on non-write file descriptor/, 'non-write-descriptor'],
  [/Non-sync'ed/, 'non-sync'],
]

const squash = (label: string) => label.trim().replace(/\s+/g, ' ')

/** Measured rows in pg_test_fsync's order: "section|label" and ops/sec. */
function parsePgOutput(text: string): { key: string; opsPerSec: number }[] {
  const rows: { key: string; opsPerSec: number }[] = []
  let section = ''
  for (const line of text.split('\n')) {
    const heading = pgSectionHeadings.find(([pattern]) => pattern.test(line))
    if (heading) section = heading[1]
    const row = /^ {8}(.+?)\s+([\d.]+) ops\/sec\s+\d+ usecs\/op/.exec(line)
    if (row) rows.push({ key: `${section}|${squash(row[1]!)}`, opsPerSec: Number(row[2]) })
  }
  return rows
}

/** Our row for a pg_test_fsync row: same label, or pg_test_fsync's O_DIRECT rows against our "(direct)" ones. */
function matchSpec(specs: readonly RowSpec[], key: string): RowSpec | undefined {
  const [sectionId, label] = key.split('|') as [string, string]
  return specs.find(
    (spec) => spec.id.startsWith(`${sectionId}/`) && (squash(spec.label) === label || squash(spec.label) === `${label} (direct)`),
  )
}

/** Rows of plugcheck bench that pg_test_fsync has no test for. */
const plugcheckOnlyMethods: ReadonlySet<string> = new Set(['pwritev2_dsync', 'fsync_writethrough', 'barrier_fsync', 'flush_data_only'])

/** pg_test_fsync's timed rows on Linux, in its order (the rows it and we both print). */
const sharedSpecs: RowSpec[] = benchPlan(recordSizeBytes)
  .flatMap((section) => section.rows)
  .filter((spec) => !(spec.shape === 'sync-at-open' && !spec.direct) && !plugcheckOnlyMethods.has(spec.method))

// --- one round --------------------------------------------------------------------------------

interface Pair {
  readonly key: string
  readonly label: string
  readonly pgOpsPerSec: number
  readonly plugcheckOpsPerSec: number
}

const shimSource = `
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>
/* pg_test_fsync's START_TIMER calls alarm(secs): wait for the driver's go before each test. */
unsigned int alarm(unsigned int seconds) {
  static unsigned int (*real)(unsigned int);
  if (!real) real = (unsigned int (*)(unsigned int))dlsym(RTLD_NEXT, "alarm");
  const char *fd = getenv("PLUGCHECK_RATIO_FD");
  if (fd != NULL && seconds > 0) {
    char byte = 'r';
    if (write(atoi(fd), &byte, 1) != 1 || read(atoi(fd), &byte, 1) != 1) _exit(99);
  }
  return real(seconds);
}
`

function buildShim(): string {
  const buildDir = fs.mkdtempSync(path.join(os.tmpdir(), 'plugcheck-ratio-shim-'))
  fs.writeFileSync(path.join(buildDir, 'shim.c'), shimSource)
  execFileSync('gcc', ['-O2', '-shared', '-fPIC', '-o', path.join(buildDir, 'shim.so'), path.join(buildDir, 'shim.c'), '-ldl'])
  process.on('exit', () => fs.rmSync(buildDir, { recursive: true, force: true }))
  return path.join(buildDir, 'shim.so')
}

/** Interleaves test by test: pg_test_fsync waits in alarm() while we measure the matching row. */
async function roundByRows(shim: string, pgFirst: boolean): Promise<Pair[]> {
  const scratch = createScratchFile(dir)
  try {
    fillScratchFile(scratch)
    const fingerprint = collectFingerprint(scratch.path, nativePort().fileSystemOf(scratch.path))
    const child = spawn(pgTestFsync, ['-s', String(secs), '-f', path.join(dir, 'pg_test_fsync.out')], {
      stdio: ['ignore', 'pipe', 'inherit', 'pipe'],
      env: { ...process.env, LD_PRELOAD: shim, PLUGCHECK_RATIO_FD: '3' },
    })
    let stdout = ''
    child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
    const channel = child.stdio[3] as Socket
    let pending = 0
    let wake: (() => void) | null = null
    channel.on('data', (chunk: Buffer) => {
      pending += chunk.length
      wake?.()
    })
    /** Resolves true when pg_test_fsync is waiting to start its next test, false when it exited. */
    const nextTest = async (): Promise<boolean> => {
      for (;;) {
        if (pending > 0) {
          pending--
          return true
        }
        const woken = new Promise<void>((resolve) => (wake = resolve))
        const done = await Promise.race([woken.then(() => false), exited.then(() => true)])
        wake = null
        if (done && pending === 0) return false
      }
    }
    const ours: number[] = []
    const measureOurs = async (index: number) => {
      const spec = sharedSpecs[index]
      if (spec === undefined) throw new Error(`pg_test_fsync started more tests than the ${sharedSpecs.length} shared rows`)
      const row = await runRow(spec, scratch, fingerprint, secs, () => null)
      if (row.opsPerSec === null) throw new Error(`${spec.id}: ${row.status} ${row.reason}`)
      ours.push(row.opsPerSec)
    }
    let index = 0
    let waiting = await nextTest()
    while (waiting) {
      if (pgFirst) {
        channel.write('g')
        waiting = await nextTest()
        await measureOurs(index)
      } else {
        await measureOurs(index)
        channel.write('g')
        waiting = await nextTest()
      }
      index++
    }
    const code = await exited
    if (code !== 0) throw new Error(`pg_test_fsync exited with ${code}`)
    const pg = parsePgOutput(stdout)
    if (pg.length !== ours.length) throw new Error(`pg_test_fsync printed ${pg.length} rows for ${ours.length} tests`)
    return pg.map(({ key, opsPerSec }, i) => {
      const spec = matchSpec(sharedSpecs, key)
      if (spec === undefined || spec !== sharedSpecs[i])
        throw new Error(`pg_test_fsync's test ${i + 1} is ${key}, not ${sharedSpecs[i]?.id}`)
      return { key, label: `${spec.id.split('/')[0]}: ${spec.label}`, pgOpsPerSec: opsPerSec, plugcheckOpsPerSec: ours[i]! }
    })
  } finally {
    removeScratchFile(scratch)
  }
}

function runPgAlone(): { key: string; opsPerSec: number }[] {
  const result = spawnSync(pgTestFsync, ['-s', String(secs), '-f', path.join(dir, 'pg_test_fsync.out')], {
    encoding: 'utf8',
    timeout: runTimeoutMs,
  })
  if (result.status !== 0) throw new Error(`pg_test_fsync failed (${result.status}): ${result.stderr}`)
  return parsePgOutput(result.stdout)
}

function runPlugcheckCli(): BenchReport {
  const result = spawnSync(
    process.execPath,
    [path.join(repoRoot, 'bin/plugcheck.js'), 'bench', '--secs', String(secs), '--file', dir, '--json'],
    {
      encoding: 'utf8',
      timeout: runTimeoutMs,
      maxBuffer: 64 * 1024 * 1024,
    },
  )
  if (result.status !== 0) throw new Error(`plugcheck bench failed (${result.status}): ${result.stderr}`)
  return benchReportSchema.parse(JSON.parse(result.stdout))
}

/** Interleaves whole runs of the two command-line tools. */
function roundByRuns(pgFirst: boolean): Pair[] {
  let pg: { key: string; opsPerSec: number }[]
  let ours: BenchReport
  if (pgFirst) {
    pg = runPgAlone()
    ours = runPlugcheckCli()
  } else {
    ours = runPlugcheckCli()
    pg = runPgAlone()
  }
  const rows = ours.sections.flatMap((s) => s.rows)
  return pg.flatMap(({ key, opsPerSec }) => {
    const spec = matchSpec(sharedSpecs, key)
    const row = rows.find((r) => r.id === spec?.id)
    if (spec === undefined || row?.opsPerSec == null) return []
    return [{ key, label: `${spec.id.split('/')[0]}: ${spec.label}`, pgOpsPerSec: opsPerSec, plugcheckOpsPerSec: row.opsPerSec }]
  })
}

// --- main -------------------------------------------------------------------------------------

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

ensurePgTestFsync()
fs.mkdirSync(dir, { recursive: true })
const shim = args.mode === 'rows' ? buildShim() : ''
const pairsByKey = new Map<string, Pair[]>()
for (let round = 0; round < rounds; round++) {
  const pgFirst = round % 2 === 0
  const pairs = args.mode === 'rows' ? await roundByRows(shim, pgFirst) : roundByRuns(pgFirst)
  for (const pair of pairs) pairsByKey.set(pair.key, [...(pairsByKey.get(pair.key) ?? []), pair])
  console.error(`round ${round + 1}/${rounds} done`)
}

const probe = createScratchFile(dir)
const fileSystem = collectFingerprint(probe.path, nativePort().fileSystemOf(probe.path)).target.fileSystem.type
removeScratchFile(probe)

const interleave = args.mode === 'rows' ? 'test by test' : 'run by run'
const lines = [
  `pg_test_fsync 15 vs plugcheck bench on ${dir} (${fileSystem}), ${rounds} rounds interleaved ${interleave}, ${secs} s per test`,
  '',
  `${'row'.padEnd(46)} ${'pg ops/s'.padStart(11)} ${'plugcheck'.padStart(11)} ${'ratio'.padStart(6)}  range`,
]
const table: { row: string; pgOpsPerSec: number; plugcheckOpsPerSec: number; ratio: number; ratioMin: number; ratioMax: number }[] = []
for (const pairs of pairsByKey.values()) {
  const ratios = pairs.map((p) => p.plugcheckOpsPerSec / p.pgOpsPerSec)
  const entry = {
    row: pairs[0]!.label,
    pgOpsPerSec: median(pairs.map((p) => p.pgOpsPerSec)),
    plugcheckOpsPerSec: median(pairs.map((p) => p.plugcheckOpsPerSec)),
    ratio: median(ratios),
    ratioMin: Math.min(...ratios),
    ratioMax: Math.max(...ratios),
  }
  table.push(entry)
  lines.push(
    `${entry.row.padEnd(46)} ${entry.pgOpsPerSec.toFixed(0).padStart(11)} ${entry.plugcheckOpsPerSec.toFixed(0).padStart(11)} ${entry.ratio.toFixed(2).padStart(6)}  ${entry.ratioMin.toFixed(2)}-${entry.ratioMax.toFixed(2)}`,
  )
}
console.log(lines.join('\n'))
const outDir = path.join(repoRoot, 'bench', 'out')
fs.mkdirSync(outDir, { recursive: true })
const outFile = path.join(outDir, `pg-test-fsync-ratio-${new Date().toISOString().replace(/[:.]/g, '-')}.json`)
fs.writeFileSync(
  outFile,
  `${JSON.stringify({ dir, fileSystem, secs, rounds, mode: args.mode, table, pairs: Object.fromEntries(pairsByKey) }, null, 2)}\n`,
)
console.error(`raw figures: ${path.relative(repoRoot, outFile)}`)
