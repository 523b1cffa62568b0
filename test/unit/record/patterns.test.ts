/**
 * The patterns a writer places its records by: append, overwrite and files, as the README's
 * --pattern append|overwrite|files names them, each once. The help, the flags (zod) and the run's meta all
 * take their list from here.
 */
import { readFileSync } from 'node:fs'
import t from 'tap'
import { patterns, type Pattern } from '../../../src/record/patterns.js'

t.test('exactly append, overwrite and files, in that order (append is the default the help shows first)', async (t) => {
  t.same([...patterns], ['append', 'overwrite', 'files'])
  t.equal(new Set(patterns).size, patterns.length, 'no name twice')
})

t.test('the names are the ones the README gives --pattern', async (t) => {
  const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8')
  const documented = /--pattern (\w+(?:\|\w+)*)/.exec(readme)?.[1]?.split('|')
  t.same(documented, [...patterns])
})

t.test('the type is the list', async (t) => {
  const each: Pattern[] = ['append', 'overwrite', 'files']
  t.same(
    each.map((p) => patterns.includes(p)),
    [true, true, true],
  )
})
