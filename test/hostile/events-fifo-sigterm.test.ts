/**
 * `listen --events FIFO` where nobody ever reads the FIFO (an operator's mistake, or a log reader that
 * died): the listener keeps answering (tested elsewhere), and it must also stop on SIGTERM as it says
 * it does. Today it prints "listener stopped; every ack it reported as recorded is on disk" and then
 * never exits (the open() of the FIFO waits in the threadpool for ever and keeps the process up); a
 * second SIGTERM is ignored too. A service manager waits out its stop timeout and SIGKILLs it.
 */
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { closeSync, constants, openSync } from 'node:fs'
import { join } from 'node:path'
import { exitedWithOutput, startListener, tempDir } from '../fixtures/cli.js'
import { Peer } from '../fixtures/peer.js'

t.test('a listener whose --events is a FIFO nobody reads exits on SIGTERM', async (t) => {
  const dir = tempDir(t)
  const fifo = join(dir, 'events.fifo')
  execFileSync('mkfifo', [fifo])
  const listener = await startListener(join(dir, 'acks'), ['--events', fifo])
  t.teardown(async () => {
    // Unblock the open() and make sure the child is gone whatever happened.
    const reader = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK)
    await listener.kill('SIGKILL')
    closeSync(reader)
  })
  const peer = await Peer.open(listener.port)
  peer.send({ type: 'hello', protocol: 3, role: 'verifier' })
  await peer.next('welcome')
  peer.close()
  // Once its last stderr lines are read: its stop line is matched after.
  const exited = exitedWithOutput(listener.process).then(({ code }) => code)
  listener.process.kill('SIGTERM')
  // 30 s: a loaded machine may take seconds to stop it; a listener stuck on the FIFO never exits.
  let bound: NodeJS.Timeout | undefined
  const code = await Promise.race([
    exited,
    new Promise<'still running 30 s after SIGTERM'>(
      (resolve) => (bound = setTimeout(() => resolve('still running 30 s after SIGTERM'), 30_000)),
    ),
  ])
  clearTimeout(bound)
  t.match(listener.stderr(), /listener stopped/)
  t.equal(code, 0, 'exits 0 within 30 s of SIGTERM')
})
