/**
 * `write --direct=yes` (or `--direct=1`, `--direct=on`, `--direct=TRUE`) runs with buffered I/O and
 * exits 0: yargs reads any value of a yes/no flag other than `true` as false, and the strict flags
 * let `--flag=value` of a boolean through unchecked. The user asked for O_DIRECT and the power cut
 * tests page-cache writes instead, with nothing said. README: a flag is refused rather than run with
 * something other than what was given (exit 2). Must: a yes/no flag given a value other than
 * true/false is refused, exit 2, naming the flag, before any run is announced.
 */
import t from 'tap'
import { join } from 'node:path'
import { runCli, startListener, tempDir } from '../fixtures/cli.js'

t.test('write --direct=VALUE other than true/false is refused, never a buffered run', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'acks'))
  t.teardown(() => listener.kill())
  for (const value of ['yes', '1', 'on', 'TRUE']) {
    const file = join(dir, `data-${value}.dat`)
    const r = await runCli(
      ['write', '--server', listener.server, '--file', file, '--duration', '0.3', '--record-size', '4096', `--direct=${value}`],
      30_000,
    )
    t.equal(r.code, 2, `--direct=${value}: refused with exit 2 (stderr: ${r.stderr.split('\n')[0]})`)
    t.match(r.stderr, /--direct/, `--direct=${value}: the message names --direct`)
    t.notMatch(r.stdout + r.stderr, /announced: run|^run [0-9a-f]{16}: /m, `--direct=${value}: no run announced`)
  }
})
