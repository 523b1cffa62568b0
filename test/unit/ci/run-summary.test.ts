/**
 * .ci/run's summary after a failing `npm test`: the failing files' "not ok" lines with context, then
 * every failing assertion by name. The script runs under `set -euo pipefail`, so a `grep | head` whose
 * grep is cut off by head (SIGPIPE, once its output outgrows the pipe's buffer) must not end the
 * script before the summary is printed. Run here on a fake .tap/test-results tree, `npm test` stubbed.
 */
import t from 'tap'
import { spawnSync } from 'node:child_process'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { tempDir } from '../../fixtures/cli.js'

const script = readFileSync(fileURLToPath(new URL('../../../.ci/run', import.meta.url)), 'utf8')

/** .ci/run's shell options and its summary block, with an `npm test` that fails at once. */
function summaryScript(): string {
  const options = /^set -e.*$/m.exec(script)?.[0]
  const at = script.indexOf('if ! CI=true npm test; then')
  if (options === undefined || at < 0) throw new Error('.ci/run: no set line or no summary block')
  return ['#!/usr/bin/env bash', options, 'npm() { return 1; }', script.slice(at)].join('\n')
}

/** A tap log of a file whose subtest fails `failures` assertions, each with a stack of 14 frames. */
function failingLog(name: string, failures: number): string {
  const lines = ['TAP version 14', `# Subtest: ${name}`]
  for (let i = 1; i <= failures; i++) {
    lines.push(`    not ok ${i} - ${name} assertion ${i}`, '      ---', '      stack: |')
    for (let k = 0; k < 14; k++) lines.push(`        at frame${k} (/repo/test/e2e/${name}.test.ts:${k}:1) ${'x'.repeat(60)}`)
    lines.push('      ...')
  }
  lines.push(`    1..${failures}`, `not ok 1 - ${name}`, '1..1')
  return `${lines.join('\n')}\n`
}

t.test('a failing file with a long log: every failing file and the assertions by name are still printed', async (t) => {
  const dir = tempDir(t)
  const results = join(dir, '.tap', 'test-results', 'test', 'e2e')
  mkdirSync(results, { recursive: true })
  // Listed first (grep -r reads a directory in no set order, so both are big enough to be cut).
  writeFileSync(join(results, 'a-many.test.ts.tap'), failingLog('many', 500))
  writeFileSync(join(results, 'b-many.test.ts.tap'), failingLog('more', 500))
  writeFileSync(join(results, 'c-one.test.ts.tap'), failingLog('one', 1))
  writeFileSync(join(results, 'd-ok.test.ts.tap'), 'TAP version 14\nok 1 - fine\n1..1\n')
  writeFileSync(join(dir, 'summary'), summaryScript())
  const run = spawnSync('bash', ['summary'], { cwd: dir, encoding: 'utf8', timeout: 30_000 })
  t.equal(run.status, 1, `exit 1, as a failing npm test (stderr: ${run.stderr})`)
  for (const name of ['a-many', 'b-many', 'c-one'])
    t.match(run.stdout, `## .tap/test-results/test/e2e/${name}.test.ts.tap\n`, `${name} shown`)
  t.notMatch(run.stdout, 'd-ok', 'a passing file is not')
  t.match(run.stdout, '# every failing assertion, by name:\n', 'the list by name printed')
  t.match(run.stdout, 'c-one.test.ts.tap:    not ok 1 - one assertion 1\n', "the small file's assertion by name")
})
