/**
 * A skipped case is a defect: every test runs and asserts on the machines the project supports (CI
 * installs all they need), and a requirement a machine lacks fails with what to install. This reads
 * every file under test/ and names each tap skip or todo in code: a skip or todo option of a test,
 * a call of the skip or todo method, and a plan of zero tests, the way a test ends as skipped from within.
 */
import t from 'tap'
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

const testRoot = fileURLToPath(new URL('..', import.meta.url))
/** This file names the forms it looks for, so it is not read. */
const thisFile = fileURLToPath(import.meta.url)

/** What a skip looks like in code, and its name in the failure message. */
const skipForms: ReadonlyArray<readonly [string, RegExp]> = [
  ['a skip or todo option', /(^|[{,(\s])(skip|todo)\s*(:|,|\})/],
  ['a call of the skip or todo method', /\.(skip|todo)\s*\(/],
  ['a plan of zero tests', /\.plan\(\s*0\s*[,)]/],
]

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return sourceFiles(path)
    return /\.(ts|mts|mjs|js)$/.test(entry.name) ? [path] : []
  })
}

/** The line without its comment: prose may say "skip"; code may not. */
function codeOf(line: string): string {
  const trimmed = line.trimStart()
  if (trimmed.startsWith('*') || trimmed.startsWith('/*') || trimmed.startsWith('//')) return ''
  return line.replace(/\s\/\/.*$/, '')
}

/** Every skip in the files, as `path:line: form: the line`. */
function skipsIn(files: readonly string[]): string[] {
  const found: string[] = []
  for (const file of files) {
    readFileSync(file, 'utf8')
      .split('\n')
      .forEach((line, i) => {
        const code = codeOf(line)
        for (const [form, pattern] of skipForms) {
          if (pattern.test(code)) found.push(`${relative(testRoot, file)}:${i + 1}: ${form}: ${line.trim()}`)
        }
      })
  }
  return found
}

t.test('no test under test/ skips, by an option, a call or an empty plan', async (t) => {
  const files = sourceFiles(testRoot).filter((file) => file !== thisFile)
  t.ok(files.length > 100, `${files.length} files read`)
  const skips = skipsIn(files)
  t.same(skips, [], `skips found:\n${skips.join('\n')}`)
})

t.test('each form of skip is found, and prose about skipping is not', async (t) => {
  // Spelled from parts at run time: this file holds no skip of its own, even as sample text.
  const spelled = (line: string): string =>
    line.replaceAll('SKIP', ['sk', 'ip'].join('')).replaceAll('TODO', ['to', 'do'].join('')).replaceAll('PLAN', ['pl', 'an'].join(''))
  const cases: ReadonlyArray<readonly [string, boolean]> = [
    ["t.test('x', { SKIP: process.platform === 'win32' }, async () => {})", true],
    ["t.test('x', { SKIP }, async () => {})", true],
    ["t.test('x', { timeout: 5, TODO: 'later' }, async () => {})", true],
    ['  return { SKIP: false }', true],
    ["  t.SKIP('not here')", true],
    ["  else t.PLAN(0, 'lab skipped')", true],
    ['  if (x) return t.PLAN(0)', true],
    [' * Without chromium the test skips with the reason.', false],
    ['  // a stray file is skipped with a warning', false],
    ["t.test('a renamed directory is skipped at load', async (t) => {", false],
    ['  t.PLAN(3)', false],
  ]
  for (const [template, isSkip] of cases) {
    const line = spelled(template)
    const found = skipForms.some(([, pattern]) => pattern.test(codeOf(line)))
    t.equal(found, isSkip, `${isSkip ? 'a skip' : 'not a skip'}: ${line.trim()}`)
  }
})
