/**
 * The linux-x64 single executable (npm run build:exe) on a machine without node on PATH: demo in an
 * empty directory, its first start unpacking into a fresh cache, damaged cache files rewritten
 * before anything loads them, several executables unpacking at once, a cache it cannot write, and
 * cache directories that may hold a user's data (a symbolic link, a file) refused without a write.
 */
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { lstatSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { startListener, tempDir } from '../fixtures/cli.js'
import { builtExe, ensureLinuxX64 } from '../fixtures/exe.js'

interface ExeResult {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const exeTimeoutMs = 120_000

/** The executable with only PATH (no node on it), HOME and XDG_CACHE_HOME in its environment. */
function runExe(
  exe: string,
  args: readonly string[],
  options: { cwd: string; cache: string; env?: Record<string, string> },
): Promise<ExeResult> {
  const env = { PATH: '/nonexistent', HOME: options.cwd, XDG_CACHE_HOME: options.cache, ...options.env }
  const child = spawn(exe, args, { cwd: options.cwd, env, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const timer = setTimeout(() => child.kill('SIGKILL'), exeTimeoutMs)
  return new Promise((resolve) => {
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })
}

/** The one unpacked directory under cache (its name is the manifest's hash). */
function unpackedDir(cache: string): string {
  const entries = readdirSync(join(cache, 'plugcheck'))
  if (entries.length !== 1) throw new Error(`expected one unpacked directory, found ${entries.join(', ')}`)
  return join(cache, 'plugcheck', entries[0]!)
}

function sha256(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex')
}

t.test('the linux-x64 single executable', async (t) => {
  ensureLinuxX64()
  const exe = await builtExe('linux-x64')
  const dir = tempDir(t, 'plugcheck-exe-')

  t.test('demo in an empty directory, node not on PATH: unpacks into the cache and passes', async (t) => {
    const cwd = join(dir, 'demo')
    const cache = join(dir, 'demo-cache')
    mkdirSync(cwd)
    // Its verify checks records on two threads, as on a file of several reads (scan-worker.mjs).
    const result = await runExe(exe, ['demo', '--kill-after', '2'], { cwd, cache, env: { PLUGCHECK_VERIFY_THREADS: '2' } })
    t.equal(result.code, 0, result.stderr)
    t.match(result.stdout, /PASS: all [\d,]+ acknowledged records/)
    t.same(readdirSync(cwd), [], 'nothing is left in the working directory')
    t.same(readdirSync(unpackedDir(cache)).sort(), [
      'job-worker.mjs',
      'koffi.node',
      'msgpackr-extract.node',
      'plugcheck.mjs',
      'scan-worker.mjs',
      'xxhash.node',
    ])
    const again = await runExe(exe, ['methods', '--json'], { cwd, cache })
    t.equal(again.code, 0, again.stderr)
    t.equal(again.stderr, '', 'a later start says nothing about unpacking')
    t.equal(JSON.parse(again.stdout).platform, 'linux')
    // The version is in the executable: no package.json beside it or in the empty directory.
    const version = await runExe(exe, ['--version'], { cwd, cache })
    t.equal(version.code, 0, version.stderr)
    t.equal(
      version.stdout.trim(),
      (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version,
    )
  })

  t.test('write --jobs 2 starts its threads from job-worker.mjs beside the bundle; verify judges both runs', async (t) => {
    const cwd = join(dir, 'jobs')
    mkdirSync(cwd)
    const listener = await startListener(join(dir, 'jobs-listener'))
    t.teardown(() => listener.kill())
    const file = join(cwd, 'data')
    const cache = join(dir, 'demo-cache')
    const written = await runExe(
      exe,
      ['write', '--server', listener.server, '--file', file, '--size', '4MiB', '--jobs', '2', '--duration', '2'],
      { cwd, cache },
    )
    t.equal(written.code, 0, written.stderr)
    t.equal(written.stdout.match(/^run [0-9a-f]{16}: fdatasync, append, 8 KiB records/gm)?.length, 2, written.stdout)
    const verified = await runExe(exe, ['verify', '--server', listener.server, '--file', file, '--json'], { cwd, cache })
    t.equal(verified.code, 0, verified.stdout + verified.stderr)
    const report = JSON.parse(verified.stdout) as { runs: Array<{ path: string; acked: number; lost: number }> }
    t.same(
      report.runs.map((r) => r.path),
      [`${file}.job1`, `${file}.job2`],
    )
    t.ok(
      report.runs.every((r) => r.acked > 0 && r.lost === 0),
      'both jobs acked records, none lost',
    )
  })

  t.test('damaged cache files are rewritten before anything loads them', async (t) => {
    const cwd = join(dir, 'damage')
    const cache = join(dir, 'damage-cache')
    mkdirSync(cwd)
    t.equal((await runExe(exe, ['methods'], { cwd, cache })).code, 0)
    const unpacked = unpackedDir(cache)
    const koffi = join(unpacked, 'koffi.node')
    const good = { koffi: sha256(koffi), bundle: sha256(join(unpacked, 'plugcheck.mjs')) }
    // Either one, loaded, would end the run: a koffi.node that is no ELF file, a bundle that exits 97.
    const bytes = readFileSync(koffi)
    bytes[1] = bytes[1]! ^ 0xff
    writeFileSync(koffi, bytes)
    writeFileSync(join(unpacked, 'plugcheck.mjs'), 'process.exit(97)\n')
    const result = await runExe(exe, ['methods', '--json'], { cwd, cache })
    t.equal(result.code, 0, result.stderr)
    t.match(
      result.stderr,
      /^plugcheck: the unpacked files in .* did not match this executable \(plugcheck\.mjs, koffi\.node\); unpacking them again\n$/,
    )
    t.equal(JSON.parse(result.stdout).platform, 'linux')
    t.equal(sha256(koffi), good.koffi)
    t.equal(sha256(join(unpacked, 'plugcheck.mjs')), good.bundle)
  })

  t.test('four executables starting at once on an empty cache, then on a damaged one', async (t) => {
    const cwd = join(dir, 'race')
    const cache = join(dir, 'race-cache')
    mkdirSync(cwd)
    const together = () => Promise.all(Array.from({ length: 4 }, () => runExe(exe, ['methods', '--json'], { cwd, cache })))
    for (const result of await together()) {
      t.equal(result.code, 0, result.stderr)
      t.equal(JSON.parse(result.stdout).platform, 'linux')
    }
    const unpacked = unpackedDir(cache)
    t.same(readdirSync(join(cache, 'plugcheck')), [unpacked.split('/').pop()], 'no staging directory is left')
    writeFileSync(join(unpacked, 'koffi.node'), 'damaged')
    for (const result of await together()) t.equal(result.code, 0, result.stderr)
    t.same(
      readdirSync(unpacked).filter((name) => name.startsWith('.')),
      [],
      'no temporary file is left',
    )
  })

  t.test('a cache it cannot create: exit 3 with one line and a hint', async (t) => {
    const cwd = join(dir, 'nocache')
    mkdirSync(cwd)
    const notADirectory = join(dir, 'a-file')
    writeFileSync(notADirectory, '')
    const result = await runExe(exe, ['methods'], { cwd, cache: notADirectory })
    t.equal(result.code, 3)
    t.match(
      result.stderr,
      /^plugcheck: could not unpack its native modules under .*a-file\/plugcheck: ENOTDIR \(not a directory\)\nhint: set XDG_CACHE_HOME to a writable directory\n$/,
    )
  })

  t.test(
    "a symbolic link at the cache's <hash> directory: exit 3, the linked directory untouched; a linked file is replaced",
    async (t) => {
      const cwd = join(dir, 'linked')
      const cache = join(dir, 'linked-cache')
      const user = join(dir, 'linked-user')
      mkdirSync(cwd)
      mkdirSync(user)
      t.equal((await runExe(exe, ['methods'], { cwd, cache })).code, 0)
      const unpacked = unpackedDir(cache)
      for (const name of readdirSync(unpacked)) writeFileSync(join(user, name), `the user's own ${name}\n`)
      const before = readdirSync(user).map((name) => readFileSync(join(user, name), 'utf8'))
      rmSync(unpacked, { recursive: true })
      symlinkSync(user, unpacked)
      const result = await runExe(exe, ['methods'], { cwd, cache })
      t.equal(result.code, 3)
      t.equal(
        result.stderr,
        `plugcheck: the cache directory ${unpacked} is a symbolic link: plugcheck writes only into a directory of its own\nhint: remove ${unpacked} (plugcheck makes it again)\n`,
      )
      t.same(
        readdirSync(user).map((name) => readFileSync(join(user, name), 'utf8')),
        before,
        "the user's files are byte-identical",
      )

      rmSync(unpacked)
      t.equal((await runExe(exe, ['methods'], { cwd, cache })).code, 0)
      rmSync(join(unpacked, 'koffi.node'))
      symlinkSync(join(user, 'koffi.node'), join(unpacked, 'koffi.node'))
      const relinked = await runExe(exe, ['methods', '--json'], { cwd, cache })
      t.equal(relinked.code, 0, relinked.stderr)
      t.match(relinked.stderr, /\(koffi\.node\); unpacking them again\n$/)
      t.ok(lstatSync(join(unpacked, 'koffi.node')).isFile(), 'the link is replaced by a regular file')
      t.same(
        readdirSync(user).map((name) => readFileSync(join(user, name), 'utf8')),
        before,
        "the user's files are byte-identical",
      )
    },
  )

  t.test('a cache root that is a file: exit 3, one line naming it, the file untouched', async (t) => {
    const cwd = join(dir, 'rootfile')
    const cache = join(dir, 'rootfile-cache')
    mkdirSync(cache, { recursive: true })
    mkdirSync(cwd)
    writeFileSync(join(cache, 'plugcheck'), 'a file')
    const result = await runExe(exe, ['methods'], { cwd, cache })
    t.equal(result.code, 3)
    const root = join(cache, 'plugcheck')
    t.equal(
      result.stderr,
      `plugcheck: the cache directory ${root} is not a directory: plugcheck writes only into a directory of its own\nhint: remove ${root} (plugcheck makes it again)\n`,
    )
    t.equal(readFileSync(root, 'utf8'), 'a file')
  })

  t.test('agent --print-service names the executable alone, without a script', async (t) => {
    const cwd = join(dir, 'agent')
    mkdirSync(cwd)
    const result = await runExe(exe, ['agent', '--server', '127.0.0.1:5400', '--file', join(cwd, 'data'), '--print-service', 'systemd'], {
      cwd,
      cache: join(dir, 'demo-cache'),
    })
    t.equal(result.code, 0, result.stderr)
    t.match(result.stdout, `\nExecStart=${exe} agent --server 127.0.0.1:5400 --file ${join(cwd, 'data')}\n`)
  })
})
