/**
 * fio-style damage pipeline: a finished run verifies clean, then one kind of damage at a time is
 * applied to a copy of its file and verify must name exactly what was damaged, with exact counts.
 */
import t from 'tap'
import { copyFileSync, openSync, readSync, rmSync, truncateSync, writeSync, closeSync, renameSync } from 'node:fs'
import { join } from 'node:path'
import { runInProcess, startListener, tempDir, writeThenKill } from '../fixtures/cli.js'
import { runsEnded } from '../fixtures/runs-ended.js'

const recordSize = 8192
const offsetOf = (seq: number): number => recordSize * seq // append: slot = seq - 1, offset = recordSize * (1 + slot)

function patch(path: string, offset: number, bytes: Buffer): void {
  const fd = openSync(path, 'r+')
  writeSync(fd, bytes, 0, bytes.length, offset)
  closeSync(fd)
}

function read(path: string, offset: number, length: number): Buffer {
  const fd = openSync(path, 'r')
  const buf = Buffer.alloc(length)
  readSync(fd, buf, 0, length, offset)
  closeSync(fd)
  return buf
}

t.test('damage pipeline on an append run', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'data.plugcheck')
  const pristine = join(dir, 'pristine')
  await writeThenKill(listener.server, file, ['--method', 'fdatasync', '--size', '64MiB'], 200)
  await runsEnded(listener.server, file) // its last acks and its end taken in (verify would judge a live run)

  const verify = async () => {
    const result = await runInProcess(['verify', '--server', listener.server, '--file', file, '--json'])
    return { code: result.code, run: JSON.parse(result.stdout || '{"runs":[{}]}').runs[0], stderr: result.stderr }
  }
  const clean = await verify()
  t.equal(clean.code, 0, 'an undamaged run passes')
  const acked: number = clean.run.acked
  t.ok(acked >= 200)
  t.equal(clean.run.intact, acked)
  copyFileSync(file, pristine)
  const restore = () => copyFileSync(pristine, file)
  const k = 100 // an acked record in the middle

  await t.test('one flipped byte inside an acked record: that seq, corrupt', async (t) => {
    restore()
    const at = offsetOf(k) + 3000
    patch(file, at, Buffer.from([read(file, at, 1)[0]! ^ 0x40]))
    const { code, run } = await verify()
    t.equal(code, 1)
    t.match(run, { verdict: 'fail', corrupt: 1, torn: 0, lost: 0, intact: acked - 1 })
    t.equal(run.corruptRecords[0].seq, k)
    t.equal(run.corruptRecords[0].offsetBytes, offsetOf(k))
  })

  await t.test('second half zeroed: torn', async (t) => {
    restore()
    const half = recordSize / 2
    patch(file, offsetOf(k) + half, Buffer.alloc(half))
    const { code, run } = await verify()
    t.equal(code, 1)
    t.match(run, { verdict: 'fail', torn: 1, corrupt: 0, lost: 0, intact: acked - 1 })
    t.equal(run.tornRecords[0].seq, k)
    t.match(run.tornRecords[0].detail, /8 of 16 sectors/)
  })

  await t.test("second half replaced with another slot's record (a misdirected write): corrupt, never interrupted", async (t) => {
    restore()
    const half = recordSize / 2
    for (const other of [k - 50, k + 1]) {
      restore()
      patch(file, offsetOf(k) + half, read(file, offsetOf(other) + half, half))
      const { code, run } = await verify()
      t.equal(code, 1, `sectors of seq ${other}`)
      t.match(run, { verdict: 'fail', corrupt: 1, torn: 0, lost: 0, interrupted: 0, intact: acked - 1 })
      t.equal(run.corruptRecords[0].seq, k)
      t.match(run.corruptRecords[0].detail, new RegExp(`record ${other}, which belongs to slot ${other - 1}: a misdirected write`))
    }
  })

  await t.test('truncated file: the cut-off seqs lost, exactly', async (t) => {
    restore()
    const firstGone = 150
    truncateSync(file, offsetOf(firstGone))
    const { code, run } = await verify()
    t.equal(code, 1)
    t.match(run, { lost: acked - firstGone + 1, torn: 0, corrupt: 0, intact: firstGone - 1 })
    t.equal(run.lostRanges.length, 1)
    t.match(run.lostRanges[0], { fromSeq: firstGone, toSeq: acked, count: acked - firstGone + 1, reason: 'past the end of the file' })
    t.ok(run.lostRanges[0].ackedFromMs <= run.lostRanges[0].ackedToMs, 'with the window in which they were acked')
  })

  await t.test('truncated mid-record: the cut record torn, the rest lost', async (t) => {
    restore()
    truncateSync(file, offsetOf(150) + 4096)
    const { run } = await verify()
    t.match(run, { torn: 1, lost: acked - 150, intact: 149 })
    t.equal(run.tornRecords[0].seq, 150)
  })

  await t.test('a zeroed record: lost, reported as one range', async (t) => {
    restore()
    patch(file, offsetOf(k), Buffer.alloc(recordSize))
    const { code, run } = await verify()
    t.equal(code, 1)
    t.match(run, { lost: 1, torn: 0, corrupt: 0, intact: acked - 1 })
    t.match(run.lostRanges, [{ fromSeq: k, toSeq: k, count: 1 }])
    t.match(run.lostRanges[0].reason, /zeros/)
    t.match(run.reordering, { count: 1, earliestLostSeq: k }, 'later records survived an earlier lost one')
  })

  await t.test('a record copied from another slot (misdirected write): corrupt', async (t) => {
    restore()
    // Same slot written by an earlier seq of another run would be foreign; a stale copy of this run's record k-1 is "older".
    patch(file, offsetOf(k), read(file, offsetOf(k - 1), recordSize))
    const { run } = await verify()
    t.match(run, { corrupt: 1, lost: 0 }, "record k-1's header names slot k-2: bytes no write to slot k-1 produced")
  })

  await t.test('missing file: every acked record lost, exit 1', async (t) => {
    renameSync(file, `${file}.away`)
    const { code, run } = await verify()
    renameSync(`${file}.away`, file)
    t.equal(code, 1)
    t.match(run, { lost: acked, intact: 0, superblock: { kind: 'missing' } })
  })

  await t.test("a newer run announced, but the path still holds the older run's file: lost, not fine", async (t) => {
    restore()
    copyFileSync(file, `${file}.old`)
    // A second run on the same path, killed at once; then the old file is put back, as a cut that lost the new file's creation would leave it.
    await writeThenKill(listener.server, file, ['--method', 'fdatasync', '--size', '64MiB'], 20, join(dir, 'trace2'))
    await runsEnded(listener.server, file)
    rmSync(file)
    renameSync(`${file}.old`, file)
    const { code, run } = await verify()
    t.equal(code, 1)
    t.equal(run.intact, 0)
    t.equal(run.lost, run.acked)
    t.equal(run.superblock.kind, 'other-run')
    t.match(run.lostRanges[0].reason, /another run|older/)
  })
})
