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
// Installed before the command line's modules load, so nothing they print can beat it. The first
// stdout error is kept: a command whose output is its product exits 3 for it (cli/stdout-failure.ts).
let stdoutError: unknown
process.stdout.on('error', (error) => {
  stdoutError ??= error
})
process.stderr.on('error', () => {})

const args = process.argv.slice(2)
let code: number
let afterStdout = (_error: unknown): { code: number; message?: string } => ({ code })
try {
  const { main, reportError, processIo } = await import('./cli/cli.js')
  const { stdoutFailure } = await import('./cli/stdout-failure.js')
  afterStdout = (error) => stdoutFailure(args, error, code)
  try {
    code = await main(args)
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
// The only process.exit: after stdout has drained, with what became of it. Nothing queued, nothing
// is written: /dev/full refuses even an empty write, which would blame a command that printed nothing.
const exit = (error?: Error | null): void => {
  const after = afterStdout(stdoutError ?? process.stdout.errored ?? error ?? undefined)
  if (after.message === undefined) process.exit(after.code)
  process.stderr.write(after.message, () => process.exit(after.code))
}
if (process.stdout.writableLength === 0) exit()
else process.stdout.write('', exit)
