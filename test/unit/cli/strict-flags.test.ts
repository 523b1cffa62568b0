/**
 * Strict flags: every command refuses a flag (or a word) it does not take, exit 2, naming it first,
 * with the closest flag of that command when one is close, before any complaint about a missing
 * required flag; every form the README and yargs accept still is; `-h` and `--help` show the
 * command's help and exit 0 whatever else is on the line. A flag given twice is refused naming it
 * (an array flag's values add up instead), and so is a flag that takes a value, negated.
 */
import t from 'tap'
import { existsSync, mkdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { agentCliCommand } from '../../../src/cli/commands/agent.js'
import type { CliCommand } from '../../../src/cli/commands/command.js'
import { listenCliCommand } from '../../../src/cli/commands/listen.js'
import { reportCliCommand } from '../../../src/cli/commands/report.js'
import { runsCliCommand } from '../../../src/cli/commands/runs.js'
import { verifyCliCommand } from '../../../src/cli/commands/verify.js'
import { writeCliCommand } from '../../../src/cli/commands/write.js'
import { commands } from '../../../src/cli/cli.js'
import { closestFlag, editDistance, flagSpecOf, unknownArguments } from '../../../src/cli/strict-flags.js'
import { runCli, runInProcess, tempDir } from '../../fixtures/cli.js'

const hint = (command: string): string => `hint: plugcheck ${command} --help lists the flags of ${command}\n`

t.test('editDistance: edits, and a swap of two neighbours is one', async (t) => {
  t.equal(editDistance('server', 'server'), 0)
  t.equal(editDistance('sever', 'server'), 1, 'a letter left out')
  t.equal(editDistance('fiel', 'file'), 1, 'two letters swapped')
  t.equal(editDistance('jsno', 'json'), 1)
  t.equal(editDistance('', 'abc'), 3)
  t.equal(editDistance('kitten', 'sitting'), 3)
})

t.test('closestFlag: near enough for its length, or the one flag it begins', async (t) => {
  const write = flagSpecOf(writeCliCommand.options).suggestions
  t.equal(closestFlag('sever', write), 'server')
  t.equal(closestFlag('fiel', write), 'file')
  t.equal(closestFlag('recordSise', write), 'record-size', 'a camelCase spelling compared as its flag')
  t.equal(closestFlag('Server', write), 'server')
  t.equal(closestFlag('dur', write), 'duration', 'the only flag it begins')
  t.equal(closestFlag('listener-timout', write), 'listener-timeout')
  t.equal(closestFlag('bogus', write), undefined, 'nothing close')
  t.equal(closestFlag('d', write), undefined, 'one letter proposes nothing')
  t.equal(closestFlag('trace-fil', write), undefined, 'a hidden flag is never proposed')
  t.equal(closestFlag('hlep', write), 'help')
})

t.test('every form yargs and the README accept is still accepted', async (t) => {
  const accepted: Array<[CliCommand, string[]]> = [
    [writeCliCommand, ['--server', 'h:1', '--file=x', '--no-direct', '--recordSize', '8k', '--listenerTimeout', '2s', '--jobs', '2']],
    [writeCliCommand, ['--direct', 'true', '--force', 'false', '--duration', '2s', '--trace-file', 't', '--discard-unverified']],
    [writeCliCommand, ['--server', 'h:1', '--direct=true', '--force=false', '--no-json=false', '--']],
    [writeCliCommand, ['-h', '--help', '--version']],
    [reportCliCommand, ['--dir', 'd', '--campaign', 'ssd-a', 'hdd-b', '--json', '--html', 'r.html']],
    [listenCliCommand, ['--seed', '-1', '--port', '0', '--reserve=-1%', '--max-store-bytes-per-peer', 'none', '--cut-after', '30-90']],
    [runsCliCommand, ['--prune', '--older-than', '30d', '--dir', 'd', '--dry-run', '--json']],
    [agentCliCommand, ['--server', 'h:1', '--file', 'f', '--print-service', 'systemd', '--method', 'fdatasync,none']],
    [verifyCliCommand, ['--acks', 'd', '--file', 'f', '--run', '0123456789abcdef', '--host', 'n', '--token', 'T']],
  ]
  for (const [command, args] of accepted)
    t.same(unknownArguments(args, flagSpecOf(command.options)), [], `${command.name} ${args.join(' ')}`)
})

t.test("every flag of the README's command lines is one its command takes", async (t) => {
  const readme = readFileSync(fileURLToPath(new URL('../../../README.md', import.meta.url)), 'utf8')
  const block = /## Commands\n\n```\n([\s\S]*?)```/.exec(readme)![1]!
  let command: CliCommand | undefined
  let checked = 0
  for (const line of block.split('\n')) {
    const named = /^plugcheck (\w+)/.exec(line)
    if (named !== null) command = commands.find((c) => c.name === named[1])
    t.ok(command, `a command for: ${line}`)
    const spec = flagSpecOf(command!.options)
    for (const [, without, flag] of line.matchAll(/(without )?--([a-z][a-z-]*)/g)) {
      // agent: "[write's options, without --duration]"
      // --no-x: the negation of a yes/no flag x (write's --no-dir-sync)
      const negated = flag!.startsWith('no-') && spec.booleans.has(flag!.slice(3))
      if (without === undefined) t.ok(spec.names.has(flag!) || negated, `${command!.name} takes --${flag}`)
      else t.notOk(spec.names.has(flag!), `${command!.name} does not take --${flag}`)
      checked++
    }
  }
  t.ok(checked > 50, `${checked} flags checked`)
})

t.test('the misspelt flag is named first, with the flag it was meant to be, exit 2, nothing written', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'x')
  const cases: Array<[string[], string]> = [
    [['write', '--sever', '127.0.0.1:1', '--file', file], 'unknown flag --sever (did you mean --server?)'],
    [['verify', '--server', '127.0.0.1:1', '--fiel', file], 'unknown flag --fiel (did you mean --file?)'],
    [['agent', '--server', '127.0.0.1:1', '--file', file, '--duration', '5'], 'unknown flag --duration'],
    [['write', '--server', '127.0.0.1:1', '--file', file, '--dur', '5'], 'unknown flag --dur (did you mean --duration?)'],
    [
      ['write', '--sever=127.0.0.1:1', '--fiel', file, '--bogus'],
      'unknown flag --sever (did you mean --server?); unknown flag --fiel (did you mean --file?); unknown flag --bogus',
    ],
    [['write', '--server', '127.0.0.1:1', '--file', file, 'now'], 'unexpected argument now (write takes flags only)'],
    [['methods', '--jsno'], 'unknown flag --jsno (did you mean --json?)'],
    [['bench', '--sec', '1'], 'unknown flag --sec (did you mean --secs?)'],
    [['listen', '--prot', '5400'], 'unknown flag --prot (did you mean --port?)'],
    [['report', '--dri', dir], 'unknown flag --dri (did you mean --dir?)'],
    [['runs', '--prune', '--older-then', '30d', '--dir', dir], 'unknown flag --older-then (did you mean --older-than?)'],
    [['demo', '--kill-afer', '2'], 'unknown flag --kill-afer (did you mean --kill-after?)'],
    [['write', '-server', '127.0.0.1:1', '--file', file], 'unknown flag -server (did you mean --server?)'],
  ]
  for (const [args, message] of cases) {
    const result = await runInProcess(args)
    t.equal(result.code, 2, `${args.join(' ')}: exit 2`)
    t.equal(result.stderr, `plugcheck: ${message}\n${hint(args[0]!)}`, args.join(' '))
    t.equal(result.stdout, '')
  }
  t.notOk(existsSync(file), 'no data file')
})

t.test('every command refuses an unknown flag, as a child process', async (t) => {
  const results = await Promise.all(commands.map((command) => runCli([command.name, '--no-such-flag', 'x'])))
  commands.forEach((command, i) => {
    t.equal(results[i]!.code, 2, `${command.name}: exit 2`)
    t.equal(results[i]!.stderr, `plugcheck: unknown flag --no-such-flag\n${hint(command.name)}`, `${command.name}: names it`)
  })
})

t.test('a value that starts with a dash: the hint says to join it with =', async (t) => {
  const result = await runInProcess(['write', '--server', '127.0.0.1:1', '--file', 'x', '--token', '-abc'])
  t.equal(result.code, 2)
  t.equal(result.stderr, 'plugcheck: unknown flag -abc\nhint: a value that starts with a dash is given with =: --token=-abc\n')
})

t.test('-h and --help show the command help and exit 0, whatever else is given', async (t) => {
  const lines = commands.flatMap((command) => [
    [command.name, '-h'],
    [command.name, '--help'],
  ])
  lines.push(['write', '--sever', 'x', '-h'], ['write', '--duration', 'soon', '--help'])
  const results = await Promise.all(lines.map((args) => runCli(args)))
  lines.forEach((args, i) => {
    const result = results[i]!
    t.equal(result.code, 0, `${args.join(' ')}: exit 0`)
    t.equal(result.stderr, '', `${args.join(' ')}: no complaint`)
    t.match(result.stdout, new RegExp(`^plugcheck ${args[0]}\\n`), `${args.join(' ')}: the command's help`)
    t.match(result.stdout, /--help/, `${args.join(' ')}: its flags`)
  })
})

t.test('an unknown command is named, with the command it may have meant, exit 2', async (t) => {
  const cases: Array<[string[], string]> = [
    [['wirte', '--server', '127.0.0.1:1'], 'unknown command wirte (did you mean write?)'],
    [['verfy'], 'unknown command verfy (did you mean verify?)'],
    [['bogus'], 'unknown command bogus'],
  ]
  for (const [args, message] of cases) {
    const result = await runInProcess(args)
    t.equal(result.code, 2, `${args.join(' ')}: exit 2`)
    t.equal(result.stderr, `plugcheck: ${message}\nhint: plugcheck --help lists the commands\n`)
  }
})

t.test('a flag given without its value is refused, never run with its default', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'x')
  const cases: Array<[string[], string]> = [
    [['bench', '--file', dir, '--secs'], '--secs needs a value'],
    [['write', '--server', '127.0.0.1:1', '--file', file, '--jobs'], '--jobs needs a value'],
    [['write', '--server', '127.0.0.1:1', '--file', file, '--duration', '--force'], '--duration needs a value'],
    [['write', '--server', '--file', file], '--server needs a value'],
    [['report', '--dir', dir, '--campaign', '--json'], '--campaign needs a value'],
    [['verify', '--server', '127.0.0.1:1', '--file', file, '--run', '--'], '--run needs a value'],
  ]
  for (const [args, message] of cases) {
    const result = await runInProcess(args)
    t.equal(result.code, 2, `${args.join(' ')}: exit 2`)
    t.equal(result.stderr, `plugcheck: ${message}\n${hint(args[0]!)}`, args.join(' '))
  }
  t.same(
    unknownArguments(['--no-force', '--server', 'h:1', '--no-direct', 'false'], flagSpecOf(writeCliCommand.options)),
    [],
    'a negated flag takes no value',
  )
  t.notOk(existsSync(file), 'no data file')
})

t.test('a flag given twice, in any of its forms, is refused naming it once, exit 2, nothing written', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'x')
  const write = ['write', '--server', '127.0.0.1:1', '--file', file]
  const cases: Array<[string[], string]> = [
    [[...write, '--duration', '5', '--duration', '10'], '--duration is given more than once; write takes it once'],
    [[...write, '--duration=5', '--duration', '10'], '--duration is given more than once; write takes it once'],
    [[...write, '--jobs', '1', '--jobs', '2', '--jobs', '3'], '--jobs is given more than once; write takes it once'],
    [
      [...write, '--record-size', '4k', '--recordSize', '8k'],
      '--record-size is given more than once (as --record-size and --recordSize); write takes it once',
    ],
    [[...write, '--force', '--no-force'], '--force is given more than once (as --force and --no-force); write takes it once'],
    [[...write, '--server', '127.0.0.1:2'], '--server is given more than once; write takes it once'],
    [
      [...write, '--method', 'fsync', '--size', '8M', '--method', 'none', '--size', '4M'],
      '--method is given more than once; write takes it once; --size is given more than once; write takes it once',
    ],
    [['verify', '--server', '127.0.0.1:1', '--file', file, '--file', file], '--file is given more than once; verify takes it once'],
    [['methods', '--json', '--json'], '--json is given more than once; methods takes it once'],
    [
      ['write', '--sever', '127.0.0.1:1', '--file', file, '--file', file],
      'unknown flag --sever (did you mean --server?); --file is given more than once; write takes it once',
    ],
  ]
  for (const [args, message] of cases) {
    const result = await runInProcess(args)
    t.equal(result.code, 2, `${args.join(' ')}: exit 2`)
    t.equal(result.stderr, `plugcheck: ${message}\n${hint(args[0]!)}`, args.join(' '))
    t.equal(result.stdout, '')
  }
  const many = Array.from({ length: 10_000 }, (_, i) => (i % 2 === 0 ? '--duration' : String(i)))
  const looped = await runInProcess([...write, ...many])
  t.equal(looped.code, 2, '10,000 --duration: exit 2')
  t.equal(looped.stderr, `plugcheck: --duration is given more than once; write takes it once\n${hint('write')}`, 'named once')
  t.notOk(existsSync(file), 'no data file')
})

t.test('an array flag given again adds its values: report --campaign a --campaign b reads both names', async (t) => {
  const report = flagSpecOf(reportCliCommand.options)
  t.same(unknownArguments(['--dir', 'd', '--campaign', 'a', '--campaign', 'b'], report), [])
  const dir = tempDir(t)
  mkdirSync(join(dir, 'runs'))
  for (const args of [
    ['--campaign', 'a', '--campaign', 'b'],
    ['--campaign', 'a', 'b'],
    ['--campaign=a', '--json', '--campaign', 'b'],
  ]) {
    const result = await runInProcess(['report', '--dir', dir, ...args])
    t.equal(result.code, 2, args.join(' '))
    t.match(result.stderr, `holds no campaign named a, b\n`, `${args.join(' ')}: both names, in order`)
  }
})

t.test('a flag that takes a value, negated, is refused saying so, exit 2, nothing written', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'x')
  const write = ['write', '--server', '127.0.0.1:1', '--file', file]
  const cases: Array<[string[], string]> = [
    [[...write, '--no-duration'], '--no-duration: duration takes a value, it cannot be negated'],
    [[...write, '--no-duration', '5'], '--no-duration: duration takes a value, it cannot be negated'],
    [[...write, '--noDuration'], '--noDuration: duration takes a value, it cannot be negated'],
    [['write', '--no-server', '--file', file], '--no-server: server takes a value, it cannot be negated'],
    [[...write, '--no-token'], '--no-token: token takes a value, it cannot be negated'],
    [['bench', '--file', dir, '--no-secs'], '--no-secs: secs takes a value, it cannot be negated'],
    [['report', '--dir', dir, '--no-campaign'], '--no-campaign: campaign takes a value, it cannot be negated'],
  ]
  for (const [args, message] of cases) {
    const result = await runInProcess(args)
    t.equal(result.code, 2, `${args.join(' ')}: exit 2`)
    t.equal(result.stderr, `plugcheck: ${message}\n${hint(args[0]!)}`, args.join(' '))
    t.equal(result.stdout, '')
  }
  t.notOk(existsSync(file), 'no data file')
  t.same(
    unknownArguments(['--no-direct', '--no-force', '--no-discard-unverified'], flagSpecOf(writeCliCommand.options)),
    [],
    'a yes/no flag negates',
  )
})

t.test("a required flag left out is named with what it takes, in the project's form, exit 2 (every command)", async (t) => {
  const required = Object.fromEntries(commands.map((command) => [command.name, flagSpecOf(command.options).required]))
  t.same(
    Object.fromEntries(Object.entries(required).filter(([, flags]) => flags.length > 0)),
    { write: ['server', 'file'], agent: ['server', 'file'], verify: ['file'], report: ['dir'] },
    'the commands with required flags, all of them covered below',
  )
  const cases: Array<[string[], string]> = [
    [['write', '--server', '10.0.0.2:5400'], 'write needs --file PATH'],
    [['write', '--file', 'x'], 'write needs --server HOST[:PORT]'],
    [['write'], 'write needs --server HOST[:PORT] and --file PATH'],
    [['write', '--method', 'fsync', '--duration', '5'], 'write needs --server HOST[:PORT] and --file PATH'],
    [['agent', '--server=10.0.0.2'], 'agent needs --file PATH'],
    [['agent'], 'agent needs --server HOST[:PORT] and --file PATH'],
    [['verify', '--acks', 'd'], 'verify needs --file PATH'],
    [['report'], 'report needs --dir DIR'],
    [['report', '--json'], 'report needs --dir DIR'],
  ]
  for (const [args, message] of cases) {
    const result = await runInProcess(args)
    t.equal(result.code, 2, args.join(' '))
    t.equal(result.stderr, `plugcheck: ${message}\nhint: plugcheck ${args[0]} --help lists its flags\n`, args.join(' '))
  }
  // Given in another form, a required flag counts as given: the command goes on to its own checks.
  const camel = await runInProcess(['write', '--server', 'http://h:1', '--File=x'])
  t.match(camel.stderr, /unknown flag --File \(did you mean --file\?\)/, 'an unknown flag is still named first')
  const forms = await runInProcess(['write', '--server=http://h:1', '--file=x'])
  t.match(forms.stderr, /^plugcheck: --server takes HOST\[:PORT\], not a URL/, '--flag=value forms are given')
  const version = await runCli(['write', '--version'])
  t.equal(version.code, 0, '--version is answered, required flags or not')
})

t.test('a yes/no flag with = takes true or false only; any other value is refused naming the forms, exit 2', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'x')
  const write = ['write', '--server', '127.0.0.1:1', '--file', file]
  const forms = (flag: string): string => `give --${flag}, --no-${flag}, --${flag}=true or --${flag}=false`
  const cases: Array<[string[], string]> = [
    [[...write, '--direct=yes'], `--direct=yes: --direct is yes or no: ${forms('direct')}`],
    [[...write, '--direct=1'], `--direct=1: --direct is yes or no: ${forms('direct')}`],
    [[...write, '--direct=TRUE'], `--direct=TRUE: --direct is yes or no: ${forms('direct')}`],
    [[...write, '--force='], `--force=: --force is yes or no: ${forms('force')}`],
    [[...write, '--no-direct=on'], `--no-direct=on: --direct is yes or no: ${forms('direct')}`],
    [['methods', '--json=no'], `--json=no: --json is yes or no: ${forms('json')}`],
  ]
  for (const [args, message] of cases) {
    const result = await runInProcess(args)
    t.equal(result.code, 2, `${args.join(' ')}: exit 2`)
    t.equal(result.stderr, `plugcheck: ${message}\n${hint(args[0]!)}`, args.join(' '))
    t.equal(result.stdout, '')
  }
  t.notOk(existsSync(file), 'no data file')
})

t.test('an empty value after = is no value: refused for every flag that takes one, exit 2', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'x')
  const cases: Array<[string[], string]> = [
    [['report', '--dir', dir, '--campaign='], '--campaign needs a value'],
    [['report', '--dir=', '--json'], '--dir needs a value'],
    [['write', '--server', '127.0.0.1:1', '--file='], '--file needs a value'],
    [['write', '--server', '127.0.0.1:1', '--file', file, '--method='], '--method needs a value'],
    [['runs', '--server', '127.0.0.1:1', '--token='], '--token needs a value'],
    [['listen', '--dir', dir, '--port='], '--port needs a value'],
  ]
  for (const [args, message] of cases) {
    const result = await runInProcess(args)
    t.equal(result.code, 2, `${args.join(' ')}: exit 2`)
    t.equal(result.stderr, `plugcheck: ${message}\n${hint(args[0]!)}`, args.join(' '))
    t.equal(result.stdout, '')
  }
  t.notOk(existsSync(file), 'no data file')
})

t.test('every word after -- is refused, named, never dropped, exit 2', async (t) => {
  const cases: Array<[string[], string]> = [
    [['methods', '--', 'junk'], 'unexpected argument junk after -- (methods takes flags only)'],
    [
      ['write', '--server', '127.0.0.1:1', '--file', 'x', '--', '--duration', '5'],
      'unexpected argument --duration after -- (write takes flags only); unexpected argument 5 after -- (write takes flags only)',
    ],
  ]
  for (const [args, message] of cases) {
    const result = await runInProcess(args)
    t.equal(result.code, 2, `${args.join(' ')}: exit 2`)
    t.equal(result.stderr, `plugcheck: ${message}\n${hint(args[0]!)}`, args.join(' '))
    t.equal(result.stdout, '')
  }
  t.same(unknownArguments(['--json', '--'], flagSpecOf(reportCliCommand.options)), [], 'a -- with nothing after it is harmless')
})
