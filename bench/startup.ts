/**
 * Start-up time of the command line against bare node: interleaved rounds of `node -e 0`, the compiled
 * entry point (dist/bin.js) and the installed launcher (bin/plugcheck.js, which also checks that
 * dist/ is not older than src/) for `--help`, `--version` and `methods`, then `npx plugcheck --help`
 * once (npx's own cost, reported apart). Per child: wall time from spawn to exit, and its CPU time
 * (user + system, read at exit by the preload bench/cpu-at-exit.mjs, which every case gets alike):
 * on a shared machine under load the wall time is mostly waiting for a core, the CPU time is not.
 *
 *   node --import tsx bench/startup.ts [--rounds 15] [--dist dist,other-build-dir]
 *
 * --dist compares builds side by side (each a directory with bin.js inside the repository, so its
 * packages resolve). dist/ is built first (scripts/build.ts), so the launcher runs it, not the sources.
 */
import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { performance } from 'node:perf_hooks'
import { parseArgs } from 'node:util'
import { buildDist } from '../scripts/build.js'
import { median, plugcheckBin, quantileSorted, repoRoot, table } from './common.js'

interface Case {
  readonly label: string
  readonly args: readonly string[]
}

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '15' }, dist: { type: 'string', default: 'dist' } } })
const roundCount = Number(values.rounds)
if (!Number.isInteger(roundCount) || roundCount < 1) throw new Error('--rounds must be a whole number >= 1')
await buildDist()
const distDirs = values.dist.split(',').map((d) => join(repoRoot, d))
for (const dir of distDirs) if (!existsSync(join(dir, 'bin.js'))) throw new Error(`${dir}/bin.js is missing: npm run build`)

const bare: Case = { label: 'node -e 0', args: ['-e', '0'] }
const cases: Case[] = [
  bare,
  ...distDirs.flatMap((dir) => {
    const bin = join(dir, 'bin.js')
    const name = `node ${relative(repoRoot, bin)}`
    return [
      { label: `${name} --help`, args: [bin, '--help'] },
      { label: `${name} methods`, args: [bin, 'methods'] },
    ]
  }),
  { label: 'node bin/plugcheck.js --help', args: [plugcheckBin, '--help'] },
  { label: 'node bin/plugcheck.js --version', args: [plugcheckBin, '--version'] },
  { label: 'node bin/plugcheck.js methods', args: [plugcheckBin, 'methods'] },
]

interface Sample {
  readonly wallMs: number
  readonly cpuMs: number
}

const cpuPreload = fileURLToPath(new URL('cpu-at-exit.mjs', import.meta.url))
const scratchDir = mkdtempSync(join(tmpdir(), 'plugcheck-startup-'))
const cpuFile = join(scratchDir, 'cpu')

/** One child's wall and CPU milliseconds; a failed child is a broken build, not a figure. */
function timeChild(command: string, args: readonly string[], env: NodeJS.ProcessEnv = process.env): number {
  const startedAt = performance.now()
  const result = spawnSync(command, args, { cwd: repoRoot, encoding: 'utf8', env })
  const elapsedMs = performance.now() - startedAt
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} exited ${result.status ?? result.signal}: ${result.stderr}`)
  return elapsedMs
}

function sample(args: readonly string[]): Sample {
  rmSync(cpuFile, { force: true })
  const wallMs = timeChild(process.execPath, ['--import', cpuPreload, ...args], { ...process.env, PLUGCHECK_CPU_FILE: cpuFile })
  return { wallMs, cpuMs: Number(readFileSync(cpuFile, 'utf8')) }
}

const samples = new Map<Case, Sample[]>(cases.map((c) => [c, []]))
for (let round = 0; round < roundCount; round++) {
  // Every case once per round, in a rotated order, so drift in the machine's load hits all alike.
  for (let i = 0; i < cases.length; i++) {
    const c = cases[(i + round) % cases.length]!
    samples.get(c)!.push(sample(c.args))
  }
}
rmSync(scratchDir, { recursive: true, force: true })

const ms = (value: number): string => `${value.toFixed(0)} ms`
/** Median, p10-p90 and the median's ratio to bare node's, of one measure. */
function columns(c: Case, measure: (s: Sample) => number): string[] {
  const sorted = samples
    .get(c)!
    .map(measure)
    .sort((a, b) => a - b)
  const bareMedian = median(samples.get(bare)!.map(measure))
  return [
    ms(median(sorted)),
    `${ms(quantileSorted(sorted, 0.1))}-${ms(quantileSorted(sorted, 0.9))}`,
    `${(median(sorted) / bareMedian).toFixed(2)}x`,
  ]
}
const rows = cases.map((c) => [c.label, ...columns(c, (s) => s.wallMs), ...columns(c, (s) => s.cpuMs)])
console.log(`${roundCount} interleaved rounds, node ${process.version}`)
console.log(table([['command', 'wall median', 'p10-p90', 'vs bare', 'cpu median', 'p10-p90', 'vs bare'], ...rows]))

// npx resolves the package and starts a node of its own before plugcheck's: its cost is npm's.
const npxMs = timeChild('npx', ['plugcheck', '--help'])
console.log(
  `npx plugcheck --help (once): ${ms(npxMs)} wall (${(npxMs / median(samples.get(bare)!.map((s) => s.wallMs))).toFixed(2)}x bare node)`,
)
