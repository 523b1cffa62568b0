/**
 * A run announcement does not wait behind other connections' ack backlog: with 8 writers streaming
 * acks as fast as they can (a child process), a run announced over a fresh connection gets run-ok in
 * under a second, and the writers' acks keep being recorded.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { Listener } from '../../../../src/server/listen/listener.js'
import { tempDir, waitFor } from '../../../fixtures/cli.js'
import { Peer, runIdOf, runMeta } from '../../../fixtures/peer.js'

const floodScript = fileURLToPath(new URL('../../../fixtures/ack-flood.ts', import.meta.url))

t.test('announcing a run while 8 writers stream acks takes under a second', async (t) => {
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: tempDir(t) })
  t.teardown(() => listener.close())
  let accepted = 0
  let recorded = 0
  listener.store.on('accepted', (_r, from, to) => (accepted += to - from + 1))
  listener.store.on('recorded', () => recorded++)
  const flood = spawn(process.execPath, ['--import', 'tsx', floodScript, String(listener.address().port), '8'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let floodOut = ''
  flood.stdout.on('data', (c: Buffer) => (floodOut += c.toString()))
  flood.stderr.on('data', (c: Buffer) => (floodOut += c.toString()))
  const floodExited = new Promise((resolve) => flood.on('exit', resolve))
  t.teardown(async () => {
    flood.kill('SIGKILL')
    await floodExited
  })
  await waitFor(`the flood to start (${floodOut})`, () => floodOut.includes('ready'))
  await waitFor('acks to stream', () => accepted > 100_000 && recorded > 50)

  const timesMs: number[] = []
  for (let i = 0; i < 5; i++) {
    const acceptedBefore = accepted
    const startMs = performance.now()
    const peer = await Peer.open(listener.address().port)
    peer.send({ type: 'hello', protocol: 2, role: 'writer' })
    peer.send({ type: 'run', meta: runMeta(runIdOf(0x500 + i)) })
    await peer.next('run-ok', 30_000)
    timesMs.push(performance.now() - startMs)
    peer.close()
    t.ok(accepted > acceptedBefore, `the writers kept streaming meanwhile (${accepted - acceptedBefore} acks)`)
  }
  // A listener that holds announcements behind its group commits is slow at every one; a machine loaded by
  // other work delays one or two of them: the median of five is judged.
  const median = [...timesMs].sort((a, b) => a - b)[2]!
  t.ok(
    median < 1000,
    `run-ok in ${median.toFixed(0)} ms at the median of ${timesMs.map((ms) => ms.toFixed(0)).join(', ')} ms (${accepted} acks accepted, ${recorded} group commits)`,
  )
})
