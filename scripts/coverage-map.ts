/**
 * Prints the entries test/fixtures/coverage-map.ts lacks: for each src module with neither a unit test of
 * its own name (src/x/y.ts -> test/unit/x/y.test.ts) nor an entry, the tests that reach it, nearest
 * first (those importing it, then those whose imports lead to it, then those that run the command line
 * that loads it). Paste what it prints into the map after reading it: the map says which tests stand
 * for a module, so choose the ones that really exercise it.
 *
 *   node --import tsx scripts/coverage-map.ts
 */
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { distancesFrom, ownUnitTest, reachableFrom, repoRoot, runsCommandLine, tsFilesUnder } from '../test/fixtures/import-graph.js'
import { coveredBy } from '../test/fixtures/coverage-map.js'

const modules = tsFilesUnder('src')
const tests = tsFilesUnder('test').filter((f) => f.endsWith('.test.ts'))
const cliReach = reachableFrom(['src/bin.ts'])
const distances = new Map(tests.map((t) => [t, distancesFrom([t])]))
/** Unit tests first: they stand for a module more directly than an end-to-end or hostile test. */
const unitFirst = (test: string): number => (test.startsWith('test/unit/') ? 0 : 1)
const lines: string[] = []
for (const module of modules) {
  if (existsSync(join(repoRoot, ownUnitTest(module))) || coveredBy[module] !== undefined) continue
  const reaching = tests
    .map((test) => ({ test, distance: distances.get(test)?.get(module) }))
    .filter((r): r is { test: string; distance: number } => r.distance !== undefined)
    .sort((a, b) => a.distance - b.distance || unitFirst(a.test) - unitFirst(b.test) || a.test.localeCompare(b.test))
    .map((r) => r.test)
  const byCli = reaching.length > 0 || !cliReach.has(module) ? reaching : tests.filter((t) => runsCommandLine(t))
  lines.push(
    `  '${module}': [${byCli
      .slice(0, 3)
      .map((t) => `'${t}'`)
      .join(', ')}],`,
  )
}
process.stdout.write(lines.length === 0 ? 'every module has its unit test or an entry\n' : `${lines.join('\n')}\n`)
