/**
 * A files run (`--pattern files`) on storage that cannot return what it acknowledged: a real ext4
 * whose device answers EIO for one record file's data, for the inode-table block holding record
 * files' inodes, or for the run directory's own block. verify must judge what it cannot read back as
 * lost and unreadable (FAIL, exit 1), judge everything else as usual, and never stop with exit 3. The
 * same image served without bad sectors passes. The run's directory is made by hand from
 * record/files-layout.ts on the image; its acks come from a stand-in listener on 127.0.0.1.
 */
import t from 'tap'
import { statSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, tempDir } from '../fixtures/cli.js'
import { craftFilesMeta, craftRun, listenerWith, range, writeFilesRun } from '../fixtures/crafted-run.js'
import { labUnavailableReason } from '../fixtures/lab/harness.js'
import { fileExtents, inodeTableBlock, serveImage, sh, smallExt4Image } from '../fixtures/lab/bad-sectors.js'

const keep = 10
const acked = 25
const recordSizeBytes = 4096

const reason = labUnavailableReason()
if (reason !== null) {
  t.fail(
    `the unreadable files-run tests cannot run here: ${reason}\nhint: run the suite as root on Linux with /dev/fuse and nbdkit, libnbd-bin, e2fsprogs (.ci/run installs them)`,
  )
} else {
  const dir = tempDir(t, 'plugcheck-lab-files-unreadable-')
  const { image, mountPoint } = smallExt4Image(dir)

  const runDir = join(mountPoint, 'run')
  const meta = craftFilesMeta('fe00000000000001', runDir, keep, { recordSizeBytes })
  const server = await listenerWith(t, [craftRun(meta, acked)])

  // The run's directory on the image, mounted read-write through a loop device; where its bytes lie.
  sh('mount', ['-o', 'loop', image, mountPoint])
  let mounted = true
  t.teardown(() => {
    if (mounted) sh('umount', [mountPoint])
  })
  writeFilesRun(meta, range(acked - keep + 1, acked))
  // This file system only (syncfs): a global sync waits on every other lab disk on the machine, a cut one forever.
  sh('sync', ['-f', runDir])
  const recordSectors = fileExtents(sh('filefrag', ['-v', '-b512', join(runDir, 'rec-20')]))
  const inodeOf = (name: string): number => statSync(join(runDir, name)).ino
  const names = ['superblock', ...range(acked - keep + 1, acked).map((s) => `rec-${s}`)]
  const blockOfInode = new Map(names.map((name) => [name, inodeTableBlock(sh('debugfs', ['-R', `imap <${inodeOf(name)}>`, image]))]))
  const dirSectors = fileExtents(sh('filefrag', ['-v', '-b512', runDir]))
  sh('umount', [mountPoint])
  mounted = false

  const verify = async (badSectors: [number, number][]) => {
    const disk = await serveImage(t, dir, image, mountPoint, badSectors)
    try {
      const json = await runCli(['verify', '--server', server, '--file', runDir, '--json'], 30_000)
      const words = await runCli(['verify', '--server', server, '--file', runDir], 30_000)
      return { code: json.code, json: json.stdout === '' ? null : JSON.parse(json.stdout), stderr: json.stderr, text: words.stdout }
    } finally {
      await disk.stop()
    }
  }

  t.test('the image served without bad sectors: pass', async (t) => {
    const { code, json, stderr } = await verify([])
    t.equal(code, 0, `exit 0 (stderr: ${stderr})`)
    t.match(json.runs[0], { verdict: 'pass', intact: keep, lost: 0, unreadable: 0, superseded: acked - keep })
  })

  t.test("one record file's data answers EIO: it alone lost and unreadable, FAIL exit 1", async (t) => {
    const first = recordSectors[0]!
    const { code, json, stderr, text } = await verify([[first.physical, first.length]])
    t.equal(code, 1, `exit 1 (stderr: ${stderr})`)
    const run = json.runs[0]
    t.match(run, { verdict: 'fail', lost: 1, unreadable: 1, intact: keep - 1, torn: 0, corrupt: 0 })
    t.match(run.unreadableRecords, [{ seq: 20, detail: /^the storage could not read it back: EIO \(/ }])
    t.match(run.lostRanges, [{ fromSeq: 20, toSeq: 20, reason: /EIO/ }])
    t.match(
      text,
      /FAIL: 1 of 25 acknowledged records .* did not survive: 1 lost \(1 of them unreadable: the storage would not return them\)/,
    )
  })

  t.test('the inode-table block of some record files answers EIO: those lost and unreadable, the rest judged', async (t) => {
    const block = blockOfInode.get('rec-22')!
    const hit = names.filter((name) => blockOfInode.get(name) === block)
    const hitSeqs = hit.filter((name) => name.startsWith('rec-')).map((name) => Number(name.slice(4)))
    const { code, json, stderr } = await verify([[block * 2, 2]])
    t.equal(code, 1, `exit 1 (stderr: ${stderr})`)
    const run = json.runs[0]
    t.match(run, { verdict: 'fail', lost: hitSeqs.length, unreadable: hitSeqs.length, intact: keep - hitSeqs.length })
    t.same(
      run.unreadableRecords.map((r: { seq: number }) => r.seq),
      hitSeqs,
      `the record files whose inodes share the bad block (${hit.join(', ')})`,
    )
    if (hit.includes('superblock')) t.equal(run.superblock.kind, 'unreadable')
  })

  t.test("the run directory's own block answers EIO: nothing listed, every kept record lost and unreadable, FAIL exit 1", async (t) => {
    const first = dirSectors[0]!
    const { code, json, stderr, text } = await verify([[first.physical, first.length]])
    t.equal(code, 1, `exit 1 (stderr: ${stderr})`)
    const run = json.runs[0]
    t.match(run, { verdict: 'fail', intact: 0, lost: keep, unreadable: keep, superblock: { kind: 'unreadable' } })
    t.match(text, /EIO/)
  })
}
