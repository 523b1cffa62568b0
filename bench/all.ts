/**
 * `npm run bench`: every benchmark of this folder, one after another, each printing its own figures.
 * By default a short run of each (a minute or two in all per benchmark at most); `--full` runs each
 * with its own defaults (hours: the week-long and fleet runs). `--only a,b` picks benchmarks by name,
 * `--list` prints the table; arguments after `--` go to every benchmark run. Benchmarks print figures
 * and never pass or fail on a time threshold, so this exits 0 when every benchmark it ran exited 0, 1
 * otherwise, and 2 on a usage mistake (an unknown flag, --only naming no benchmark or an unknown one).
 *
 * A benchmark that needs what this machine lacks (root, gcc, pg_test_fsync, an lmdb scratch install)
 * is not run, and the reason is printed with it: nothing is left out silently.
 */
import { spawnSync } from 'node:child_process'
import { parseArgs } from 'node:util'
import { repoRoot } from './common.js'

type Need = 'root' | 'gcc' | 'pg_test_fsync'

interface Bench {
  readonly name: string
  /** What it prints. */
  readonly figure: string
  /** Arguments of the short run; the full run passes none (each benchmark's defaults). */
  readonly quick: readonly string[]
  readonly needs: readonly Need[]
  /** Extra node flags. */
  readonly node?: readonly string[]
  /** Runs only when asked for by name (--only): it needs a set-up of its own. */
  readonly byNameOnly?: string
}

const benches: readonly Bench[] = [
  {
    name: 'write-rate',
    figure: 'records/s of write --method fdatasync against a C loop of pwrite + fdatasync',
    quick: ['--rounds', '1', '--seconds', '2', '--targets', 'tmpfs'],
    needs: ['gcc'],
  },
  {
    name: 'jobs-rate',
    figure: 'records/s of write --jobs N against --jobs 1',
    quick: ['--rounds', '1', '--seconds', '2', '--jobs', '1,2', '--targets', 'tmpfs'],
    needs: [],
  },
  {
    name: 'ack-lag',
    figure: "a sync's return to the listener holding its ack",
    quick: ['--rounds', '1', '--seconds', '2', '--targets', 'tmpfs'],
    needs: [],
  },
  {
    name: 'listener-cpu',
    figure: 'listener CPU per ack for N writers',
    quick: ['--clients', '8', '--rounds', '1', '--seconds', '2'],
    needs: [],
  },
  { name: 'startup', figure: 'start-up time of --help, --version, methods against bare node', quick: ['--rounds', '5'], needs: [] },
  {
    name: 'test-loader',
    figure: "a test file's CPU before its first assertion, by TypeScript loader",
    quick: ['--rounds', '2'],
    needs: [],
  },
  {
    name: 'verify-vs-dd',
    figure: "verify's time and memory against dd on the same file",
    quick: ['--size', '256MiB', '--rounds', '1'],
    needs: [],
  },
  { name: 'token-guesses', figure: 'wrong-token guesses answered per second from one address', quick: ['--seconds', '2'], needs: [] },
  {
    name: 'store-rounds',
    figure: 'commit-round times of the ack store with many live runs',
    quick: ['--runs', '256', '--seconds', '3'],
    needs: [],
  },
  { name: 'store-restart', figure: "a listener's restart on many ended runs", quick: ['--runs', '2000'], needs: [], node: ['--expose-gc'] },
  { name: 'fleet-week', figure: 'a fleet for one listener: memory, restart, ack latency', quick: ['--quick'], needs: [] },
  {
    name: 'long-run',
    figure: 'a long run through the listener and its verifies',
    quick: ['--days', '1', '--methods', 'fdatasync'],
    needs: [],
  },
  { name: 'frozen-disk-hello', figure: "a welcome while the listener's file system is frozen", quick: ['--freeze', '2'], needs: ['root'] },
  {
    name: 'pg-test-fsync-ratio',
    figure: 'plugcheck bench against pg_test_fsync, row by row',
    quick: ['--secs', '1', '--rounds', '1'],
    needs: ['pg_test_fsync', 'gcc'],
  },
  {
    name: 'store-choice',
    figure: 'lmdb against the journal',
    quick: ['--quick'],
    needs: [],
    byNameOnly: 'needs lmdb installed in a scratch directory by hand: --only store-choice, with --lmdb DIR after --',
  },
]

/** Why this machine cannot run a benchmark's needs, or null when it can. */
function missing(needs: readonly Need[]): string | null {
  for (const need of needs) {
    if (need === 'root' && process.getuid?.() !== 0) return 'needs root'
    if (need === 'gcc' && spawnSync('gcc', ['--version']).status !== 0) return 'needs gcc'
    if (
      need === 'pg_test_fsync' &&
      spawnSync('sh', ['-c', 'command -v pg_test_fsync || ls /usr/lib/postgresql/*/bin/pg_test_fsync']).status !== 0
    )
      return 'needs pg_test_fsync (apt-get install postgresql)'
  }
  return null
}

function parseFlags() {
  return parseArgs({
    options: { full: { type: 'boolean', default: false }, only: { type: 'string' }, list: { type: 'boolean', default: false } },
    allowPositionals: true,
  })
}

function main(): number {
  let parsed: ReturnType<typeof parseFlags>
  try {
    parsed = parseFlags()
  } catch (error) {
    process.stderr.write(
      `bench: ${error instanceof Error ? error.message : String(error)} (npm run bench -- --list; flags: --full, --only a,b, --list)\n`,
    )
    return 2
  }
  const { values, positionals } = parsed
  if (values.list) {
    for (const b of benches)
      process.stdout.write(`${b.name.padEnd(20)} ${b.figure}${b.byNameOnly === undefined ? '' : ` (${b.byNameOnly})`}\n`)
    return 0
  }
  const only = values.only?.split(',').filter((n) => n !== '')
  if (only !== undefined && only.length === 0) {
    process.stderr.write('bench: --only names no benchmark (npm run bench -- --list)\n')
    return 2
  }
  const unknown = only?.filter((n) => !benches.some((b) => b.name === n)) ?? []
  if (unknown.length > 0) {
    process.stderr.write(`bench: no benchmark named ${unknown.join(', ')} (npm run bench -- --list)\n`)
    return 2
  }
  const chosen = benches.filter((b) => (only === undefined ? b.byNameOnly === undefined : only.includes(b.name)))
  const failed: string[] = []
  for (const bench of chosen) {
    const lacking = missing(bench.needs)
    if (lacking !== null) {
      process.stdout.write(`\n== ${bench.name}: not run here: ${lacking}\n`)
      continue
    }
    const args = [...(bench.node ?? []), '--import', 'tsx', `bench/${bench.name}.ts`, ...(values.full ? [] : bench.quick), ...positionals]
    process.stdout.write(`\n== ${bench.name}: ${bench.figure}\n$ node ${args.join(' ')}\n`)
    const started = Date.now()
    const run = spawnSync(process.execPath, args, { cwd: repoRoot, stdio: 'inherit' })
    process.stdout.write(`== ${bench.name}: exit ${run.status ?? run.signal}, ${((Date.now() - started) / 1000).toFixed(0)} s\n`)
    if (run.status !== 0) failed.push(bench.name)
  }
  if (failed.length > 0) process.stdout.write(`\nbenchmarks that did not finish: ${failed.join(', ')}\n`)
  return failed.length === 0 ? 0 : 1
}

process.exitCode = main()
