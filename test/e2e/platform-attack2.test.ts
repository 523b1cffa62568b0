/**
 * Hostile review, second round, Linux side. Each test asserts the correct behaviour and fails while
 * the defect is there.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { existsSync, mkdirSync, renameSync, rmSync, truncateSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { listRuns } from '../../src/client/verify/listener-client.js'
import { shellQuote } from '../../src/client/write/writer.js'
import { parseEndpoint, type Endpoint } from '../../src/protocol/endpoint.js'
import { binPath, runInProcess, startListener, tempDir, waitFor } from '../fixtures/cli.js'

/** `plugcheck write` in the background: its exit code and output once it ends. */
function startWrite(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [binPath, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()))
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()))
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })))
}

/*
 * The writer never looks at its path again once the run is announced. When the data file is
 * deleted, truncated or replaced while `write` runs (a clean-up job, an antivirus quarantine, an
 * operator's `rm`), write still ends with exit 0 and a clean summary, and verify then blames the
 * storage: "FAIL ... The storage stack reported these writes durable (fsync returned success) and
 * then did not keep them", exit 1; after a truncation it even reports "writes were reordered across
 * a flush, the mark of a volatile cache that ignores flushes". The README promises "Verify never
 * blames the storage for what the setup did". Only the writer can see it (stat(path) against its
 * descriptor's identity and size, at its housekeeping ticks and before the summary): it should then
 * fail (exit 3, naming the path) and tell the listener, so that verify does not judge that run.
 */
t.test('a data file deleted, truncated or replaced during write: never exit 0 followed by a storage FAIL', async (t) => {
  const dir = tempDir(t, 'plugcheck-platform-attack2-')
  const listener = await startListener(join(dir, 'acks'))
  t.teardown(() => listener.kill())
  const tamper: Record<string, (file: string) => void> = {
    deleted: (file) => rmSync(file),
    truncated: (file) => truncateSync(file, 8192),
    replaced: (file) => {
      writeFileSync(`${file}.other`, "somebody else's file\n")
      renameSync(`${file}.other`, file)
    },
  }
  for (const [what, act] of Object.entries(tamper)) {
    const file = join(dir, `${what}.dat`)
    // Long enough that the tamper lands mid-run on a loaded machine too; a writer that notices it ends at once.
    const write = startWrite(['write', '--server', listener.server, '--file', file, '--method', 'fsync', '--duration', '15'])
    await waitFor(`${file} to exist`, () => existsSync(file))
    // Tampered once the listener holds acks of the run (records the storage would be blamed for losing),
    // not a fixed second in, which a loaded machine can spend before the first sync.
    for (const ackedBy = Date.now() + 60_000; Date.now() < ackedBy; ) {
      const { runs } = await listRuns(parseEndpoint(listener.server) as Endpoint, undefined, 10_000)
      if (runs.some((r) => r.path === file && r.ackedThroughSeq > 0)) break
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    act(file)
    const written = await write
    const verify = await runInProcess(['verify', '--server', listener.server, '--file', file])
    if (written.code === 0) {
      t.not(verify.code, 1, `${what}: write said nothing (exit 0), so verify must not blame the storage:\n${verify.stdout}`)
    } else {
      t.equal(written.code, 3, `${what}: write reports it as a runtime failure: ${written.stderr}`)
      t.match(written.stderr, file, `${what}: the message names the path`)
      t.equal(verify.code, 2, `${what}: verify judges nothing: ${verify.stdout}`)
      t.match(
        verify.stdout,
        /^NOT JUDGED: run [0-9a-f]{16} \(fsync\) ended because the data file .* during the run/,
        `${what}: and says why`,
      )
    }
  }
})

/*
 * PowerShell (about_Quoting_Rules) treats the typographic single quotes U+2018-U+201B exactly like
 * the ASCII quote: each ends a single-quoted string, and '' is not their only escape. shellQuote
 * doubles only the ASCII quote, so a path such as C:\Users\O’Neil\plugcheck.dat (an apostrophe as
 * Word, Outlook and phone keyboards type it, common in Windows user names) gives a command that
 * PowerShell cuts at the ’. And in PowerShell's argument mode a comma is the array operator
 * (about_Parsing): `--file C:\runs\a,b.dat` unquoted reaches plugcheck as two arguments,
 * "C:\runs\a" and "b.dat". The printed verify command must paste back into PowerShell unchanged.
 */
t.test('shellQuote for PowerShell: a typographic apostrophe and a comma paste back unchanged', async (t) => {
  const psSingleQuotes = /[\u0027\u2018\u2019\u201a\u201b]/
  /** What PowerShell makes of one argument token (the subset of its rules these paths touch). */
  const powershellArgument = (token: string): string[] => {
    if (psSingleQuotes.test(token[0] ?? '')) {
      let value = ''
      let i = 1
      for (;;) {
        if (i >= token.length) return ['<unterminated string>']
        const c = token[i]!
        if (psSingleQuotes.test(c)) {
          if (psSingleQuotes.test(token[i + 1] ?? '')) {
            value += c
            i += 2
            continue
          }
          return i === token.length - 1 ? [value] : [value, `<trailing text: ${token.slice(i + 1)}>`]
        }
        value += c
        i += 1
      }
    }
    return token.split(',')
  }
  for (const path of ['C:\\Users\\O\u2019Neil\\plugcheck.dat', 'C:\\runs\\a,b.dat', 'C:\\Users\\O\u2018x\u201b\\p.dat']) {
    const quoted = shellQuote(path, 'windows')
    t.same(powershellArgument(quoted), [path], `${path} printed as ${quoted}`)
  }
})

/*
 * With every method disabled (PLUGCHECK_DISABLE_METHODS), bench measures nothing, yet its
 * plausibility section concludes "no durable method was faster than this device can plausibly
 * flush", a finding about the device drawn from no measurement at all.
 */
t.test('bench with every method disabled draws no conclusion about the device', async (t) => {
  const dir = tempDir(t, 'plugcheck-platform-attack2-bench-')
  mkdirSync(join(dir, 'b'))
  // In this process: the registry reads PLUGCHECK_DISABLE_METHODS at each look-up.
  process.env.PLUGCHECK_DISABLE_METHODS = 'fsync,fdatasync,open_sync,open_datasync,pwritev2_dsync,none'
  const { code, stdout } = await runInProcess(['bench', '--secs', '0.1', '--file', join(dir, 'b')]).finally(
    () => void delete process.env.PLUGCHECK_DISABLE_METHODS,
  )
  t.ok(code === 0 || code === 2, `exit ${code}`)
  t.notMatch(
    stdout,
    /no durable method was faster than this device can plausibly flush/,
    `no plausibility verdict without a measured row:\n${stdout}`,
  )
})
