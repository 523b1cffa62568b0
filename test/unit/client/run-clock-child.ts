/**
 * Child of run-clock.test.ts, run under libfaketime: what runTimeBase does on this machine's clock,
 * printed as one JSON line. argv[2] is 'none' (an older listener, no clock sent) or the listener's
 * epoch ms.
 */
import { performance } from 'node:perf_hooks'
import { runTimeBase } from '../../../src/client/run-clock.js'
import { PlugcheckError } from '../../../src/base/errors.js'

const listenerMs = process.argv[2] === 'none' ? undefined : Number(process.argv[2])
const said: string[] = []
const localMs = Date.now()
try {
  const base = runTimeBase(listenerMs === undefined ? undefined : { epochMs: listenerMs, perfMs: performance.now() }, 'L:5400', (text) =>
    said.push(text),
  )
  console.log(JSON.stringify({ localMs, base, said }))
} catch (error) {
  if (!(error instanceof PlugcheckError)) throw error
  const e = error
  console.log(JSON.stringify({ localMs, said, error: { message: e.message, hint: e.hint, exitCode: e.exitCode } }))
}
