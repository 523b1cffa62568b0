/**
 * listen --port= (or --port "$PORT" with PORT unset): yargs reads the empty value as the number 0,
 * and port 0 is a valid choice (any free port), so the listener starts on a random port instead of
 * 5400, where no agent or write configured for the usual port will find it. README: a flag that
 * takes a value and is given none is refused, never run with a default. Must: exit 2 naming --port,
 * nothing listening. The same for --seed= of a campaign: taken as seed 0 (its log says "seed 0")
 * instead of refused, where leaving it out picks a random seed.
 */
import t from 'tap'
import { join } from 'node:path'
import { listenOutcome, tempDir } from '../fixtures/cli.js'

t.test('listen --port with an empty value', async (t) => {
  const dir = tempDir(t)
  for (const portArgs of [['--port='], ['--port', '']]) {
    const { outcome, stdout, stderr } = await listenOutcome(['--host', '127.0.0.1', '--dir', join(dir, 'acks'), ...portArgs])
    t.equal(outcome, 2, `${portArgs.join(' ')}: refused, not started (${stdout.trim()})`)
    if (outcome === 2) t.match(stderr, /--port/)
  }
})

t.test('listen --campaign ... --seed with an empty value', async (t) => {
  const dir = tempDir(t)
  const r = await listenOutcome([
    '--host',
    '127.0.0.1',
    '--port',
    '0',
    '--dir',
    join(dir, 'acks'),
    '--campaign',
    'c',
    '--cut-command',
    'true',
    '--cut-after',
    '1',
    '--seed=',
  ])
  t.equal(r.outcome, 2, `--seed=: refused, not started (${r.stdout.trim()})`)
  if (r.outcome === 2) t.match(r.stderr, /--seed/)
})
