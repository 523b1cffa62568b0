/**
 * The free-space reserve judges a new run against a statfs answer of any age: the answer is refreshed
 * only when a run is announced, and that announcement is judged on the previous answer, however old.
 * After a quiet spell (no announcement for minutes or days), the first new run is taken on the free
 * space of back then, though the disk is now under the reserve: the reserve, there to keep room for
 * live runs, lets in a run it must refuse. The code says "a full disk is seen within a second".
 */
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { sleep, startListener, tempDir } from '../fixtures/cli.js'
import { Peer, runIdOf, runMeta } from '../fixtures/peer.js'

t.test('a disk that went under the reserve while no run was announced: the next new run is refused', async (t) => {
  const mnt = join(tempDir(t), 'mnt')
  mkdirSync(mnt)
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=8m', 'tmpfs', mnt])
  const listener = await startListener(join(mnt, 'acks'), ['--reserve', '1MiB'])
  t.teardown(async () => {
    await listener.kill()
    execFileSync('umount', [mnt])
  })
  const first = await Peer.announce(listener.port, runMeta(runIdOf(1)))
  t.equal(first.reply.type, 'run-ok', 'a run is taken while the disk has room')
  first.peer.close()
  // The disk fills (another program, the honest live runs): 512 KiB left, under the 1 MiB reserve.
  execFileSync('dd', ['if=/dev/zero', `of=${join(mnt, 'filler')}`, 'bs=1k', `count=${8 * 1024 - 512 - 64}`], { stdio: 'ignore' })
  // A quiet spell well past the "at most about a second" an answer is reused.
  await sleep(3000)
  const next = await Peer.announce(listener.port, runMeta(runIdOf(2)))
  next.peer.close()
  t.equal(next.reply.type, 'error', `the run is refused (got ${JSON.stringify(next.reply)})`)
  t.match(next.reply, { code: 'limit', message: /under the reserve of 1 MiB \(--reserve\)/ })
})
