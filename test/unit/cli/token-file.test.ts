/**
 * --token-file: the token read from a real file (one line, its line end not part of it), and every
 * file that holds no usable token refused with a message naming it and exit 2, a FIFO without
 * waiting for a writer.
 */
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { readTokenFile, tokenOfFlags } from '../../../src/cli/token-file.js'
import { maxTokenChars } from '../../../src/protocol/names.js'
import { tempDir } from '../../fixtures/cli.js'

const fileWith = (dir: string, name: string, content: string | Buffer): string => {
  const path = join(dir, name)
  writeFileSync(path, content, { mode: 0o600 })
  return path
}

t.test('the token is the one line, without its line end', async (t) => {
  const dir = tempDir(t)
  t.equal(readTokenFile(fileWith(dir, 'plain', "s3cr$t 'x' %h")), "s3cr$t 'x' %h")
  t.equal(readTokenFile(fileWith(dir, 'lf', 'tok\n')), 'tok')
  t.equal(readTokenFile(fileWith(dir, 'crlf', 'tok\r\n')), 'tok')
  t.equal(readTokenFile(fileWith(dir, 'spaces', '  tok  \n')), '  tok  ', 'spaces are part of it, as on the command line')
  t.equal(
    readTokenFile(fileWith(dir, 'longest', `${'é'.repeat(maxTokenChars)}\n`)),
    'é'.repeat(maxTokenChars),
    'the longest token, two bytes a character',
  )
})

t.test('a file without a usable token: exit 2, naming the file and what is wrong', async (t) => {
  const dir = tempDir(t)
  mkdirSync(join(dir, 'a-directory'))
  const fifo = join(dir, 'fifo')
  execFileSync('mkfifo', [fifo])
  const cases: ReadonlyArray<readonly [string, string, RegExp]> = [
    ['missing', join(dir, 'missing'), /^could not read the token file .*\/missing: ENOENT \(no such file or directory\)$/],
    ['empty', fileWith(dir, 'empty', ''), /^the token file .*\/empty is empty$/],
    ['a line end alone', fileWith(dir, 'newline', '\n'), /^the token file .*\/newline is empty$/],
    ['two lines', fileWith(dir, 'two', 'a\nb\n'), /^the token file .*\/two holds more than one line$/],
    ['too long', fileWith(dir, 'long', 'x'.repeat(maxTokenChars + 1)), /^the token in .*\/long is longer than 1024 characters$/],
    [
      'far too long',
      fileWith(dir, 'huge', Buffer.alloc(1 << 20, 0x78)),
      /^the token file .*\/huge holds more than a token \(at most 1024 characters\)$/,
    ],
    ['a directory', join(dir, 'a-directory'), /^the token file .*\/a-directory is not a regular file$/],
    ['a FIFO nobody writes', fifo, /^the token file .*\/fifo is not a regular file$/],
  ]
  for (const [what, path, message] of cases) {
    t.throws(() => readTokenFile(path), { exitCode: 2, message, hint: /one line/ }, what)
  }
})

t.test('--token and --token-file: one of them, never both', async (t) => {
  const dir = tempDir(t)
  const path = fileWith(dir, 'token', 'from-file\n')
  t.equal(tokenOfFlags({}), undefined)
  t.equal(tokenOfFlags({ token: 'flag' }), 'flag')
  t.equal(tokenOfFlags({ tokenFile: path }), 'from-file')
  t.throws(() => tokenOfFlags({ token: 'flag', tokenFile: path }), {
    exitCode: 2,
    message: 'give the token once: --token T or --token-file PATH, not both',
  })
})
