/**
 * listen --token "$TOKEN" with TOKEN unset (or --token=): the listener starts and requires the empty
 * token. A client without --token is refused as "wrong or missing token" and told to pass the
 * listener's --token; a --token-file cannot hold an empty token (refused, exit 2), so the agent's
 * systemd unit, which always reads its token from a file, can never get in. Only --token '' does.
 * README: a flag that takes a value and is given none is refused. Must: listen refuses an empty
 * --token before it starts (exit 2, naming --token).
 */
import t from 'tap'
import { join } from 'node:path'
import { listenOutcome, tempDir } from '../fixtures/cli.js'

t.test('listen refuses an empty --token', async (t) => {
  const dir = tempDir(t)
  for (const tokenArgs of [['--token', ''], ['--token=']]) {
    const { outcome, stdout, stderr } = await listenOutcome([
      '--host',
      '127.0.0.1',
      '--port',
      '0',
      '--dir',
      join(dir, 'acks'),
      ...tokenArgs,
    ])
    t.equal(outcome, 2, `${tokenArgs.join(' ')}: refused (exit 2), not started (${stdout.trim()})`)
    if (outcome === 2) t.match(stderr, /--token/)
  }
})
