/**
 * plugcheck bench against pg_test_fsync, row by row: ratio = plugcheck's ops/sec / pg_test_fsync's,
 * for every row both print, on the same file system, the two tools interleaved in one run (they
 * alternate which goes first each round, so drift on a shared machine hits both alike).
 *
 *   node --import tsx bench/pg-test-fsync-ratio.ts [--dir /tmp] [--secs 2] [--rounds 5]
 *
 * Prints a table (median ops/sec of each tool, the median of the per-round ratios and their range)
 * and writes the raw figures to bench/out/. No thresholds: this measures, it does not judge.
 *
 * pg_test_fsync comes from Debian's postgresql-15; it is installed with apt-get when missing.
 * Differences that remain by design: plugcheck writes fresh offsets across the 16 MiB file where
 * pg_test_fsync rewrites the same 8 kB, times every op, and fsyncs the file before each test.
 */
import { execFileSync, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { benchReportSchema, type BenchReport } from '../src/bench/schema.js'

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const pgTestFsync = '/usr/lib/postgresql/15/bin/pg_test_fsync'
const runTimeoutMs = 30 * 60 * 1000

const { values: args } = parseArgs({
  options: {
    dir: { type: 'string', default: '/tmp' },
    secs: { type: 'string', default: '2' },
    rounds: { type: 'string', default: '5' },
  },
})
const secs = Number(args.secs)
const rounds = Number(args.rounds)
if (!Number.isInteger(secs) || secs < 1) throw new Error('--secs must be a whole number >= 1 (pg_test_fsync takes whole seconds)')
if (!Number.isInteger(rounds) || rounds < 1) throw new Error('--rounds must be a whole number >= 1')
const dir = path.resolve(args.dir)

function ensurePgTestFsync(): void {
  if (fs.existsSync(pgTestFsync)) return
  console.error(`${pgTestFsync} is missing: installing Debian's postgresql-15`)
  execFileSync('apt-get', ['install', '-y', '--no-install-recommends', 'postgresql-15'], { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } })
}

/** Which section a pg_test_fsync heading starts, by its text. */
const pgSectionHeadings: readonly (readonly [RegExp, string])[] = [
  [/using one .* write/, 'one-write'],
  [/using two .* writes/, 'two-writes'],
  [/open_sync with different write sizes/, 'open-sync-sizes'],
  [/fsync on non-write file descriptor/, 'non-write-descriptor'],
  [/Non-sync'ed/, 'non-sync'],
]

const squash = (label: string) => label.trim().replace(/\s+/g, ' ')

/** "section|label" -> ops/sec, from pg_test_fsync's text output. */
function parsePgOutput(text: string): Map<string, number> {
  const figures = new Map<string, number>()
  let section = ''
  for (const line of text.split('\n')) {
    const heading = pgSectionHeadings.find(([pattern]) => pattern.test(line))
    if (heading) section = heading[1]
    const row = /^ {8}(.+?)\s+([\d.]+) ops\/sec\s+\d+ usecs\/op/.exec(line)
    if (row) figures.set(`${section}|${squash(row[1]!)}`, Number(row[2]))
  }
  return figures
}

/** Our row id for a pg_test_fsync row: same label, or pg's O_DIRECT rows against our "(direct)" ones. */
function matchRow(report: BenchReport, key: string): string | undefined {
  const [sectionId, label] = key.split('|') as [string, string]
  const section = report.sections.find((s) => s.id === sectionId)
  return section?.rows.find((row) => squash(row.label) === label || squash(row.label) === `${label} (direct)`)?.id
}

function runPg(): Map<string, number> {
  const result = spawnSync(pgTestFsync, ['-s', String(secs), '-f', path.join(dir, 'pg_test_fsync.out')], { encoding: 'utf8', timeout: runTimeoutMs })
  if (result.status !== 0) throw new Error(`pg_test_fsync failed (${result.status}): ${result.stderr}`)
  return parsePgOutput(result.stdout)
}

function runPlugcheck(): BenchReport {
  const result = spawnSync(process.execPath, [path.join(repoRoot, 'bin/plugcheck.js'), 'bench', '--secs', String(secs), '--file', dir, '--json'], {
    encoding: 'utf8',
    timeout: runTimeoutMs,
    maxBuffer: 64 * 1024 * 1024,
  })
  if (result.status !== 0) throw new Error(`plugcheck bench failed (${result.status}): ${result.stderr}`)
  return benchReportSchema.parse(JSON.parse(result.stdout))
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

interface Pair {
  readonly pgOpsPerSec: number
  readonly plugcheckOpsPerSec: number
}

ensurePgTestFsync()
fs.mkdirSync(dir, { recursive: true })
const pairsByKey = new Map<string, Pair[]>()
const labelsByKey = new Map<string, string>()
let fileSystem = 'unknown'
for (let round = 0; round < rounds; round++) {
  let pg: Map<string, number>
  let ours: BenchReport
  if (round % 2 === 0) {
    pg = runPg()
    ours = runPlugcheck()
  } else {
    ours = runPlugcheck()
    pg = runPg()
  }
  fileSystem = ours.fingerprint.target.fileSystem.type
  for (const [key, pgOpsPerSec] of pg) {
    const rowId = matchRow(ours, key)
    const row = ours.sections.flatMap((s) => s.rows).find((r) => r.id === rowId)
    if (row === undefined || row.opsPerSec === null) continue
    labelsByKey.set(key, `${key.split('|')[0]}: ${row.label.trim()}`)
    pairsByKey.set(key, [...(pairsByKey.get(key) ?? []), { pgOpsPerSec, plugcheckOpsPerSec: row.opsPerSec }])
  }
  console.error(`round ${round + 1}/${rounds} done`)
}

const header = `pg_test_fsync 15 vs plugcheck bench on ${dir} (${fileSystem}), ${rounds} interleaved rounds, ${secs} s per test`
const lines = [header, '', `${'row'.padEnd(46)} ${'pg ops/s'.padStart(11)} ${'plugcheck'.padStart(11)} ${'ratio'.padStart(6)}  range`]
const table: { row: string; pgOpsPerSec: number; plugcheckOpsPerSec: number; ratio: number; ratioMin: number; ratioMax: number }[] = []
for (const [key, pairs] of pairsByKey) {
  const ratios = pairs.map((p) => p.plugcheckOpsPerSec / p.pgOpsPerSec)
  const entry = {
    row: labelsByKey.get(key)!,
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
fs.writeFileSync(outFile, `${JSON.stringify({ dir, fileSystem, secs, rounds, table, pairs: Object.fromEntries(pairsByKey) }, null, 2)}\n`)
console.error(`raw figures: ${path.relative(repoRoot, outFile)}`)
