#!/usr/bin/env node
// Loads the TypeScript sources through tsx, so a user never runs a compiler by hand.
import { register } from 'tsx/esm/api'

register()
const { main, reportError, processIo } = await import('../src/cli.ts')
let code
try {
  code = await main(process.argv.slice(2))
} catch (error) {
  code = reportError(error, processIo)
}
// The only process.exit: after stdout has drained.
process.stdout.write('', () => process.exit(code))
