/**
 * agent --print-service: the systemd unit's ExecStart and the scheduled task's /TR, split back the way
 * systemd and Windows split them, give the agent's own command line (without --print-service, --file
 * absolute); nothing is touched and no listener is needed.
 */
import t from 'tap'
import { existsSync, realpathSync } from 'node:fs'
import { join } from 'node:path'
import { binPath, runCli, tempDir } from '../fixtures/cli.js'

/** systemd's ExecStart splitting, for what serviceDefinition writes: words, "..." with C escapes, %% and $$. */
function splitSystemd(line: string): string[] {
  const words: string[] = []
  let i = 0
  while (i < line.length) {
    if (line[i] === ' ') {
      i++
      continue
    }
    let word = ''
    if (line[i] === '"') {
      i++
      while (line[i] !== '"') {
        if (i >= line.length) throw new Error(`unterminated quote in ${line}`)
        if (line[i] === '\\') {
          const next = line[++i]!
          word += next === 'n' ? '\n' : next === 't' ? '\t' : next
        } else word += line[i]
        i++
      }
      i++
      if (i < line.length && line[i] !== ' ') throw new Error(`a closing quote must end the word: ${line}`)
    } else {
      while (i < line.length && line[i] !== ' ') word += line[i++]
      if (/["'\\]/.test(word)) throw new Error(`unquoted word with a quote or backslash: ${word}`)
    }
    words.push(word.replace(/%%/g, '%').replace(/\$\$/g, '$'))
  }
  return words
}

/** PowerShell: the /TR argument, a single-quoted string ('' for a quote) or a plain word. */
function powershellArgument(text: string): string {
  if (!text.startsWith("'")) return text
  let out = ''
  for (let i = 1; i < text.length; i++) {
    const c = text[i]!
    if (/[\u0027\u2018-\u201b]/.test(c)) {
      if (i + 1 < text.length && /[\u0027\u2018-\u201b]/.test(text[i + 1]!)) {
        out += c
        i++
        continue
      }
      if (i !== text.length - 1) throw new Error(`text after the closing quote: ${text}`)
      return out
    }
    out += c
  }
  throw new Error(`unterminated quote: ${text}`)
}

/** CommandLineToArgvW's rules (what Node on Windows gives process.argv). */
function splitWindows(line: string): string[] {
  const args: string[] = []
  let i = 0
  while (i < line.length) {
    while (line[i] === ' ' || line[i] === '\t') i++
    if (i >= line.length) break
    let arg = ''
    let quoted = false
    while (i < line.length && (quoted || (line[i] !== ' ' && line[i] !== '\t'))) {
      let slashes = 0
      while (line[i] === '\\') {
        slashes++
        i++
      }
      if (line[i] === '"') {
        arg += '\\'.repeat(Math.floor(slashes / 2))
        if (slashes % 2 === 1) arg += '"'
        else quoted = !quoted
        i++
      } else {
        arg += '\\'.repeat(slashes)
        if (i < line.length && (quoted || (line[i] !== ' ' && line[i] !== '\t'))) arg += line[i++]
      }
    }
    args.push(arg)
  }
  return args
}

const awkwardName = `it's a "file" with %h $HOME \\ back\\slash.dat`

for (const kind of ['systemd', 'windows'] as const) {
  t.test(`--print-service ${kind}: the command splits back into the agent's arguments`, async (t) => {
    const dir = tempDir(t)
    const file = join(dir, awkwardName)
    // Port 1 on loopback: nothing listens there; the agent must not try.
    const args = [
      'agent',
      '--server',
      '127.0.0.1:1',
      '--file',
      file,
      '--method',
      'fdatasync,none',
      '--token',
      "s3cr$t 'x'",
      '--size',
      '16MiB',
    ]
    const result = await runCli([...args.slice(0, 3), '--print-service', kind, ...args.slice(3)])
    t.equal(result.code, 0, result.stderr)
    t.equal(result.stderr, '')
    const expected = [process.execPath, realpathSync(binPath), ...args]
    const lines = result.stdout.split('\n').filter(Boolean)
    t.match(lines[0], /^# /, 'one comment line first')
    t.equal(lines.filter((l) => l.startsWith('#')).length, 1, 'one comment line')
    if (kind === 'systemd') {
      t.match(lines[0], /\/etc\/systemd\/system\/plugcheck-agent\.service.*systemctl enable/)
      for (const line of [
        'Type=simple',
        'After=network-online.target',
        'Wants=network-online.target',
        'Restart=no',
        'WantedBy=multi-user.target',
      ])
        t.ok(lines.includes(line), line)
      const execStart = lines.find((l) => l.startsWith('ExecStart='))!
      t.same(splitSystemd(execStart.slice('ExecStart='.length)), expected)
    } else {
      const prefix = 'schtasks /Create /TN plugcheck-agent /SC ONSTART /RU SYSTEM /TR '
      t.ok(lines[1]!.startsWith(prefix), lines[1]!)
      t.same(splitWindows(powershellArgument(lines[1]!.slice(prefix.length))), expected)
    }
    t.notOk(existsSync(file), 'no data file created')
  })
}

t.test('--print-service with a relative --file names the absolute path', async (t) => {
  const result = await runCli(['agent', '--server', '127.0.0.1:1', '--file', 'data.plugcheck', '--print-service', 'systemd'])
  t.equal(result.code, 0, result.stderr)
  const execStart = result.stdout.split('\n').find((l) => l.startsWith('ExecStart='))!
  const words = splitSystemd(execStart.slice('ExecStart='.length))
  t.equal(words[words.indexOf('--file') + 1], join(process.cwd(), 'data.plugcheck'))
  t.notOk(words.includes('--print-service'))
})
