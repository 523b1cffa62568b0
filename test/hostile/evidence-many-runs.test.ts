/**
 * Evidence (issue class 11) on a listener shared by many machines: once a run is verified (its verdict
 * stored), a `write` on its path may go on. Whether it has a verdict must be asked about that run, not
 * looked up in the list of runs (`list`), which holds only the newest maxListedRuns: with more newer
 * runs of other machines at the listener, the verified run falls off the list and write refuses it as
 * "never verified" (exit 2) for ever, although verify stored its verdict.
 */
import t from 'tap'
import { connect } from 'node:net'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { encodeFrame } from '../../src/protocol/framing.js'
import { maxListedRuns, protocolVersion } from '../../src/protocol/messages.js'
import { craftMeta } from '../fixtures/crafted-run.js'
import { runCli, sleep, startListener, tempDir, writeThenKill } from '../fixtures/cli.js'

/** Another machine's writer announcing `count` short runs on one connection, each ended at once. */
async function announceRuns(port: number, count: number): Promise<void> {
  const socket = connect(port, '127.0.0.1')
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve)
    socket.once('error', reject)
  })
  let received = 0
  socket.on('data', (c: Buffer) => (received += c.length))
  socket.write(encodeFrame({ type: 'hello', protocol: protocolVersion, role: 'writer' }))
  for (let i = 0; i < count; i++) {
    const runId = randomBytes(8).toString('hex')
    socket.write(
      encodeFrame({
        type: 'run',
        meta: craftMeta(runId, `/other/${runId}.dat`, { host: 'other-machine', groupId: runId, createdMs: Date.now() }),
      }),
    )
  }
  await sleep(1500)
  socket.end()
  await new Promise((resolve) => socket.once('close', resolve))
}

t.test('a verified run stays verified when the listener holds more newer runs than it lists', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'data.plugcheck')
  await writeThenKill(listener.server, file, ['--size', '8MiB'], 200, join(dir, 'trace'))
  const verify = await runCli(['verify', '--server', listener.server, '--file', file])
  t.ok(verify.code === 0 || verify.code === 4, `verified (exit ${verify.code}: ${verify.stderr.trim()})`)
  const listed = await runCli(['runs', '--server', listener.server])
  t.notMatch(listed.stdout, /\s-\s*$/m, 'its verdict is stored')

  // Other machines' runs, newer: more than the list holds.
  for (let sent = 0; sent <= maxListedRuns; sent += 64) await announceRuns(listener.port, 64)
  const runs = await runCli(['runs', '--server', listener.server])
  t.match(runs.stdout + runs.stderr, /other-machine/)

  const again = await runCli(['write', '--server', listener.server, '--file', file, '--size', '8MiB', '--duration', '1'])
  t.equal(again.code, 0, `write goes on: the last run of the path was verified (stderr: ${again.stderr.trim()})`)
})
