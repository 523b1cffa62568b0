/**
 * Frames that answer nothing verify asked (listener-client.ts Conversation): a few before the answer
 * are passed over and the answer is still taken; a flood of them is refused at once, past
 * maxNonAnswerFrames, without waiting out --listener-timeout.
 */
import t from 'tap'
import { join } from 'node:path'
import { runCli, startFakeListener, tempDir } from '../fixtures/cli.js'
import { protocolVersion, type ServerMessage } from '../../src/protocol/messages.js'
import { maxNonAnswerFrames } from '../../src/client/verify/listener-client.js'

const notAnAnswer: ServerMessage = { type: 'recorded', runId: '0123456789abcdef', throughSeq: 1 }

t.test('a few frames that answer nothing, then the answer: verify takes the answer', async (t) => {
  const fake = await startFakeListener((m, reply) => {
    if (m.type === 'hello') reply({ type: 'welcome', protocol: protocolVersion, listenerId: 'fake', nowMs: Date.now() })
    if (m.type !== 'query') return
    for (let i = 0; i < maxNonAnswerFrames; i++) reply(notAnAnswer)
    reply({ type: 'runs', runs: [], claims: [] })
  })
  t.teardown(() => fake.close())
  const result = await runCli(['verify', '--server', fake.server, '--file', join(tempDir(t), 'data'), '--listener-timeout', '20'], 25_000)
  t.equal(result.code, 2, `the answer (no run) is taken: exit 2 (${result.stderr.trim()})`)
  t.match(result.stderr, /no run/i, 'says no run was found')
  t.notMatch(result.stderr, /answer nothing/, 'not refused for the frames before the answer')
})

t.test('a flood of frames that answer nothing: refused at once, naming the listener, not after the timeout', async (t) => {
  // The clock starts at verify's hello, not at its spawn: a loaded machine can take seconds to start the CLI.
  let helloAt: number | undefined
  const fake = await startFakeListener((m, reply) => {
    if (m.type === 'hello') helloAt ??= performance.now()
    if (m.type === 'hello') reply({ type: 'welcome', protocol: protocolVersion, listenerId: 'fake', nowMs: Date.now() })
    if (m.type === 'query') for (let i = 0; i <= maxNonAnswerFrames; i++) reply(notAnAnswer)
  })
  t.teardown(() => fake.close())
  const spawned = performance.now()
  // A verify that waits out the timeout takes 20 s from its hello: killed only at 60 s, it still fails the bound.
  const result = await runCli(['verify', '--server', fake.server, '--file', join(tempDir(t), 'data'), '--listener-timeout', '20'], 60_000)
  const seconds = (performance.now() - (helloAt ?? spawned)) / 1000
  t.equal(result.code, 3, `exit 3 (${result.stderr.trim()})`)
  t.match(
    result.stderr,
    new RegExp(
      `the listener at 127\\.0\\.0\\.1:\\d+ sent more than ${maxNonAnswerFrames} frames that answer nothing asked \\(the last: 'recorded'\\)`,
    ),
  )
  t.ok(seconds < 15, `refused before the 20 s timeout (${seconds.toFixed(1)} s)`)
})
