/**
 * Hostile review of the Windows port under Wine. Each test asserts the correct behaviour and fails
 * while the defect is there.
 *
 * The root cause of the first three: the data file is created, checked and renamed through Node's fs,
 * which hands Windows a \\?\ (namespaced) path, where a trailing dot or space is kept and NUL, CON,
 * COM1, LPT1.dat are ordinary names; the native port then opens the same text with CreateFileW
 * without the prefix, where Win32 path rules strip the trailing dot and turn those names into devices.
 * So the file Node checked and the file the port writes are not the same file.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { startListener, tempDir } from '../fixtures/cli.js'
import { ensureWine, runWine, winePath, wineRunTimeoutMs } from '../fixtures/wine.js'

t.test('Windows port attacks (under Wine)', async (t) => {
  ensureWine()
  const dir = tempDir(t, 'plugcheck-win-attack-')
  const listener = await startListener(join(dir, 'acks'))
  t.teardown(() => listener.kill())
  const run = (args: string[]) => runWine(args, { timeoutMs: wineRunTimeoutMs })

  t.test('write --file "X." never writes into the user\'s file X, and verify never blames the storage for it', async (t) => {
    const folder = join(dir, 'dot')
    mkdirSync(folder)
    const victim = join(folder, 'report')
    const precious = Buffer.from('precious user data, not a plugcheck file\n'.repeat(1000))
    writeFileSync(victim, precious)
    const write = await run([
      'write',
      '--server',
      listener.server,
      '--file',
      `${winePath(victim)}.`,
      '--method',
      'fsync',
      '--duration',
      '0.5',
    ])
    t.ok(readFileSync(victim).equals(precious), `the user's file ${victim} is unchanged (write exit ${write.code}: ${write.stderr})`)
    if (write.code === 0) {
      const verify = await run(['verify', '--server', listener.server, '--file', `${winePath(victim)}.`])
      t.not(verify.code, 1, `verify does not fail the storage for records written into another file: ${verify.stdout}`)
    } else {
      t.equal(write.code, 2, 'refused as a usage error')
      t.equal(write.stdout, '', 'refused before anything is announced')
    }
  })

  t.test('bench --file "X." never writes into the user\'s file X', async (t) => {
    const folder = join(dir, 'bench-dot')
    mkdirSync(folder)
    const victim = join(folder, 'notes')
    const precious = Buffer.from('precious notes\n'.repeat(1000))
    writeFileSync(victim, precious)
    const bench = await run(['bench', '--secs', '0.1', '--file', `${winePath(victim)}.`])
    t.ok(readFileSync(victim).equals(precious), `the user's file ${victim} is unchanged (bench exit ${bench.code}: ${bench.stderr})`)
  })

  t.test('a trailing dot or space, or LPT1.dat: refused before the run is announced, or written where announced', async (t) => {
    const folder = join(dir, 'odd-names')
    mkdirSync(folder)
    for (const name of ['trail.', 'trail ', 'lpt1.dat']) {
      const file = `${winePath(folder)}\\${name}`
      const write = await run(['write', '--server', listener.server, '--file', file, '--method', 'fsync', '--duration', '0.3'])
      if (write.code === 0) {
        const verify = await run(['verify', '--server', listener.server, '--file', file])
        t.equal(verify.code, 0, `${JSON.stringify(name)}: written and verified where announced: ${verify.stdout}${verify.stderr}`)
      } else {
        t.equal(
          write.code,
          2,
          `${JSON.stringify(name)}: a usage error, not a runtime failure after the announcement (${write.stderr.trim()})`,
        )
        t.equal(write.stdout, '', `${JSON.stringify(name)}: nothing announced`)
      }
    }
  })

  t.test('write --file NUL, CON, COM1, nul.txt: refused as a device (exit 2), not EBADF exit 3', async (t) => {
    const folder = join(dir, 'specials')
    mkdirSync(folder)
    for (const name of ['NUL', 'CON', 'COM1', 'nul.txt']) {
      const write = await run([
        'write',
        '--server',
        listener.server,
        '--file',
        `${winePath(folder)}\\${name}`,
        '--method',
        'fsync',
        '--duration',
        '0.3',
      ])
      t.equal(write.code, 2, `${name}: exit 2 (${write.stderr.trim()})`)
      t.match(write.stderr, /device|reserved/i, `${name}: the message says it is a device name`)
      t.equal(write.stdout, '', `${name}: nothing announced`)
    }
  })

  t.test('bench --file NUL: refused as a device (exit 2), not a failed FlushFileBuffers', async (t) => {
    const folder = join(dir, 'bench-specials')
    mkdirSync(folder)
    const bench = await run(['bench', '--secs', '0.1', '--file', `${winePath(folder)}\\NUL`])
    t.equal(bench.code, 2, bench.stderr)
    t.notMatch(bench.stderr, /FlushFileBuffers failed/)
  })

  t.test('the verify command printed on Windows pastes back into PowerShell unchanged', async (t) => {
    const folder = join(dir, 'cost$HOME')
    mkdirSync(folder)
    const file = join(folder, '%PATH%')
    const write = await run(['write', '--server', listener.server, '--file', winePath(file), '--method', 'fsync', '--duration', '0.3'])
    t.equal(write.code, 0, write.stderr)
    const line = write.stdout.split('\n').find((l) => l.startsWith('after a power cut and reboot: '))!
    // PowerShell expands $HOME inside double quotes, never inside single quotes. (cmd.exe expands
    // %PATH% inside any quotes: the command is written for PowerShell, as the README says.)
    t.notMatch(line, /"[^"]*\$HOME[^"]*"/, `no $HOME for PowerShell to expand inside double quotes: ${line}`)
    t.ok(
      line.endsWith(` --file '${winePath(file).replaceAll('\\', '/')}'`),
      `the path (forward slashes) in single quotes, literal for PowerShell: ${line}`,
    )
  })
})
