/**
 * The win-x64 single executable run under Wine as the README says, by hand: `wine plugcheck-win-x64.exe`
 * in a fresh Wine prefix of its own, with stdout and stderr as pipes (what `| less`, `$(...)` or a
 * script gives it). A fresh prefix claims Windows 7, where Node refuses to start (exit 216); the
 * README's `wine winecfg /v win10` (or NODE_SKIP_PLATFORM_CHECK=1) is what makes it start, and then
 * --version, --help and a refusal reach the pipes whole (Node alone dies there with "open EBADF":
 * src/base/stdio-fallback.ts). A fresh prefix costs about 700 MB of disk and 10-20 s, made once here.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { repoRoot } from '../../scripts/wine.js'
import { builtExe } from '../fixtures/exe.js'
import { ensureWine, wineRunTimeoutMs } from '../fixtures/wine.js'

interface PipedResult {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** Node's own variables hold this (Linux) node's hooks, which node.exe cannot load: unset, as a user's shell has them. */
const linuxNodeVariables = ['NODE_OPTIONS', 'NODE_V8_COVERAGE', 'NODE_PATH', 'NODE_EXTRA_CA_CERTS']

/** `wine ARGS` in the prefix, stdout and stderr on pipes, killed after wineRunTimeoutMs. */
function wine(prefix: string, args: readonly string[], env: Record<string, string> = {}): Promise<PipedResult> {
  const unset = linuxNodeVariables.flatMap((name) => ['-u', name])
  const child = spawn('/usr/bin/env', [...unset, 'wine', ...args], {
    cwd: prefix,
    env: { ...process.env, WINEPREFIX: prefix, WINEDEBUG: '-all', WINEDLLOVERRIDES: 'mscoree,mshtml=', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const timer = setTimeout(() => child.kill('SIGKILL'), wineRunTimeoutMs)
  return new Promise((resolve, reject) => {
    child.on('error', reject)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })
}

/** The prefix's wineserver and everything it runs, ended (this prefix's only), so the prefix can go. */
function endPrefix(prefix: string): Promise<unknown> {
  return new Promise((resolve) => {
    const child = spawn('wineserver', ['-k'], { env: { ...process.env, WINEPREFIX: prefix }, stdio: 'ignore' })
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000)
    child.on('error', resolve)
    child.on('close', () => {
      clearTimeout(timer)
      resolve(undefined)
    })
  })
}

t.test('wine plugcheck-win-x64.exe in a fresh prefix, stdout and stderr on pipes', async (t) => {
  ensureWine()
  const exe = await builtExe('win-x64')
  const version = (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version
  const prefix = mkdtempSync(join(tmpdir(), 'plugcheck-wine-fresh-'))
  t.teardown(async () => {
    await endPrefix(prefix)
    rmSync(prefix, { recursive: true, force: true })
  })

  t.test('a fresh prefix claims Windows 7: Node refuses to start (exit 216) and names the way round', async (t) => {
    const refused = await wine(prefix, [exe, '--version'])
    t.equal(refused.code, 216, refused.stderr)
    t.equal(refused.stdout, '')
    t.match(refused.stderr, /Node\.js is only supported on Windows 8\.1/)
    t.match(refused.stderr, /NODE_SKIP_PLATFORM_CHECK/)
  })

  t.test('NODE_SKIP_PLATFORM_CHECK=1 starts it in the Windows 7 prefix', async (t) => {
    const skipped = await wine(prefix, [exe, '--version'], { NODE_SKIP_PLATFORM_CHECK: '1' })
    t.equal(skipped.code, 0, skipped.stderr)
    t.equal(skipped.stdout, `${version}\n`)
  })

  t.test('wine winecfg /v win10, then it starts as it is', async (t) => {
    const set = await wine(prefix, ['winecfg', '/v', 'win10'])
    t.equal(set.code, 0, set.stderr)

    const versionRun = await wine(prefix, [exe, '--version'])
    t.equal(versionRun.code, 0, versionRun.stderr)
    t.equal(versionRun.stdout, `${version}\n`, '--version on a pipe')
    t.notMatch(versionRun.stderr, /EBADF/)

    const help = await wine(prefix, [exe, '--help'])
    t.equal(help.code, 0, help.stderr)
    t.match(help.stdout, /^plugcheck <command> \[options\]\n/, '--help on a pipe')
    for (const command of ['listen', 'write', 'verify', 'agent', 'bench', 'methods'])
      t.match(help.stdout, new RegExp(`^ {2}plugcheck ${command}\\b`, 'm'), `--help lists ${command}`)
    t.notMatch(help.stderr, /EBADF/)

    const refused = await wine(prefix, [exe, 'wirte'])
    t.equal(refused.code, 2, 'an unknown command: exit 2')
    t.equal(refused.stdout, '')
    t.match(refused.stderr, /^plugcheck: unknown command wirte \(did you mean write\?\)\n/, 'the refusal on a stderr pipe')
  })
})
