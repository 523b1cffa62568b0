/**
 * `npm run bench` (bench/all.ts) on usage mistakes: `--only` naming no benchmark at all (`--only=`,
 * `--only ,`) must not run nothing and exit 0 in silence ("nothing is left out silently"); it is a usage
 * error like an unknown name (exit 2, one line naming the mistake). An unknown flag is a usage error
 * too: exit 2 with a line, not a stack trace of node's argument parser and exit 1 (which reads as "a
 * benchmark did not finish").
 */
import t from 'tap'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const repoRoot = fileURLToPath(new URL('../..', import.meta.url))
const bench = (...args: string[]) =>
  spawnSync(process.execPath, ['--import', 'tsx', 'bench/all.ts', ...args], { cwd: repoRoot, encoding: 'utf8', timeout: 30_000 })

t.test('an unknown name is a usage error (holds today)', async (t) => {
  const run = bench('--only', 'nope')
  t.equal(run.status, 2)
  t.match(run.stderr, /no benchmark named nope/)
})

for (const args of [['--only='], ['--only', ','], ['--only', ',,']]) {
  t.test(`bench ${args.join(' ')}: names no benchmark, a usage error`, async (t) => {
    const run = bench(...args)
    t.notMatch(run.stdout, /^== /m, 'no benchmark was run')
    t.equal(run.status, 2, `exit 2 (usage), not ${run.status} with nothing run`)
    t.match(run.stderr, /bench: .*(no benchmark|names none|--list)/, 'a line says what is wrong')
  })
}

t.test('an unknown flag is a usage error, not a crash', async (t) => {
  const run = bench('--bogus')
  t.equal(run.status, 2, 'exit 2 (usage)')
  t.match(run.stderr, /--bogus/, 'names the flag')
  t.notMatch(run.stderr, /ERR_PARSE_ARGS|\n\s+at /, 'no stack trace')
  t.notMatch(run.stdout, /^== /m, 'no benchmark was run')
})
