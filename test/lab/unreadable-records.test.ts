/**
 * Storage that cannot return what it acknowledged: a real ext4 whose device answers EIO for a few of
 * the data file's sectors (nbdkit's ddrescue filter marks them bad; nbdfuse and a loop device carry
 * the errors up to ext4), or for the block of the inode table that holds the file's inode. verify must
 * judge the records it cannot read back as lost (counted unreadable, the errno and the slots named,
 * FAIL, exit 1), judge every other record as usual, and judge a file that cannot be opened as lost
 * whole, never stop with exit 3. The same image served without bad sectors passes. The control's
 * (`none`) unreadable records are its own losses (the group passes); its unreadable superblock is
 * its file lost (FAIL).
 *
 * The file system is written through a loop device over the image, cleanly unmounted (nothing left to
 * replay), then served read-only through nbdkit with the bad map and mounted read-only: a fresh mount
 * has nothing of the file in its page cache, so every read reaches the device.
 */
import t from 'tap'
import { statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Listener } from '../../src/server/listen/listener.js'
import { runCli, runInProcess, tempDir } from '../fixtures/cli.js'
import { fileExtents, inodeTableBlock, serveImage, sh, smallExt4Image } from '../fixtures/lab/bad-sectors.js'
import { labUnavailableReason } from '../fixtures/lab/harness.js'

const recordSizeBytes = 4096
const sectorBytes = 512

const reason = labUnavailableReason()
if (reason !== null) {
  t.fail(
    `the unreadable-record tests cannot run here: ${reason}\nhint: run the suite as root on Linux with /dev/fuse and nbdkit, libnbd-bin, e2fsprogs (.ci/run installs them)`,
  )
} else {
  const dir = tempDir(t, 'plugcheck-lab-unreadable-')
  const { image, mountPoint } = smallExt4Image(dir)

  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: join(dir, 'listener') })
  t.teardown(() => listener.close())
  const server = `127.0.0.1:${listener.address().port}`
  const file = join(mountPoint, 'plugcheck.dat')

  // Write a run on the image, mounted read-write through a loop device, and learn where its bytes lie.
  sh('mount', ['-o', 'loop', image, mountPoint])
  let mounted = true
  t.teardown(() => {
    if (mounted) sh('umount', [mountPoint])
  })
  const write = await runCli(
    ['write', '--server', server, '--file', file, '--method', 'fdatasync', '--size', '4MiB', '--record-size', '4k', '--duration', '1'],
    30_000,
  )
  t.equal(write.code, 0, `the write ended by --duration (stderr: ${write.stderr})`)
  const extents = fileExtents(sh('filefrag', ['-v', '-b512', file]))
  const inode = statSync(file).ino
  sh('umount', [mountPoint])
  mounted = false
  const inodeBlock = inodeTableBlock(sh('debugfs', ['-R', `imap <${inode}>`, image]))

  /** The image's sectors that hold file bytes [offsetBytes, offsetBytes + lengthBytes), as [first, count] runs. */
  const deviceSectors = (offsetBytes: number, lengthBytes: number): [number, number][] => {
    const runs: [number, number][] = []
    for (let s = offsetBytes / sectorBytes; s < (offsetBytes + lengthBytes) / sectorBytes; s++) {
      const extent = extents.find((e) => s >= e.logical && s < e.logical + e.length)
      if (extent === undefined) throw new Error(`file sector ${s} is in no extent`)
      const physical = extent.physical + (s - extent.logical)
      const last = runs.at(-1)
      if (last !== undefined && last[0] + last[1] === physical) last[1]++
      else runs.push([physical, 1])
    }
    return runs
  }

  const verify = async (badSectors: [number, number][]) => {
    const disk = await serveImage(t, dir, image, mountPoint, badSectors)
    try {
      const json = await runCli(['verify', '--server', server, '--file', file, '--json'], 30_000)
      const words = await runInProcess(['verify', '--server', server, '--file', file])
      return {
        code: json.code,
        json: json.stdout === '' ? null : JSON.parse(json.stdout),
        stderr: json.stderr,
        text: words.stdout + words.stderr,
      }
    } finally {
      await disk.stop()
    }
  }

  t.test('the image served without bad sectors: pass, nothing unreadable', async (t) => {
    const { code, json, stderr } = await verify([])
    t.equal(code, 0, `exit 0 (stderr: ${stderr})`)
    t.match(json.runs[0], { verdict: 'pass', lost: 0, unreadable: 0, unreadableRecords: [] })
    t.equal(json.runs[0].intact, json.runs[0].acked - json.runs[0].superseded)
  })

  t.test('three records on sectors that answer EIO: lost as unreadable, the rest judged, FAIL exit 1', async (t) => {
    const firstSlot = 100
    const bad = deviceSectors(recordSizeBytes * (1 + firstSlot), 3 * recordSizeBytes)
    const { code, json, stderr, text } = await verify(bad)
    t.equal(code, 1, `exit 1 (stderr: ${stderr})`)
    const run = json.runs[0]
    t.match(run, { verdict: 'fail', torn: 0, corrupt: 0 })
    t.equal(run.lost, run.unreadable, 'every lost record is an unreadable one')
    // The page cache reads a file in folios, up to 64 KiB here: a folio that holds a bad sector is not
    // returned at all, so a neighbour sharing one with the bad records is as unreadable to any reader.
    const slots: number[] = run.unreadableRecords.map((r: { slot: number }) => r.slot)
    t.equal(slots.length, run.unreadable)
    for (const slot of [100, 101, 102]) t.ok(slots.includes(slot), `slot ${slot}, on the bad sectors, is unreadable`)
    t.ok(
      slots.every((slot) => slot >= 100 - 15 && slot <= 102 + 15),
      `unreadable slots ${slots.join(', ')} lie within a 64 KiB folio of the bad ones`,
    )
    t.same(
      slots,
      Array.from({ length: slots.length }, (_, i) => slots[0]! + i),
      'adjacent slots',
    )
    t.match(run.unreadableRecords[0].detail, /^the storage could not read it back: EIO \(/)
    t.equal(run.intact, run.acked - run.superseded - run.unreadable, 'every other record read and judged intact')
    t.match(run.lostRanges[0], { count: run.unreadable, reason: /EIO/ })
    const first = slots[0]!
    const last = slots.at(-1)!
    t.match(text, /FAIL/)
    t.match(text, new RegExp(`${run.unreadable} lost \\(${run.unreadable} of them unreadable: the storage would not return them\\)`))
    t.match(
      text,
      new RegExp(
        `unreadable slots ${first}-${last} \\(${slots.length} records, seqs \\d+-\\d+\\) at offset ${recordSizeBytes * (1 + first)}, [\\d,]+ bytes: the storage could not read it back: EIO`,
      ),
    )
    t.notMatch(text, /could not read .* at offset/)
  })

  t.test('past the bound of failed record reads, the rest of a failing stretch is counted unread, not read again', async (t) => {
    // A bound of 2 on a file read in one 16 MiB stretch: the records from the third failed read on are
    // counted without a read of their own (a dead disk would take a failed read per record).
    process.env.PLUGCHECK_VERIFY_MAX_REREADS = '2'
    t.teardown(() => {
      delete process.env.PLUGCHECK_VERIFY_MAX_REREADS
    })
    const { code, json, stderr, text } = await verify(deviceSectors(recordSizeBytes * (1 + 100), 3 * recordSizeBytes))
    t.equal(code, 1, `exit 1 (stderr: ${stderr})`)
    const run = json.runs[0]
    const judged = run.acked - run.superseded
    t.match(run, { verdict: 'fail', torn: 0, corrupt: 0 })
    t.equal(run.intact + run.unreadable, judged, 'every record judged intact or unreadable')
    t.ok(run.intact >= 85 && run.intact <= 100, `the records before the bad ones read and intact (${run.intact})`)
    const unread = run.unreadableRecords.filter((r: { detail: string }) =>
      /not read again record by record after 2 unreadable records/.test(r.detail),
    )
    t.equal(unread.length, Math.min(1000, run.unreadable) - 2, 'all but the 2 failed reads counted without a read')
    t.match(text, /not read again record by record after 2 unreadable records/)
  })

  t.test('the inode table block of the file answers EIO: the file cannot be opened, every record lost, FAIL exit 1', async (t) => {
    const { code, json, stderr, text } = await verify([[inodeBlock * 2, 2]])
    t.equal(code, 1, `exit 1 (stderr: ${stderr})`)
    const run = json.runs[0]
    const judged = run.acked - run.superseded
    t.ok(judged > 0)
    t.match(run, { verdict: 'fail', intact: 0, lost: judged, unreadable: judged })
    t.match(run.superblock, { kind: 'unreadable', detail: /^the data file cannot be opened: EIO \(/ })
    t.match(text, /FAIL/)
    t.match(text, /the data file cannot be opened: EIO/)
  })

  t.test("the control's (none) unreadable records are its own losses; its unreadable superblock is its file lost", async (t) => {
    // A second image: fdatasync and the control written together (PATH.fdatasync, PATH.none), cleanly
    // unmounted so every control record reached it. The control's records unreadable: lost, as the
    // control's lost records always are, which shows the cut was real: the group passes (exit 0), the
    // synced method is not blamed. Its superblock unreadable: its file, fsynced before any record, is lost: FAIL.
    const image2 = join(dir, 'disk2.img')
    writeFileSync(image2, '')
    sh('truncate', ['-s', '64M', image2])
    sh('mkfs.ext4', ['-q', '-F', '-b', '1024', '-I', '256', '-E', 'lazy_itable_init=0,lazy_journal_init=0', image2])
    const group = join(mountPoint, 'group.dat')
    sh('mount', ['-o', 'loop', image2, mountPoint])
    let mounted2 = true
    t.teardown(() => {
      if (mounted2) sh('umount', [mountPoint])
    })
    const args = ['--method', 'fdatasync,none', '--size', '4MiB', '--record-size', '4k', '--duration', '1']
    const written = await runCli(['write', '--server', server, '--file', group, ...args], 30_000)
    t.equal(written.code, 0, `the write ended by --duration (stderr: ${written.stderr})`)
    // The control's blocks are allocated when its dirty pages are written back: have that happen first.
    sh('sync', [`${group}.none`])
    const controlExtents = fileExtents(sh('filefrag', ['-v', '-b512', `${group}.none`]))
    sh('umount', [mountPoint])
    mounted2 = false
    const controlSectors = (offsetBytes: number): [number, number][] => {
      const s = offsetBytes / sectorBytes
      const extent = controlExtents.find((e) => s >= e.logical && s < e.logical + e.length)
      if (extent === undefined) throw new Error(`control file sector ${s} is in no extent`)
      return [[extent.physical + (s - extent.logical), recordSizeBytes / sectorBytes]]
    }
    const verifyGroup = async (bad: [number, number][]) => {
      const disk = await serveImage(t, dir, image2, mountPoint, bad)
      try {
        const json = await runCli(['verify', '--server', server, '--file', group, '--json'], 30_000)
        return { code: json.code, stderr: json.stderr, runs: JSON.parse(json.stdout).runs as Array<Record<string, unknown>> }
      } finally {
        await disk.stop()
      }
    }
    const byMethod = (runs: Array<Record<string, unknown>>, method: string) => runs.find((r) => r.method === method)!

    const records = await verifyGroup(controlSectors(recordSizeBytes * (1 + 50)))
    t.equal(records.code, 0, `exit 0: the control's losses are its own (stderr: ${records.stderr})`)
    const control = byMethod(records.runs, 'none')
    t.match(control, { verdict: 'pass', torn: 0, corrupt: 0 })
    t.ok((control.unreadable as number) > 0, `the control lost ${control.unreadable} unreadable records`)
    t.equal(control.lost, control.unreadable, 'every record it lost is an unreadable one')
    t.match(byMethod(records.runs, 'fdatasync'), { verdict: 'pass', lost: 0, unreadable: 0 })

    const superblock = await verifyGroup(controlSectors(0))
    t.equal(superblock.code, 1, `exit 1: the control's file is lost (stderr: ${superblock.stderr})`)
    t.match(byMethod(superblock.runs, 'none'), { verdict: 'fail', superblock: { kind: 'unreadable' } })
    t.match(byMethod(superblock.runs, 'fdatasync'), { verdict: 'pass', lost: 0 })
  })
}
