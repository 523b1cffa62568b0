/**
 * Hostile review of the Windows port under Wine, second round. Each test asserts the correct
 * behaviour and fails while the defect is there.
 */
import { existsSync, mkdirSync, rmSync } from 'node:fs'
import { join, win32 } from 'node:path'
import t from 'tap'
import { startListener, tempDir, waitFor } from '../fixtures/cli.js'
import { ensureWine, runWine, winePath, wineRunTimeoutMs } from '../fixtures/wine.js'

t.test('Windows port attacks, round 2 (under Wine)', async (t) => {
  ensureWine()
  const dir = tempDir(t, 'plugcheck-win-attack2-')
  const listener = await startListener(join(dir, 'acks'))
  t.teardown(() => listener.kill())
  const run = (args: string[]) => runWine(args, { timeoutMs: wineRunTimeoutMs })

  /*
   * The Windows port opens the data file with FILE_SHARE_DELETE (FILE_SHARE_ALL), so another program
   * (Explorer, a clean-up script, an antivirus quarantine) can delete it while `write` runs; on
   * Windows 10 1809 and later DeleteFileW removes the name at once (POSIX semantics), as Wine does.
   * The writer never notices: exit 0 with a clean summary, and verify then fails the storage ("The
   * storage stack reported these writes durable (fsync returned success) and then did not keep
   * them", exit 1). Expected: write detects that its path no longer holds its file and fails
   * (exit 3, naming the path), or verify does not blame the storage.
   */
  t.test('a data file deleted while a Windows writer runs: never exit 0 followed by a storage FAIL', async (t) => {
    const folder = join(dir, 'deleted')
    mkdirSync(folder)
    const file = join(folder, 'data.dat')
    const write = run(['write', '--server', listener.server, '--file', winePath(file), '--method', 'fsync', '--duration', '4'])
    await waitFor(`${file} to exist`, () => existsSync(file), wineRunTimeoutMs)
    await new Promise((resolve) => setTimeout(resolve, 1500))
    rmSync(file)
    const written = await write
    const verify = await run(['verify', '--server', listener.server, '--file', winePath(file)])
    if (written.code === 0) {
      t.not(verify.code, 1, `write said nothing (exit 0), so verify must not blame the storage:\n${verify.stdout}`)
    } else {
      t.equal(written.code, 3, `write reports it as a runtime failure: ${written.stderr}`)
      t.match(written.stderr, 'data.dat', 'the message names the path')
    }
  })

  /*
   * On Windows the verify command is printed for PowerShell, in single quotes. PowerShell treats
   * U+2018-U+201B as single quotes too (about_Quoting_Rules), so a folder such as O’Neil (the
   * apostrophe as Word and phone keyboards type it) ends the string early; and an unquoted comma is
   * PowerShell's array operator in argument mode (about_Parsing), so --file Z:\runs\a,b.dat reaches
   * plugcheck as two arguments. The pasted command must give verify the path write used.
   */
  t.test('the printed verify command survives PowerShell: a typographic apostrophe, a comma', async (t) => {
    const psQuote = /[\u0027\u2018\u2019\u201a\u201b]/
    /** The value PowerShell passes for the token after --file (the rules these paths touch). */
    const psDoubleQuote = /[\u0022\u201c\u201d\u201e]/
    const powershellArguments = (token: string): string[] => {
      // Double quotes (the form printed for a path with a single quote in it): literal but for $, ` and
      // the double quotes, none of which such a path holds (shell-quote.ts prints the other form then).
      if (psDoubleQuote.test(token[0] ?? '')) {
        const end = [...token].findIndex((c, i) => i > 0 && psDoubleQuote.test(c))
        return end === token.length - 1 ? [token.slice(1, end)] : ['<not one argument>']
      }
      if (!psQuote.test(token[0] ?? '')) return token.split(',')
      let value = ''
      for (let i = 1; i < token.length; i += 1) {
        const c = token[i]!
        if (!psQuote.test(c)) {
          value += c
          continue
        }
        if (psQuote.test(token[i + 1] ?? '')) {
          value += c
          i += 1
          continue
        }
        return i === token.length - 1 ? [value] : [value, token.slice(i + 1)]
      }
      return ['<unterminated>']
    }
    for (const [name, leaf] of [
      ['O\u2019Neil', 'data.dat'],
      ['runs', 'a,b.dat'],
    ] as const) {
      const folder = join(dir, name)
      mkdirSync(folder)
      const file = `${winePath(folder)}\\${leaf}`
      const write = await run(['write', '--server', listener.server, '--file', file, '--method', 'fsync', '--duration', '0.3'])
      t.equal(write.code, 0, write.stderr)
      const line = write.stdout.split('\n').find((l) => l.startsWith('after a power cut and reboot: '))
      t.ok(line, 'the verify command is printed')
      const token = / --file (.*)$/.exec(line ?? '')?.[1] ?? ''
      // Printed with forward slashes (the form both shells keep); Windows reads them as the same path.
      t.same(
        powershellArguments(token).map((arg) => win32.normalize(arg)),
        [file],
        `PowerShell passes the path write used (printed: ${line})`,
      )
    }
  })
})
