/**
 * The subtle disk (see harness.ts): a small writeback cache that, when full, drops dirty blocks that
 * a later flush then acknowledges. It must lose some, never all, of what fdatasync acknowledged.
 *
 * First the disk itself, with a writer that is not plugcheck (numbered records, fdatasync after each,
 * counted once fdatasync returned) and a plain read-back after the reboot; then plugcheck, which must
 * find the partial loss: 0 < lost < acked, verdict fail, exit 1. Cut times are seeded
 * (PLUGCHECK_LAB_SEED replays them).
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Listener } from '../../src/server/listen/listener.js'
import { labFor, labUnavailableReason } from '../fixtures/lab/harness.js'
import { failedRecords, plugPull } from '../fixtures/lab/plug.js'
import { labSeed, seededRandom } from '../fixtures/lab/seeded.js'

const recordBytes = 8192

// Creates the file durably (fsync of the file and of its directory), then appends record i (its number at
// the start, then a fill byte) and fdatasyncs; only then bumps the ack count, which lives outside the cut.
const independentWriter = `
const fs = require('node:fs')
const path = require('node:path')
const [file, ackFile] = process.argv.slice(1)
const fd = fs.openSync(file, 'w')
fs.fsyncSync(fd)
const dir = fs.openSync(path.dirname(file), 'r')
fs.fsyncSync(dir)
fs.closeSync(dir)
const ack = fs.openSync(ackFile, 'r+')
const count = Buffer.alloc(4)
for (let i = 0; ; i++) {
  const record = Buffer.alloc(${recordBytes}, i & 0xff)
  record.write('record ' + i + ' ')
  fs.writeSync(fd, record, 0, record.length, i * record.length)
  fs.fdatasyncSync(fd)
  count.writeUInt32LE(i + 1)
  fs.writeSync(ack, count, 0, 4, 0)
}`

const reason = labUnavailableReason()
if (reason !== null) {
  t.fail(
    `the power-cut lab cannot run here: ${reason}\nhint: run the suite as root on Linux with /dev/fuse and nbdkit, libnbd-bin, e2fsprogs (.ci/run installs them)`,
  )
} else {
  const seed = labSeed()
  const random = seededRandom(seed)
  t.comment(`lab seed ${seed} (replay with PLUGCHECK_LAB_SEED=${seed})`)
  const outsideDir = fs.mkdtempSync(join(tmpdir(), 'plugcheck-lab-subtle-'))
  t.teardown(() => fs.rmSync(outsideDir, { recursive: true, force: true }))

  const independentMs = Math.round(1500 + random() * 1000)
  t.test(`the subtle disk loses some, not all, fdatasync'd records of an independent writer (cut after ${independentMs} ms)`, async (t) => {
    const lab = await labFor(t, { mode: 'subtle', imageSizeMiB: 64 })
    const file = join(lab.mountPoint, 'records')
    const ackFile = join(outsideDir, 'independent-acks')
    fs.writeFileSync(ackFile, Buffer.alloc(4))
    const writer = spawn(process.execPath, ['-e', independentWriter, file, ackFile], { stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    writer.stderr.on('data', (c: Buffer) => (stderr += c.toString()))
    const exited = new Promise<void>((resolve) => writer.on('exit', () => resolve()))
    // The cut's time counts from the first synced record (its file's creation synced before it), not from
    // the spawn, which a loaded machine can take a second or more to start.
    for (const deadline = Date.now() + 30_000; fs.readFileSync(ackFile).readUInt32LE(0) === 0 && writer.exitCode === null; ) {
      if (Date.now() > deadline) break
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    await new Promise((resolve) => setTimeout(resolve, independentMs))
    t.equal(writer.exitCode, null, `the writer was still writing at the cut: ${stderr}`)
    await lab.cut([writer.pid!])
    await exited
    const acked = fs.readFileSync(ackFile).readUInt32LE(0)
    await lab.reboot()

    const data = fs.readFileSync(file)
    const lost: number[] = []
    for (let i = 0; i < acked; i++) {
      const record = data.subarray(i * recordBytes, (i + 1) * recordBytes)
      const expected = Buffer.alloc(recordBytes, i & 0xff)
      expected.write(`record ${i} `)
      if (!record.equals(expected)) lost.push(i)
    }
    t.comment(
      `independent writer: acked ${acked}, lost ${lost.length} (${((100 * lost.length) / Math.max(acked, 1)).toFixed(1)}%), first lost ${lost.slice(0, 10).join(', ')}`,
    )
    t.ok(acked > 100, `the writer synced a fair number of records (${acked})`)
    t.ok(lost.length > 0, 'some acknowledged records are lost')
    t.ok(lost.length < acked, 'not every acknowledged record is lost')
  })

  t.test('plugcheck finds the partial losses', async (t) => {
    const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: join(outsideDir, 'listener') })
    t.teardown(() => listener.close())
    const server = `127.0.0.1:${listener.address().port}`
    for (const pattern of ['append', 'overwrite'] as const) {
      const runMs = Math.round(1500 + random() * 1000)
      t.test(`fdatasync, ${pattern}, cut after ${runMs} ms`, async (t) => {
        const lab = await labFor(t, { mode: 'subtle', imageSizeMiB: 64 })
        const result = await plugPull(lab, {
          methods: ['fdatasync'],
          direct: false,
          pattern,
          runMs,
          minSyncs: 500,
          size: '8MiB',
          outsideDir,
          server,
        })
        const run = result.report?.runs[0]
        t.ok(run !== undefined, `verify reported (exit ${result.verifyCode}): ${result.verifyStderr}`)
        if (run === undefined) return
        const failed = failedRecords(run)
        t.comment(
          `acked ${run.acked} (writer completed ${result.completed.get(run.runId) ?? 0}), intact ${run.intact}, lost ${run.lost}, torn ${run.torn}, corrupt ${run.corrupt}, superseded ${run.superseded}`,
        )
        t.ok(failed > 0, 'losses found')
        t.ok(failed < run.acked, 'partial: fewer records failed than were acknowledged')
        t.ok(run.intact > 0, 'some acknowledged records survived')
        t.equal(run.verdict, 'fail')
        t.equal(result.verifyCode, 1, 'exit 1: an acknowledged record was lost')
      })
    }

    // With --direct the writer's read-back goes to the disk (the host's cache of the disk is dropped
    // as the run goes: a real machine has none between its file system and its drive), which has
    // already dropped some flushed blocks: the writer sees a record gone while it runs. That is the
    // storage's loss, not another program's: the run ends as storage-lost (write exit 1) and verify
    // judges it, never "not judged".
    const directMs = 20_000
    t.test(`fdatasync, append, --direct: the writer sees the loss while it runs (cut after ${directMs} ms at the latest)`, async (t) => {
      // A file that does not wrap within the run: a dropped record stays dropped until the writer samples it.
      const lab = await labFor(t, { mode: 'subtle', imageSizeMiB: 128 })
      const result = await plugPull(lab, {
        methods: ['fdatasync'],
        direct: true,
        pattern: 'append',
        runMs: directMs,
        size: '96MiB',
        outsideDir,
        server,
        mayEndFirst: true,
        dropHostCacheEveryMs: 100,
      })
      const run = result.report?.runs[0]
      t.comment(`writer exit ${result.writerExitCode ?? '(cut)'}: ${result.writerStderr.trim().split('\n')[0] ?? ''}`)
      t.ok(run !== undefined, `verify judged the run (exit ${result.verifyCode}): ${result.verifyStderr}`)
      if (run === undefined) return
      const failed = failedRecords(run)
      t.comment(`acked ${run.acked}, intact ${run.intact}, lost ${run.lost}, torn ${run.torn}, corrupt ${run.corrupt}, ended ${run.ended}`)
      t.not(run.ended, 'file-changed', 'the storage lost the records, not another program')
      t.equal(result.writerExitCode, 1, `the writer saw the loss while it ran and exits 1: ${result.writerStderr}`)
      t.match(
        result.writerStderr,
        /plugcheck: the storage lost data while the run was going: acknowledged record [\d,]+ of run [0-9a-f]{16} \(fdatasync\) reads back as /,
      )
      t.equal(run.ended, 'storage-lost')
      t.ok(failed > 0 && failed < run.acked, `partial losses found (${failed} of ${run.acked})`)
      t.equal(run.verdict, 'fail')
      t.equal(result.verifyCode, 1, 'exit 1: an acknowledged record was lost')
    })
  })
}
