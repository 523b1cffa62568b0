/**
 * shellQuote: a command printed for the user to paste must give the shell back exactly the text it
 * quoted. The POSIX quoting is checked against a real /bin/sh (printf of the quoted word); the
 * PowerShell quoting against the rules of its single-quoted strings, worked out by hand.
 */
import { execFileSync } from 'node:child_process'
import t from 'tap'
import { win32 } from 'node:path'
import { quotePath, shellQuote } from '../../../src/base/shell-quote.js'

/** What /bin/sh makes of the word: printf '%s' <word>, byte for byte. */
function shellReads(word: string): string {
  return execFileSync('sh', ['-c', `printf '%s' ${word}`], { encoding: 'utf8' })
}

t.test('posix: plain paths, addresses and flags stay as they are', async (t) => {
  for (const plain of ['/mnt/t/p.dat', 'host:5400', 'user@host', 'a,b', '50%', 'x=y+z', 'rel/./dir', '-n']) {
    t.equal(shellQuote(plain, 'posix'), plain, plain)
  }
})

t.test('posix: anything else is single-quoted, and a quote inside becomes quote-backslash-quote-quote', async (t) => {
  t.equal(shellQuote('a b', 'posix'), "'a b'")
  t.equal(shellQuote('$HOME', 'posix'), "'$HOME'")
  t.equal(shellQuote('[::1]:5400', 'posix'), "'[::1]:5400'")
  t.equal(shellQuote("it's", 'posix'), "'it'\\''s'")
  t.equal(shellQuote('', 'posix'), "''", 'an empty argument stays an argument')
})

t.test('posix: a real shell reads back exactly the text, however hostile', async (t) => {
  const hostile = [
    'a b',
    '$HOME',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the shell's own syntax, on purpose
    '${PATH}',
    '$(echo injected)',
    '`id`',
    '*',
    '/mnt/*/p?.dat',
    "it's",
    "''",
    "'\\''",
    'back\\slash',
    'semi;colon && true || false | cat > /dev/null',
    'tab\there',
    'new\nline',
    '~root',
    '!history',
    '#comment',
    'é ü 日本',
    '[::1]:5400',
    '%PATH%',
    '',
  ]
  for (const text of hostile) {
    t.equal(shellReads(shellQuote(text, 'posix')), text, JSON.stringify(text))
  }
})

t.test('windows: plain paths stay, and comma and @ are quoted (array operator, splatting)', async (t) => {
  for (const plain of ['C:\\data\\p.dat', 'D:/t/p.dat', 'host:5400', 'x=y+z', '-n']) {
    t.equal(shellQuote(plain, 'windows'), plain, plain)
  }
  t.equal(shellQuote('a,b', 'windows'), "'a,b'")
  t.equal(shellQuote('@args', 'windows'), "'@args'")
  t.equal(shellQuote('50%', 'windows'), "'50%'")
})

t.test('windows: variables stay literal in single quotes, and every kind of single quote is doubled', async (t) => {
  t.equal(shellQuote('$env:PATH', 'windows'), "'$env:PATH'")
  t.equal(shellQuote('%PATH%', 'windows'), "'%PATH%'")
  t.equal(shellQuote('C:\\Program Files\\x', 'windows'), "'C:\\Program Files\\x'")
  t.equal(shellQuote("it's", 'windows'), "'it''s'")
  // PowerShell ends a single-quoted string at U+2018..U+201B as at the ASCII quote.
  t.equal(shellQuote('a\u2018b', 'windows'), "'a\u2018\u2018b'")
  t.equal(shellQuote('a\u2019b', 'windows'), "'a\u2019\u2019b'")
  t.equal(shellQuote('a\u201ab', 'windows'), "'a\u201a\u201ab'")
  t.equal(shellQuote('a\u201bb', 'windows'), "'a\u201b\u201bb'")
  t.equal(shellQuote("'\u2019", 'windows'), "'''\u2019\u2019'")
  // U+201C (a double quote) is not a single quote: left alone.
  t.equal(shellQuote('a\u201cb', 'windows'), "'a\u201cb'")
  t.equal(shellQuote('', 'windows'), "''")
})

t.test('the default is this platform’s shell', async (t) => {
  const expected = process.platform === 'win32' ? 'windows' : 'posix'
  t.equal(shellQuote("a b'c"), shellQuote("a b'c", expected))
})

t.test('quotePath, windows: forward slashes, which a POSIX shell keeps and Windows reads as the same path', async (t) => {
  const cases: [string, string][] = [
    ['Z:\\tmp\\nc\\wdata', 'Z:/tmp/nc/wdata'],
    ['C:\\Program Files\\t\\p.dat', "'C:/Program Files/t/p.dat'"],
    ["D:\\it's\\p.dat", `"D:/it's/p.dat"`],
    ['\\\\server\\share\\p.dat', '//server/share/p.dat'],
    ['D:/already/forward', 'D:/already/forward'],
  ]
  for (const [path, printed] of cases) t.equal(quotePath(path, 'windows'), printed, path)
  for (const path of ['Z:\\tmp\\nc\\wdata', 'C:\\Program Files\\t\\p.dat', '\\\\server\\share\\p.dat']) {
    const pasted = shellReads(quotePath(path, 'windows'))
    t.notMatch(pasted, /\\/, `${path}: no backslash for a POSIX shell to eat`)
    t.equal(win32.resolve(pasted), path, `${path}: what a POSIX shell passes on is the same path to Windows and Node`)
  }
})

t.test(
  'quotePath, windows: a namespaced path keeps its backslashes (Windows reads it literally), in quotes both shells keep',
  async (t) => {
    for (const path of ['\\\\?\\C:\\t\\p.dat', '\\\\.\\PhysicalDrive1']) {
      t.equal(quotePath(path, 'windows'), `'${path}'`, path)
      t.equal(shellReads(quotePath(path, 'windows')), path, `${path}: a POSIX shell passes it on as it is`)
    }
  },
)

t.test('quotePath, posix: the path as shellQuote gives it, a backslash in a name kept', async (t) => {
  for (const path of ['/mnt/t/p.dat', '/mnt/a b/p.dat', '/mnt/back\\slash', "/mnt/it's"]) {
    t.equal(quotePath(path, 'posix'), shellQuote(path, 'posix'), path)
    t.equal(shellReads(quotePath(path, 'posix')), path, path)
  }
})

/**
 * What PowerShell makes of one quoted word, by the rules of its strings: in single quotes any of
 * ' U+2018-U+201B ends it and a doubled one stands for itself; in double quotes the text is literal
 * when it holds no $, backtick or double quote (" U+201C-U+201E), and anything else is not modelled.
 */
function powerShellReads(word: string): string | undefined {
  const single = /^['\u2018-\u201b]((?:[^'\u2018-\u201b]|['\u2018-\u201b]{2})*)['\u2018-\u201b]$/.exec(word)
  if (single !== null) return single[1]!.replace(/(['\u2018-\u201b])\1/g, '$1')
  const double = /^["\u201c-\u201e]([^"$`\u201c-\u201e]*)["\u201c-\u201e]$/.exec(word)
  return double === null ? undefined : double[1]
}

t.test('quotePath, windows: a path with a single quote of any kind reads back whole in a POSIX shell and in PowerShell', async (t) => {
  const paths = [
    "C:\\Users\\O'Brien\\data\\p.dat",
    'C:\\Users\\O\u2019Brien\\data\\p.dat',
    'C:\\Users\\\u2018quoted\u2019 name\\p.dat',
    "D:\\it's 50% & more, @home\\p.dat",
    "D:\\it's\u201cquoted\u201d\\p.dat",
  ]
  for (const path of paths) {
    const printed = quotePath(path, 'windows')
    const forward = path.replace(/\\/g, '/')
    t.equal(shellReads(printed), forward, `${printed}: sh`)
    if (!/\u201c/.test(path)) {
      t.match(printed, /^".*"$/, `${printed}: in double quotes`)
      t.equal(powerShellReads(printed), forward, `${printed}: PowerShell`)
    }
  }
})

t.test('quotePath, windows: a single quote and a character double quotes do not keep: the POSIX form', async (t) => {
  for (const path of [
    "C:\\it's $HOME\\p.dat",
    "C:\\it's `x`\\p.dat",
    'C:\\it\'s "x"\\p.dat',
    "C:\\it's!\\p.dat",
    "C:\\it's\u201cx\\p.dat",
    "\\\\?\\C:\\O'Brien\\p.dat",
    '\\\\?\\C:\\O\u2019Brien\\p.dat',
  ]) {
    const printed = quotePath(path, 'windows')
    const expected = path.startsWith('\\\\?\\') ? path : path.replace(/\\/g, '/')
    t.equal(printed, shellQuote(expected, 'posix'), `${path}: the POSIX form`)
    t.equal(shellReads(printed), expected, `${printed}: sh`)
  }
  t.equal(quotePath('C:\\a\u201cb\\p.dat', 'windows'), "'C:/a\u201cb/p.dat'", 'a smart double quote alone: single quotes, which both keep')
  t.equal(powerShellReads(quotePath('C:\\a\u201cb\\p.dat', 'windows')), 'C:/a\u201cb/p.dat')
})
