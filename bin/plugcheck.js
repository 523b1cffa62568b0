#!/usr/bin/env node
// Loads the TypeScript sources through tsx, so a user never runs a compiler by hand.
import { register } from 'tsx/esm/api'

register()
// A reader that went away (`| head -1`) must not end a run: output is a trail, the run is the job.
for (const stream of [process.stdout, process.stderr]) stream.on('error', () => {})
const { main, reportError, processIo } = await import('../src/cli.ts')
let code
try {
  code = await main(process.argv.slice(2))
} catch (error) {
  code = reportError(error, processIo)
}
// The only process.exit: after stdout has drained.
process.stdout.write('', () => process.exit(code))
