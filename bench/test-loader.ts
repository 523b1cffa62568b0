/**
 * What one test file costs before its first assertion, by the loader that runs its TypeScript: tap's
 * default (ts-node, @tapjs/typescript), tsx, and the suite's own (test/fixtures/tap-ts/, esbuild with a
 * cache), each started with the other --imports tap's runner gives a test process (@tapjs/mock's hooks,
 * source maps, @tapjs/processinfo). Two test bodies: tap alone, and tap with test/fixtures/cli.ts (the
 * CLI's whole module graph, which most test files import); the first also as plain JavaScript with no
 * loader, the floor. Per start: CPU time (user + system, read at exit by bench/cpu-at-exit.mjs), which
 * the suite pays for each of its ~280 files; interleaved rounds, so the machine's load hits all alike.
 *
 *   node --import tsx bench/test-loader.ts [--rounds 7]
 */
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { median, repoRoot, table } from './common.js'

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '7' } } })
const roundCount = Number(values.rounds)
if (!Number.isInteger(roundCount) || roundCount < 1) throw new Error('--rounds must be a whole number >= 1')

const modules = join(repoRoot, 'node_modules')
const tapImports = [
  `--import=${pathToFileURL(join(modules, '@tapjs/mock/dist/esm/import.mjs'))}`,
  '--enable-source-maps',
  `--import=${pathToFileURL(join(modules, '@tapjs/processinfo/dist/esm/import.mjs'))}`,
]
const loaders: ReadonlyArray<readonly [string, readonly string[]]> = [
  ['ts-node (tap default)', [`--import=${pathToFileURL(join(modules, '@tapjs/typescript/dist/esm/import.mjs'))}`]],
  ['tsx', [`--import=${pathToFileURL(join(modules, 'tsx/dist/loader.mjs'))}`]],
  ['test/fixtures/tap-ts', [`--import=${pathToFileURL(join(repoRoot, 'test/fixtures/tap-ts/register.mjs'))}`]],
]

// The bodies import tap by its path: the loaders leave what is under node_modules alone.
const scratch = mkdtempSync(join(tmpdir(), 'plugcheck-test-loader-'))
writeFileSync(join(scratch, 'package.json'), '{ "type": "module" }\n') // ES modules, as the repository's
const body = (name: string, text: string): string => {
  const path = join(scratch, name)
  writeFileSync(path, text)
  return path
}
const tap = pathToFileURL(join(modules, 'tap/dist/esm/index.js'))
const tapOnly = `import t from '${tap}'\nt.pass('started')\n`
const withCli = `import t from '${tap}'\nimport '${pathToFileURL(join(repoRoot, 'test/fixtures/cli.ts'))}'\nt.pass('started')\n`
const cases: Array<{ label: string; args: string[] }> = [
  { label: 'plain JavaScript, no loader: tap', args: [...tapImports, body('tap-only.mjs', tapOnly)] },
  ...loaders.flatMap(([name, loader]) => [
    { label: `${name}: tap`, args: [...loader, ...tapImports, body('tap-only.ts', tapOnly)] },
    { label: `${name}: tap + fixtures/cli.ts`, args: [...loader, ...tapImports, body('with-cli.ts', withCli)] },
  ]),
]

const cpuPreload = fileURLToPath(new URL('cpu-at-exit.mjs', import.meta.url))
const cpuFile = join(scratch, 'cpu')
function cpuMsOf(args: readonly string[]): number {
  rmSync(cpuFile, { force: true })
  // TS_NODE_TRANSPILE_ONLY: as tap's runner sets it for ts-node without its typecheck option.
  const env = { ...process.env, TAP: '1', TS_NODE_TRANSPILE_ONLY: '1', PLUGCHECK_CPU_FILE: cpuFile }
  const result = spawnSync(process.execPath, ['--import', cpuPreload, ...args], { cwd: repoRoot, encoding: 'utf8', env })
  if (result.status !== 0) throw new Error(`node ${args.join(' ')} exited ${result.status ?? result.signal}: ${result.stderr}`)
  return Number(readFileSync(cpuFile, 'utf8'))
}

const samples = new Map(cases.map((c) => [c, [] as number[]]))
for (const c of cases) cpuMsOf(c.args) // fills the loaders' caches, as any run after the first has them
for (let round = 0; round < roundCount; round++) {
  for (let i = 0; i < cases.length; i++) {
    const c = cases[(i + round) % cases.length]!
    samples.get(c)!.push(cpuMsOf(c.args))
  }
}
rmSync(scratch, { recursive: true, force: true })

const floor = median(samples.get(cases[0]!)!)
console.log(`${roundCount} interleaved rounds, node ${process.version}: CPU per test process before its first assertion`)
console.log(
  table([
    ['loader: body', 'cpu median', 'vs plain JavaScript'],
    ...cases.map((c) => [c.label, `${median(samples.get(c)!).toFixed(0)} ms`, `${(median(samples.get(c)!) / floor).toFixed(2)}x`]),
  ]),
)
