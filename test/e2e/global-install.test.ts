/**
 * The install story of the README, as a user runs it: `npm pack` in a checkout, then
 * `npm install -g` of that tarball into a fresh prefix, then `plugcheck` from PATH in an empty
 * directory, with neither the checkout nor a compiler within reach: --version (package.json's),
 * --help, and listen + write + verify over 127.0.0.1 to a pass.
 *
 * The pack runs in a copy of what it needs (package.json, README.md, bin/, src/, scripts/), with no
 * dist/: its "prepare" script must build dist/, and the checkout's own dist/ is never rebuilt under
 * the other tests' running CLIs. The install uses npm's cache first (--prefer-offline): npm ci
 * caches every tarball, but npm's install asks for each dependency's full registry document, which
 * npm ci does not cache, so the first run on a machine fetches those documents (about 30) once; every
 * later run, and `--offline`, is served from the cache.
 */
import { spawn } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, realpathSync, symlinkSync } from 'node:fs'
import { delimiter, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { exitedWithOutput, tempDir } from '../fixtures/cli.js'

const repoRoot = fileURLToPath(new URL('../../', import.meta.url))
const packageJson = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string; files: string[] }

/** What `npm pack` reads in a checkout: the `files` of package.json, and what "prepare" builds dist/ from. */
const packInputs = ['package.json', 'README.md', 'bin', 'src', 'scripts']

/** An npm child may wait on the registry (the first run on a machine); a plugcheck child is quick. */
const npmTimeoutMs = 180_000
const plugcheckTimeoutMs = 60_000

interface ChildResult {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** The environment without the npm_* variables `npm test` exports (its package, its prefix), npm's cache and registry kept. */
function cleanEnv(extra: Record<string, string> = {}): Record<string, string> {
  const kept = new Set(['npm_config_cache', 'npm_config_registry', 'npm_config_userconfig'])
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(process.env))
    if (value !== undefined && (!name.toLowerCase().startsWith('npm_') || kept.has(name.toLowerCase()))) env[name] = value
  return { ...env, ...extra }
}

function run(command: string, args: readonly string[], cwd: string, env: Record<string, string>, timeoutMs: number): Promise<ChildResult> {
  const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
  return new Promise((resolve) => {
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })
}

/** `plugcheck listen` from PATH on 127.0.0.1, a free port; resolves once it says where it listens. */
async function startListen(env: Record<string, string>, cwd: string, dir: string): Promise<{ server: string; stop(): Promise<void> }> {
  const child = spawn('plugcheck', ['listen', '--host', '127.0.0.1', '--port', '0', '--dir', dir], {
    cwd,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  // Once its last stderr lines are read: a refusal to start is reported with them.
  const exited = exitedWithOutput(child)
  const port = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`listen did not start within ${plugcheckTimeoutMs / 1000} s: ${stderr}`))
    }, plugcheckTimeoutMs)
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString()
      const match = /listening on 127\.0\.0\.1:(\d+)/.exec(stdout)
      if (match !== null) {
        clearTimeout(timer)
        resolve(match[1]!)
      }
    })
    child.once('exit', () => clearTimeout(timer))
    void exited.then(({ code }) => reject(new Error(`listen exited (${code}): ${stderr}`)))
  })
  return {
    server: `127.0.0.1:${port}`,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
      await exited
    },
  }
}

t.test('npm pack, npm install -g into a fresh prefix, plugcheck from PATH in an empty directory', async (t) => {
  const dir = tempDir(t, 'plugcheck-install-')
  const checkout = join(dir, 'checkout')
  mkdirSync(checkout)
  for (const input of packInputs) cpSync(join(repoRoot, input), join(checkout, input), { recursive: true })
  symlinkSync(realpathSync(join(repoRoot, 'node_modules')), join(checkout, 'node_modules'))
  const out = join(dir, 'out')
  mkdirSync(out)

  const pack = await run('npm', ['pack', '--json', '--pack-destination', out], checkout, cleanEnv(), npmTimeoutMs)
  t.equal(pack.code, 0, 'npm pack', { stderr: pack.stderr })
  const [packed] = JSON.parse(pack.stdout.slice(pack.stdout.indexOf('['))) as Array<{ filename: string; files: Array<{ path: string }> }>
  const packedFiles = packed!.files.map((file) => file.path)
  t.ok(packedFiles.includes('dist/bin.js'), 'prepare built dist/, and the tarball holds it')
  t.ok(packedFiles.includes('bin/plugcheck.js'))
  t.ok(
    packedFiles.some((path) => path.startsWith('dist/chunks/')),
    "the commands' chunks are packed",
  )
  t.same(
    packedFiles.filter((path) => path.startsWith('src/') || path.startsWith('test/') || path.startsWith('node_modules/')),
    [],
    'no sources, tests or dependencies in the tarball',
  )

  const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8')
  t.ok(
    readme.includes(`npm install -g ./${packed!.filename}`),
    `the README's Install names the tarball npm pack writes, ${packed!.filename}`,
  )

  const prefix = join(dir, 'prefix')
  const install = await run(
    'npm',
    ['install', '-g', '--prefix', prefix, join(out, packed!.filename), '--prefer-offline', '--no-audit', '--no-fund'],
    out,
    cleanEnv(),
    npmTimeoutMs,
  )
  // Where npm's cache lacks a dependency's registry document (the first run after npm ci), npm fetches it.
  t.equal(install.code, 0, 'npm install -g (its first run on a machine needs the npm registry once)', { stderr: install.stderr })
  const installed = join(prefix, 'lib', 'node_modules', 'plugcheck')
  t.notOk(existsSync(join(installed, 'src')), 'the install has no sources to fall back on')
  t.notOk(existsSync(join(installed, 'node_modules', 'tsx')), 'nor a compiler: dev dependencies stay out')

  // Only node and the prefix on PATH, run from a directory outside the checkout.
  const cwd = join(dir, 'empty')
  mkdirSync(cwd)
  const env = cleanEnv({ PATH: [join(prefix, 'bin'), dirname(process.execPath)].join(delimiter) })

  const version = await run('plugcheck', ['--version'], cwd, env, plugcheckTimeoutMs)
  t.equal(version.code, 0, version.stderr)
  t.equal(version.stdout.trim(), packageJson.version, "--version is package.json's")

  const help = await run('plugcheck', ['--help'], cwd, env, plugcheckTimeoutMs)
  t.equal(help.code, 0, help.stderr)
  t.match(help.stdout, /plugcheck write/)
  t.equal(help.stderr, '', 'no word about tsx or a missing build')

  const listener = await startListen(env, cwd, join(dir, 'listener'))
  t.teardown(() => listener.stop())
  const file = join(dir, 'data', 'plugcheck.dat')
  mkdirSync(dirname(file))
  const write = await run(
    'plugcheck',
    ['write', '--server', listener.server, '--file', file, '--method', 'fdatasync', '--size', '16MiB', '--duration', '2s'],
    cwd,
    env,
    plugcheckTimeoutMs,
  )
  t.equal(write.code, 0, write.stderr)
  const verify = await run('plugcheck', ['verify', '--server', listener.server, '--file', file, '--json'], cwd, env, plugcheckTimeoutMs)
  t.equal(verify.code, 0, verify.stderr)
  const report = JSON.parse(verify.stdout) as {
    verdict: string
    runs: Array<{ verdict: string; acked: number; intact: number; superseded: number; lost: number; torn: number; corrupt: number }>
  }
  t.equal(report.verdict, 'pass')
  t.equal(report.runs.length, 1)
  t.equal(report.runs[0]!.verdict, 'pass')
  t.ok(report.runs[0]!.acked > 0, 'the writer acknowledged records')
  // 16 MiB holds 2,047 records: a fast disk wraps around, and an acknowledged record overwritten by a
  // later one of the same run is superseded, not lost.
  const judged = report.runs[0]!
  t.same(
    { lost: judged.lost, torn: judged.torn, corrupt: judged.corrupt },
    { lost: 0, torn: 0, corrupt: 0 },
    'nothing lost, torn or corrupt',
  )
  t.equal(judged.intact + judged.superseded, judged.acked, 'every acknowledged record is intact or superseded by a later one')
  t.same(readdirSync(cwd), [], 'nothing written into the working directory')
})
