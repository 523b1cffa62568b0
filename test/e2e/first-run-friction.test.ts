/**
 * A new user's first-run friction (issue 18's log): each message a command gives names what the user
 * must type next, and a refused start leaves nothing behind and prints nothing but the refusal.
 */
import { join } from 'node:path'
import t from 'tap'
import { listenOutcome, runCli, runInProcess, tempDir } from '../fixtures/cli.js'

t.test('report on an empty listener directory: the hint names every flag listen --campaign needs', async (t) => {
  const dir = t.testdir({ runs: {} })
  const none = await runInProcess(['report', '--dir', dir])
  t.equal(none.code, 2)
  const hint =
    /\nhint: .*a campaign starts with (plugcheck listen --campaign NAME --cycles N --cut-command CMD --cut-after MIN-MAX)\n$/.exec(
      none.stderr,
    )
  t.ok(hint, `the hint names --cut-after: ${none.stderr}`)
  // The hinted command, its placeholders filled in, starts a campaign rather than being refused.
  const store = join(tempDir(t), 'ld')
  const started = await listenOutcome([
    '--host',
    '127.0.0.1',
    '--port',
    '0',
    '--dir',
    store,
    '--campaign',
    'lab1',
    '--cycles',
    '3',
    '--cut-command',
    'true',
    '--cut-after',
    '30-90',
  ])
  t.equal(started.outcome, 'listening', `the hinted flags are enough: ${started.stderr}`)
})

t.test('listen --help says --cut-command and --cut-after are required with --campaign', async (t) => {
  const help = await runCli(['listen', '--help'])
  t.equal(help.code, 0)
  const flat = help.stdout.replace(/\s+/g, ' ')
  t.match(flat, /--campaign .*needs --cut-command and --cut-after/)
  t.match(flat, /--cut-command campaign \(required with --campaign\)/)
  t.match(flat, /--cut-after campaign \(required with --campaign\)/)
})
