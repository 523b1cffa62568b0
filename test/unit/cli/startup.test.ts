/**
 * Start-up: `--help` and `--version` load yargs and a few constants, never the native layer (koffi),
 * zod or msgpackr, and every command's help still works. Which modules load is read from a resolve
 * hook (test/fixtures/module-log.mjs) in the real command, spawned through bin/plugcheck.js; `methods`
 * is the positive control that the hook sees koffi when it does load. Speed is measured in
 * bench/startup.ts, not here.
 */
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { binPath, tempDir } from '../../fixtures/cli.js'

const moduleLogHook = fileURLToPath(new URL('../../fixtures/module-log.mjs', import.meta.url))

interface Traced {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
  /** Every module URL the process resolved. */
  readonly modules: readonly string[]
}

async function traced(dir: string, args: readonly string[]): Promise<Traced> {
  const logFile = join(dir, `modules-${args.join('-')}.txt`)
  const env = { ...process.env, PLUGCHECK_MODULE_LOG: logFile }
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', moduleLogHook, binPath, ...args], { env, timeout: 60_000 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1
      let modules: string[] = []
      try {
        modules = readFileSync(logFile, 'utf8').split('\n').filter(Boolean)
      } catch {
        // no module resolved through the hook: the assertions below say so
      }
      resolve({ code, stdout, stderr, modules })
    })
  })
}

const packageOf = (url: string): string | null => /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.[1] ?? null
const packagesOf = (modules: readonly string[]): Set<string> => new Set(modules.map(packageOf).filter((p) => p !== null))

const heavyPackages = ['koffi', 'zod', 'msgpackr', '@node-rs/xxhash', 'xxhash-wasm']

t.test('--help and --version run no command and load neither koffi, zod nor msgpackr', async (t) => {
  const dir = tempDir(t)
  for (const args of [['--help'], ['--version'], ['write', '--help'], ['methods', '--version']]) {
    const run = await traced(dir, args)
    t.equal(run.code, 0, `${args.join(' ')} exits 0: ${run.stderr}`)
    if (args.at(-1) === '--version')
      t.match(run.stdout, /^\d+\.\d+\.\d+\S*\n$/, `${args.join(' ')} prints the version alone: no command runs`)
    const packages = packagesOf(run.modules)
    // yargs is bundled into dist/ (only the sources load it as a package): the hook's control is the entry point.
    t.ok(
      run.modules.some((url) => /\/(dist\/bin\.js|src\/bin\.ts)$/.test(url)),
      `${args.join(' ')}: the hook sees the modules loaded`,
    )
    for (const heavy of heavyPackages) t.notOk(packages.has(heavy), `${args.join(' ')} does not load ${heavy}`)
  }
})

t.test('methods loads the native layer (the hook sees koffi when it loads), not the codecs', async (t) => {
  const run = await traced(tempDir(t), ['methods'])
  t.equal(run.code, 0, run.stderr)
  t.match(run.stdout, /fdatasync/)
  const packages = packagesOf(run.modules)
  t.ok(packages.has('koffi'))
  // The flag schemas need zod alone: run ids and campaign names live apart from the record and wire codecs.
  for (const codec of ['msgpackr', '@node-rs/xxhash', 'xxhash-wasm']) t.notOk(packages.has(codec), `methods does not load ${codec}`)
})

t.test("every command's --help prints its own usage", async (t) => {
  const dir = tempDir(t)
  const commands = ['listen', 'write', 'agent', 'verify', 'demo', 'bench', 'runs', 'report', 'methods']
  const runs = await Promise.all(commands.map((command) => traced(dir, [command, '--help'])))
  commands.forEach((command, i) => {
    const run = runs[i]!
    t.equal(run.code, 0, `${command} --help exits 0: ${run.stderr}`)
    t.match(run.stdout, new RegExp(`^plugcheck ${command}\\b`, 'm'), `${command} --help shows its usage`)
    t.match(run.stdout, /--help/, `${command} --help lists the options`)
    t.notOk(packagesOf(run.modules).has('koffi'), `${command} --help does not load koffi`)
  })
})
