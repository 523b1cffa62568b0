/**
 * The bad-sector disk (fixtures/lab/bad-sectors.ts) leaves no mount behind when its nbdfuse died
 * before stop(): a FUSE daemon killed (a crash, the OOM killer) leaves its mount in place, answering
 * ENOTCONN, so "the FUSE file still exists" is no test of whether the FUSE mount is still there.
 */
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { tempDir, waitFor } from '../fixtures/cli.js'
import { labUnavailableReason } from '../fixtures/lab/harness.js'
import { serveImage, smallExt4Image } from '../fixtures/lab/bad-sectors.js'

/** The mount points under dir, from this process's mount table. */
const mountsUnder = (dir: string): string[] =>
  readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((point) => point.startsWith(`${dir}/`))

const reason = labUnavailableReason()
if (reason !== null) {
  t.fail(`the bad-sector disk's teardown cannot be tested here: ${reason}`)
} else {
  t.test('nbdfuse gone before stop(): its FUSE mount is unmounted all the same', async (t) => {
    const dir = tempDir(t, 'plugcheck-lab-bad-sectors-stop-')
    const { image, mountPoint } = smallExt4Image(dir)
    const disk = await serveImage(t, dir, image, mountPoint, [])
    t.equal(mountsUnder(dir).length, 2, 'the FUSE file and the ext4 mounted')
    const pid = Number(
      execFileSync('pgrep', ['-f', `^nbdfuse .* ${dir}/`], { encoding: 'utf8' })
        .trim()
        .split('\n')[0],
    )
    process.kill(pid, 'SIGKILL')
    await waitFor(`nbdfuse (pid ${pid}) to be gone`, () => !existsSync(`/proc/${pid}`), 10_000)
    try {
      await disk.stop()
    } catch (error) {
      t.comment(`stop() threw: ${(error as Error).message}`)
    }
    const left = mountsUnder(dir)
    t.same(left, [], 'no mount left under the test directory')
    // Whatever the fixture left, so this test leaves nothing either.
    for (const point of left.reverse()) execFileSync('umount', ['-l', point], { timeout: 20_000 })
  })
}
