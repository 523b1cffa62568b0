/**
 * The suite's loader: every test file runs through ours (test/fixtures/tap-ts/), as .taprc names, never
 * through tap's default, ts-node. tap rebuilds itself for .taprc's plugins when it finds its build stale, but only inside a run
 * whose test processes already got the old build's loader: right after `npm ci` a whole run went
 * through ts-node at about twice the CPU, and nothing failed. `npm test`'s pretest
 * (scripts/tap-plugins.mjs) builds tap first; this file fails a run that skipped it.
 */
import t from 'tap'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url))

t.test("this test process loads TypeScript through the suite's loader, not ts-node", async (t) => {
  const argv = process.execArgv.join(' ')
  t.ok(
    /--import=\S*tap-ts\/register\.mjs/.test(argv),
    'test/fixtures/tap-ts/register.mjs is imported (run `npm test`, or `node scripts/tap-plugins.mjs` once after npm ci)',
    { execArgv: process.execArgv },
  )
  t.notOk(argv.includes('@tapjs/typescript'), "tap's ts-node loader is not (tap was built for other plugins when this run began)", {
    execArgv: process.execArgv,
  })
})

t.test('scripts/tap-plugins.mjs finds the build current and says nothing', async (t) => {
  const check = spawnSync(process.execPath, ['scripts/tap-plugins.mjs'], { cwd: repoRoot, encoding: 'utf8', timeout: 120_000 })
  t.equal(check.status, 0, 'exit 0', { stderr: check.stderr })
  t.equal(check.stdout + check.stderr, '', 'no output: nothing to build')
})
