#!/usr/bin/env node
/**
 * The process around the command line: installs the stream handlers, runs main once, and is the only
 * place that calls process.exit. Run as dist/bin.js (compiled, `npm run build`) or through
 * bin/plugcheck.js (TypeScript loaded by tsx).
 */

import { ensureWritableStdio } from './base/stdio-fallback.js'

// Windows node under Wine cannot open a Unix pipe as stdout: written to directly instead.
ensureWritableStdio()
// A reader that went away (`| head -1`) must not end a run: output is a trail, the run is the job.
// Installed before the command line's modules load, so nothing they print can beat it.
for (const stream of [process.stdout, process.stderr]) stream.on('error', () => {})

let code: number
try {
  const { main, reportError, processIo } = await import('./cli/cli.js')
  try {
    code = await main(process.argv.slice(2))
  } catch (error) {
    code = reportError(error, processIo)
  }
} catch (error) {
  // A module that cannot load (a native build missing for this platform) is a broken installation:
  // said the way reportError says any internal error, with exit code 3 (runtime failure). A built
  // file Node cannot compile (dist/ truncated) is a damaged build: said so, with the file and a rebuild.
  const damaged =
    error instanceof SyntaxError && import.meta.url.endsWith('/bin.js')
      ? await import('./cli/damaged-build.js').then(
          ({ damagedBuildMessage }) => damagedBuildMessage(error, new URL('.', import.meta.url)),
          () => undefined,
        )
      : undefined
  process.stderr.write(damaged ?? `plugcheck: internal error: could not load its modules: ${(error as Error)?.stack ?? String(error)}\n`)
  code = 3
}
// The only process.exit: after stdout has drained.
process.stdout.write('', () => process.exit(code))
