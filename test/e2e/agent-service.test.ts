/**
 * agent --print-service: the systemd unit's ExecStart and the scheduled task's /TR, split back the way
 * systemd and Windows split them, give the agent's own command line (without --print-service, --file
 * absolute); nothing is touched and no listener is needed. The systemd unit holds no token: it loads
 * a root-only file as a credential, which the commands printed on stderr create with mode 0600 (run
 * here against a temporary directory), and the agent started as systemd starts it (its credential
 * copied, ${CREDENTIALS_DIRECTORY} set) gets into a listener that requires the token. systemd's own
 * parser (systemd-analyze verify) takes every line of the printed units without a complaint.
 */
import t from 'tap'
import { execFileSync, spawn } from 'node:child_process'
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, realpathSync, statSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { binPath, runCli, startListener, tempDir, type CliResult } from '../fixtures/cli.js'

/**
 * systemd's ExecStart splitting, for what the unit holds: words, "..." with C escapes; then %% as %,
 * $$ as $ and ${NAME} as the variable's value in env (systemd's own and the unit's environment).
 */
function splitSystemd(line: string, env: Readonly<Record<string, string>> = {}): string[] {
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
    words.push(
      word.replace(/%%|\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (m, name?: string) =>
        m === '%%' ? '%' : m === '$$' ? '$' : (env[name!] ?? ''),
      ),
    )
  }
  return words
}

/** RequiresMountsFor='s words, as systemd unquotes them (no C escapes), %% as %. */
function splitMountsFor(value: string): string[] {
  const words: string[] = []
  for (const match of value.matchAll(/"((?:[^"\\]|\\.)*)"|(\S+)/g))
    words.push((match[1] === undefined ? match[2]! : match[1].replace(/\\(.)/g, '$1')).replace(/%%/g, '%'))
  return words
}

/** The unit's value for key (its one line). */
function unitValue(unit: string, key: string): string {
  const lines = unit.split('\n').filter((l) => l.startsWith(`${key}=`))
  if (lines.length !== 1) throw new Error(`${lines.length} lines of ${key}= in the unit:\n${unit}`)
  return lines[0]!.slice(key.length + 1)
}

/** Runs a command to completion (60 s at most), with env added to this process's. */
async function runCommand(command: string, args: readonly string[], env: Readonly<Record<string, string>> = {}): Promise<CliResult> {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()))
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()))
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000)
  const code = await new Promise<number>((resolve) => child.on('close', (c) => resolve(c ?? -1)))
  clearTimeout(timer)
  return { code, stdout, stderr }
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
/** The data file's directory: a mount point with a space, a quote, a specifier and a variable in its name. */
const awkwardDir = 'mnt "point" 100%d $X'
const awkwardToken = `s3cr$t 'x' %h "q" \\ end`
/** Where systemd puts the unit's credentials (the agent is told with ${CREDENTIALS_DIRECTORY}). */
const credentialsDir = '/run/credentials/plugcheck-agent.service'

for (const kind of ['systemd', 'windows'] as const) {
  t.test(`--print-service ${kind}: the command splits back into the agent's arguments`, async (t) => {
    const dir = tempDir(t)
    const file = join(dir, awkwardDir, awkwardName)
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
      awkwardToken,
      '--size',
      '16MiB',
    ]
    const result = await runCli([...args.slice(0, 3), '--print-service', kind, ...args.slice(3)])
    t.equal(result.code, 0, result.stderr)
    const command = [process.execPath, realpathSync(binPath)]
    const lines = result.stdout.split('\n').filter(Boolean)
    t.match(lines[0], /^# /, 'a comment first')
    if (kind === 'systemd') {
      t.equal(
        lines[0],
        '# save as /etc/systemd/system/plugcheck-agent.service, then: systemctl daemon-reload && systemctl enable --now plugcheck-agent.service',
      )
      t.notOk(result.stdout.includes(awkwardToken), 'the token is not in the unit')
      t.notOk(result.stdout.includes('s3cr'), 'no part of it either')
      for (const line of [
        'Type=simple',
        'After=network-online.target',
        'Wants=network-online.target',
        'Restart=no',
        'WantedBy=multi-user.target',
        'LoadCredential=plugcheck-token:/etc/plugcheck/agent.token',
      ])
        t.ok(lines.includes(line), line)
      t.same(
        splitMountsFor(unitValue(result.stdout, 'RequiresMountsFor')),
        [join(dir, awkwardDir)],
        "the data file's directory must be mounted",
      )
      const words = splitSystemd(unitValue(result.stdout, 'ExecStart'), { CREDENTIALS_DIRECTORY: credentialsDir })
      const withoutToken = [...args.slice(0, 7), ...args.slice(9)]
      t.same(words, [...command, ...withoutToken, '--token-file', `${credentialsDir}/plugcheck-token`])
      t.equal(
        result.stderr.split('\n').at(-2),
        'systemctl daemon-reload && systemctl enable --now plugcheck-agent.service',
        'the same enable as the comment',
      )
    } else {
      t.equal(lines.filter((l) => l.startsWith('#')).length, 1, 'one comment line')
      const prefix = 'schtasks /Create /TN plugcheck-agent /SC ONSTART /RU SYSTEM /TR '
      t.ok(lines[1]!.startsWith(prefix), lines[1]!)
      t.same(splitWindows(powershellArgument(lines[1]!.slice(prefix.length))), [...command, ...args])
      t.equal(result.stderr, '')
    }
    t.notOk(existsSync(file), 'no data file created')
  })
}

t.test(
  'systemd with --token: the printed commands make the token file 0600, and the agent started as the unit starts it gets in',
  async (t) => {
    const dir = tempDir(t)
    const listener = await startListener(join(dir, 'listener'), ['--token', awkwardToken])
    t.teardown(() => listener.kill())
    const file = join(dir, 'mnt', 'data.plugcheck')
    mkdirSync(dirname(file))
    const printed = await runCli([
      'agent',
      '--server',
      listener.server,
      '--file',
      file,
      '--token',
      awkwardToken,
      '--print-service',
      'systemd',
    ])
    t.equal(printed.code, 0, printed.stderr)
    t.notOk(printed.stdout.includes('s3cr'), 'no token in the unit')
    const steps = printed.stderr.split('\n').filter(Boolean)
    t.match(
      steps[0],
      /^# the unit on stdout goes to \/etc\/systemd\/system\/plugcheck-agent\.service; the token goes to \/etc\/plugcheck\/agent\.token, created mode 0600/,
    )
    t.same(steps.slice(1), [
      'install -d -m 0700 /etc/plugcheck',
      'install -m 0600 /dev/null /etc/plugcheck/agent.token',
      `printf '%s\\n' 's3cr$t '\\''x'\\'' %h "q" \\ end' > /etc/plugcheck/agent.token`,
      'systemctl daemon-reload && systemctl enable --now plugcheck-agent.service',
    ])

    // The commands as printed, in a temporary directory instead of /etc/plugcheck (not the systemctl line: no systemd runs here).
    const etc = join(dir, 'etc-plugcheck')
    const tokenFile = join(etc, 'agent.token')
    const script = steps
      .slice(0, -1)
      .map((l) => l.replaceAll('/etc/plugcheck', etc))
      .join('\n')
    const mode = (path: string): number => statSync(path).mode & 0o777
    const fresh = await runCommand('sh', ['-c', `umask 022\n${script}`])
    t.equal(fresh.code, 0, fresh.stderr)
    t.equal(mode(etc), 0o700, 'the directory: root only')
    t.equal(mode(tokenFile), 0o600, 'the file: root only')
    t.equal(readFileSync(tokenFile, 'utf8'), `${awkwardToken}\n`, 'the token, quoted through the shell intact')
    // Again over a file left readable by others, with more bytes than the token: made 0600 and holding the token alone.
    chmodSync(tokenFile, 0o644)
    writeFileSync(tokenFile, 'x'.repeat(200))
    const again = await runCommand('sh', ['-c', `umask 022\n${script}`])
    t.equal(again.code, 0, again.stderr)
    t.equal(mode(tokenFile), 0o600)
    t.equal(readFileSync(tokenFile, 'utf8'), `${awkwardToken}\n`)

    // systemd: LoadCredential= copies the file into the unit's credentials directory and sets $CREDENTIALS_DIRECTORY.
    const [name, source] = unitValue(printed.stdout, 'LoadCredential').split(/:(.*)/s) as [string, string]
    t.equal(source, '/etc/plugcheck/agent.token')
    const credentials = join(dir, 'credentials')
    mkdirSync(credentials, { mode: 0o700 })
    copyFileSync(source.replace('/etc/plugcheck', etc), join(credentials, name))
    const [bin, ...args] = splitSystemd(unitValue(printed.stdout, 'ExecStart'), { CREDENTIALS_DIRECTORY: credentials })
    t.notOk(args.includes('--token'), 'the token is not on the command line either')
    const started = await runCommand(bin!, args, { CREDENTIALS_DIRECTORY: credentials })
    t.equal(started.code, 0, started.stderr)
    t.match(started.stdout, /nothing to verify/, 'the listener answered: the token was right')
    t.match(started.stdout, /the listener runs no campaign: nothing to write/)

    // The same start with another token in the credential is refused: the token that got in was the file's.
    writeFileSync(join(credentials, name), 'not-the-token\n')
    const refused = await runCommand(bin!, args, { CREDENTIALS_DIRECTORY: credentials })
    t.equal(refused.code, 2, refused.stderr)
    t.match(refused.stderr, /token/)
  },
)

t.test('systemd with --token-file: the unit loads that file; the agent, write, verify and runs read it', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'), ['--token', awkwardToken])
  t.teardown(() => listener.kill())
  const tokenFile = join(dir, 'secret dir', 'plug%token')
  mkdirSync(dirname(tokenFile))
  writeFileSync(tokenFile, `${awkwardToken}\n`, { mode: 0o644 })
  const file = join(dir, 'data.plugcheck')
  const printed = await runCli([
    'agent',
    '--server',
    listener.server,
    '--file',
    file,
    '--token-file',
    tokenFile,
    '--print-service',
    'systemd',
  ])
  t.equal(printed.code, 0, printed.stderr)
  t.notOk(printed.stdout.includes('s3cr'), 'no token in the unit')
  t.equal(unitValue(printed.stdout, 'LoadCredential'), `plugcheck-token:${dirname(tokenFile)}/plug%%token`, 'the file, % as %%')
  const steps = printed.stderr.split('\n').filter(Boolean)
  t.notOk(printed.stderr.includes('s3cr'), 'the token is not printed: it is in the file already')
  t.equal(steps[1], `chown root: '${tokenFile}' && chmod 0600 '${tokenFile}'`)
  const chmod = await runCommand('sh', ['-c', steps[1]!])
  t.equal(chmod.code, 0, chmod.stderr)
  t.equal(statSync(tokenFile).mode & 0o777, 0o600)

  const agent = await runCli(['agent', '--server', listener.server, '--file', file, '--token-file', tokenFile])
  t.equal(agent.code, 0, agent.stderr)
  t.match(agent.stdout, /nothing to verify/)
  const write = await runCli([
    'write',
    '--server',
    listener.server,
    '--file',
    file,
    '--method',
    'none',
    '--size',
    '1MiB',
    '--duration',
    '0.3',
    '--token-file',
    tokenFile,
  ])
  t.equal(write.code, 0, write.stderr)
  t.ok(
    write.stdout.includes(`--token-file ${tokenFile}`) || write.stdout.includes(`--token-file '${tokenFile}'`),
    'the verify command it prints keeps the token file, never shows the token',
  )
  t.notMatch(write.stdout, /--token 'YOUR-TOKEN'/)
  t.notOk(write.stdout.includes('s3cr'))
  // verify and runs read it too (the listener requires the token: without it, exit 2).
  const verified = await runCli(['verify', '--server', listener.server, '--file', file, '--token-file', tokenFile])
  t.equal(verified.code, 4, `judged: the none run alone lost nothing, inconclusive ${verified.stderr}`)
  t.match(verified.stdout, /^INCONCLUSIVE/)
  const listed = await runCli(['runs', '--server', listener.server, '--json', '--token-file', tokenFile])
  t.equal(listed.code, 0, listed.stderr)
  t.equal((JSON.parse(listed.stdout) as { runs: unknown[] }).runs.length, 1)
  const unlisted = await runCli(['runs', '--server', listener.server, '--json'])
  t.equal(unlisted.code, 2, 'no token: refused')
  const prune = await runCli(['runs', '--prune', '--dir', join(dir, 'listener'), '--older-than', '1d', '--token-file', tokenFile])
  t.equal(prune.code, 2)
  t.match(prune.stderr, '--prune works on --dir, not through --server or --token')
  const both = await runCli(['agent', '--server', listener.server, '--file', file, '--token', 'x', '--token-file', tokenFile])
  t.equal(both.code, 2)
  t.equal(both.stderr, 'plugcheck: give the token once: --token T or --token-file PATH, not both\n')
  const missing = await runCli([
    'agent',
    '--server',
    listener.server,
    '--file',
    file,
    '--token-file',
    join(dir, 'nope'),
    '--print-service',
    'systemd',
  ])
  t.equal(missing.code, 2)
  t.match(missing.stderr, /^plugcheck: could not read the token file .*\/nope: ENOENT \(no such file or directory\)\nhint: /)
  t.equal(missing.stdout, '', 'no unit printed')
})

t.test('systemd with a token of two lines: refused, nothing printed', async (t) => {
  const result = await runCli(['agent', '--server', '127.0.0.1:1', '--file', 'data', '--token', 'a\nb', '--print-service', 'systemd'])
  t.equal(result.code, 2)
  t.equal(result.stdout, '')
  t.equal(
    result.stderr,
    'plugcheck: the token holds a line end: it cannot go into a token file of one line\nhint: give the listener a token of one line\n',
  )
})

t.test("systemd's own parser takes every line of the printed units", async (t) => {
  let analyze = ''
  try {
    analyze = execFileSync('sh', ['-c', 'command -v systemd-analyze'], { encoding: 'utf8' }).trim()
  } catch {
    return void t.fail('systemd-analyze is missing\nhint: apt-get install -y --no-install-recommends systemd (.ci/run does)')
  }
  const dir = tempDir(t)
  const tokenFile = join(dir, 'token file')
  writeFileSync(tokenFile, 'tok\n', { mode: 0o600 })
  const cases: ReadonlyArray<readonly [string, readonly string[]]> = [
    ['no token', []],
    ['--token', ['--token', awkwardToken]],
    ['--token-file', ['--token-file', tokenFile]],
  ]
  for (const [what, extra] of cases) {
    const file = join(dir, awkwardDir, awkwardName)
    const printed = await runCli(['agent', '--server', '127.0.0.1:1', '--file', file, ...extra, '--print-service', 'systemd'])
    t.equal(printed.code, 0, printed.stderr)
    const unit = join(dir, 'plugcheck-agent.service')
    writeFileSync(unit, printed.stdout)
    const verified = await runCommand(analyze, ['verify', unit])
    t.equal(verified.stderr, '', `${what}: no complaint`)
    t.equal(verified.code, 0, what)
  }
  // The check itself: a line systemd cannot parse is a complaint.
  const unit = join(dir, 'plugcheck-agent.service')
  writeFileSync(unit, readFileSync(unit, 'utf8').replace(/^RequiresMountsFor=.*$/m, 'RequiresMountsFor="/unterminated'))
  const broken = await runCommand(analyze, ['verify', unit])
  t.match(broken.stderr, /RequiresMountsFor|Invalid syntax/, 'a broken line is reported')
})

t.test('--print-service with a relative --file names the absolute path', async (t) => {
  const result = await runCli(['agent', '--server', '127.0.0.1:1', '--file', 'data.plugcheck', '--print-service', 'systemd'])
  t.equal(result.code, 0, result.stderr)
  const execStart = result.stdout.split('\n').find((l) => l.startsWith('ExecStart='))!
  const words = splitSystemd(execStart.slice('ExecStart='.length))
  t.equal(words[words.indexOf('--file') + 1], join(process.cwd(), 'data.plugcheck'))
  t.notOk(words.includes('--print-service'))
})
