/**
 * Every module of src/ has its test: a unit test of its own name (src/x/y.ts -> test/unit/x/y.test.ts)
 * or an entry of the coverage map (test/fixtures/coverage-map.ts) naming tests that reach it, through their
 * imports or by running the command line that loads it. A new module without either fails here, as
 * does an entry for a module that is gone or already has its own unit test, or a test that does not
 * reach its module.
 */
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { ownUnitTest, reachableFrom, repoRoot, runsCommandLine, tsFilesUnder } from '../fixtures/import-graph.js'
import { coveredBy } from '../fixtures/coverage-map.js'

const modules = tsFilesUnder('src')
const cliReach = reachableFrom(['src/bin.ts'])

t.test('each module of src/ has a unit test of its own name or an entry of the map, not both', async (t) => {
  const neither = modules.filter((m) => !existsSync(join(repoRoot, ownUnitTest(m))) && coveredBy[m] === undefined)
  t.same(neither, [], 'modules without a test: add test/unit/<path>.test.ts or an entry (scripts/coverage-map.ts)')
  const both = modules.filter((m) => existsSync(join(repoRoot, ownUnitTest(m))) && coveredBy[m] !== undefined)
  t.same(both, [], 'entries of modules that have their own unit test now: remove them from the map')
})

t.test('the map names only modules that exist, each with tests that exist and reach it', async (t) => {
  const stale = Object.keys(coveredBy).filter((m) => !modules.includes(m))
  t.same(stale, [], 'entries of modules that are gone')
  for (const [module, tests] of Object.entries(coveredBy)) {
    t.ok(tests.length > 0, `${module}: at least one test`)
    for (const test of tests) {
      if (!existsSync(join(repoRoot, test))) {
        t.fail(`${module}: ${test} does not exist`)
        continue
      }
      const reaches = reachableFrom([test]).has(module) || (cliReach.has(module) && runsCommandLine(test))
      t.ok(reaches, `${module}: ${test} reaches it`)
    }
  }
})

t.test('the check itself: a module no test reaches is caught, one a test imports is not', async (t) => {
  // The import graph is what the checks above stand on: it must see a static import, a dynamic one,
  // and a worker started by name, and must not see a module nothing names.
  const judgeTest = reachableFrom(['test/unit/client/verify/judge-scan.test.ts'])
  t.ok(judgeTest.has('src/client/verify/judge.ts'), 'a static import')
  t.ok(judgeTest.has('src/client/verify/scan-worker.ts'), 'a worker started by name')
  t.ok(cliReach.has('src/client/write/writer.ts'), 'a dynamic import (the write command)')
  t.notOk(judgeTest.has('src/server/listen/listener.ts'), 'a module the test never loads')
  t.notOk(runsCommandLine('test/unit/client/verify/verdict-rules.test.ts'), 'a unit test does not run the command line')
})
