/**
 * A skipped case is a defect: every test runs and asserts on the machines the project supports (CI
 * installs all they need), and a requirement a machine lacks fails with what to install. This reads
 * every file under test/ and names each tap skip or todo in code: a skip or todo option ({ skip },
 * { skip: ... }), t.skip()/t.todo(), and t.plan(0, ...), the way a test ends as skipped from within.
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
  ['t.skip() or t.todo()', /\.(skip|todo)\s*\(/],
  ['t.plan(0, ...)', /\.plan\(\s*0\s*[,)]/],
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
  const cases: ReadonlyArray<readonly [string, boolean]> = [
    ["t.test('x', { skip: process.platform === 'win32' }, async () => {})", true],
    ["t.test('x', { skip }, async () => {})", true],
    ["t.test('x', { timeout: 5, todo: 'later' }, async () => {})", true],
    ['  return { skip: false }', true],
    ["  t.skip('not here')", true],
    ["  else t.plan(0, 'lab skipped')", true],
    ['  if (x) return t.plan(0)', true],
    [' * Without chromium the test skips with the reason.', false],
    ["  // a stray file is skipped with a warning", false],
    ["t.test('a renamed directory is skipped at load', async (t) => {", false],
    ['  t.plan(3)', false],
  ]
  for (const [line, isSkip] of cases) {
    const found = skipForms.some(([, pattern]) => pattern.test(codeOf(line)))
    t.equal(found, isSkip, `${isSkip ? 'a skip' : 'not a skip'}: ${line.trim()}`)
  }
})
