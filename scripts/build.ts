/**
 * `npm run build`, and the "prepare" script `npm ci` runs: src/ compiled to dist/ for node alone, so
 * no compiler runs when plugcheck starts.
 *
 * One esbuild bundle split at every dynamic import: dist/bin.js, and under dist/chunks/ each
 * command's code, loaded when that command runs (cli.ts). yargs and zod are bundled in (one file each
 * where node would resolve and compile ~120 modules: bench/startup.ts); the packages with native
 * builds (koffi, msgpackr, @node-rs/xxhash) stay node's to resolve. The chunks sit one directory
 * below dist/ as the sources sit one below src/, so paths taken from import.meta.url (the demo's
 * bin/plugcheck.js, the --jobs worker beside jobs.ts, verify's checking threads beside scan-threads.ts) hold in both. No type check: `npm run typecheck`.
 *
 * Built in a temporary directory beside dist/ and renamed into place. dist/bin.js is stamped with the
 * time the build started: bin/plugcheck.js runs dist/ only when no file under src/ is newer, so a
 * source saved while the build ran counts as newer.
 */
import { build } from 'esbuild'
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, utimesSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const repoRoot = resolve(fileURLToPath(new URL('..', import.meta.url)))
const distDir = join(repoRoot, 'dist')

/** Packages node loads at run time: each finds its native build (or wasm) from its own directory. */
const nativePackages = ['koffi', 'msgpackr', '@node-rs/xxhash', 'xxhash-wasm']

/** package.json's version, written into the bundle (src/cli/version.ts). */
const packageVersion = (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version

export async function buildDist(): Promise<void> {
  const startedAt = new Date()
  const stageDir = mkdtempSync(join(repoRoot, '.dist-'))
  try {
    await build({
      entryPoints: {
        bin: join(repoRoot, 'src', 'bin.ts'),
        'chunks/job-worker': join(repoRoot, 'src', 'client', 'write', 'job-worker.ts'),
        'chunks/scan-worker': join(repoRoot, 'src', 'client', 'verify', 'scan-worker.ts'),
      },
      chunkNames: 'chunks/[name]-[hash]',
      outdir: stageDir,
      bundle: true,
      splitting: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      external: nativePackages,
      // Not minified, names kept: an internal error's stack names real functions and lines (some code
      // reads error.name too); minifying measured no faster start-up (bench/README.md).
      keepNames: true,
      sourcemap: 'linked',
      // The version in the bundle: a copy without package.json beside it still knows it (src/cli/version.ts).
      define: { PLUGCHECK_VERSION: JSON.stringify(packageVersion) },
      logLevel: 'warning',
    })
    utimesSync(join(stageDir, 'bin.js'), startedAt, startedAt)
    // Two renames: a plugcheck starting between them finds no dist/ and runs the sources, or says to build.
    const oldDir = `${stageDir}-old`
    if (existsSync(distDir)) renameSync(distDir, oldDir)
    renameSync(stageDir, distDir)
    rmSync(oldDir, { recursive: true, force: true })
  } finally {
    rmSync(stageDir, { recursive: true, force: true })
  }
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await buildDist()
