/**
 * A files run's verify excuses acknowledged records absent below "how far the writer got" (the highest
 * seq a record or temporary file shows): steps past the acknowledged ones delete old records. A name
 * far past the run (a user's file, a crafted or misdirected one, garbage under rec-N) must not stand
 * for how far the writer got: only a file holding its own record of this run shows a step ran.
 */
import t from 'tap'
import { rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { craftFilesMeta, craftRun, filesRecord, listenerWith, range, writeFilesRun } from '../fixtures/crafted-run.js'
import { runInProcess, tempDir } from '../fixtures/cli.js'

const keep = 10
const acked = 25

const judged = async (server: string, dir: string) => {
  const result = await runInProcess(['verify', '--server', server, '--file', dir, '--json'])
  return { code: result.code, run: JSON.parse(result.stdout).runs[0] }
}

t.test('a stray rec-N far past the run does not excuse acknowledged records that are missing', async (t) => {
  const dir = join(tempDir(t), 'run')
  const meta = craftFilesMeta('e200000000000001', dir, keep)
  writeFilesRun(meta, range(16, 25))
  rmSync(join(dir, 'rec-17')) // an acknowledged, kept record lost (rec-16 may be gone: step 26 may have run)
  rmSync(join(dir, 'rec-20'))
  writeFileSync(join(dir, 'rec-999999'), 'not a record of this run\n')
  const server = await listenerWith(t, [craftRun(meta, acked)])
  const { code, run } = await judged(server, dir)
  t.equal(code, 1, 'FAIL: two acknowledged records are gone')
  t.match(run, { verdict: 'fail', lost: 2, files: { deletedUnacknowledged: 0, highestSeq: 999999, reachedSeq: 0 } })
})

t.test("another run's genuine record under a high name does not excuse them either", async (t) => {
  const dir = join(tempDir(t), 'run')
  const meta = craftFilesMeta('e200000000000002', dir, keep)
  const other = craftFilesMeta('e200000000000003', join(tempDir(t), 'other'), keep)
  writeFilesRun(meta, range(16, 25))
  rmSync(join(dir, 'rec-17'))
  writeFileSync(join(dir, 'rec-40'), filesRecord(other, 40))
  writeFileSync(join(dir, '.rec-41.tmp'), 'garbage')
  const server = await listenerWith(t, [craftRun(meta, acked)])
  const { code, run } = await judged(server, dir)
  t.equal(code, 1)
  t.match(run, { verdict: 'fail', lost: 1, files: { deletedUnacknowledged: 0 } })
})

t.test('a genuine record past the acknowledged ones still excuses what its steps deleted (no false alarm)', async (t) => {
  const dir = join(tempDir(t), 'run')
  const meta = craftFilesMeta('e200000000000004', dir, keep)
  writeFilesRun(meta, range(18, 27)) // steps 26 and 27 ran (deleting rec-16, rec-17); their acks never reached the listener
  writeFileSync(join(dir, '.rec-28.tmp'), '') // step 28 begun, nothing of it synced
  const server = await listenerWith(t, [craftRun(meta, acked)])
  const { code, run } = await judged(server, dir)
  t.equal(code, 0, 'PASS')
  t.match(run, { verdict: 'pass', lost: 0, intact: 8, files: { deletedUnacknowledged: 2, unacknowledged: 3, reachedSeq: 27 } })
})

t.test('many stray names above the writer: a genuine record below them is still found, and reads stay bounded', async (t) => {
  const dir = join(tempDir(t), 'run')
  const meta = craftFilesMeta('e200000000000005', dir, keep)
  writeFilesRun(meta, range(18, 27)) // steps 26 and 27 ran
  for (let seq = 1000; seq < 1500; seq++) writeFileSync(join(dir, `rec-${seq}`), 'garbage') // not a record's size: never read
  const server = await listenerWith(t, [craftRun(meta, acked)])
  let judgedRun = await judged(server, dir)
  t.equal(judgedRun.code, 0, 'PASS: rec-27 found below 500 garbage names')
  t.match(judgedRun.run, { files: { reachedSeq: 27, deletedUnacknowledged: 2, unacknowledged: 502 } })
  const text = await runInProcess(['verify', '--server', server, '--file', dir])
  t.match(
    text.stdout,
    /2 of the deleted were deleted by steps past the last ack .*the directory shows it got to seq 27\)/,
    'the words name the step shown, not the highest name',
  )

  // Record-sized garbage above it: read, 64 at most, then the writer is taken to have reached only the acks.
  for (let seq = 2000; seq < 2100; seq++) writeFileSync(join(dir, `rec-${seq}`), Buffer.alloc(meta.recordSizeBytes, 0x5a))
  judgedRun = await judged(server, dir)
  t.equal(judgedRun.code, 1, 'FAIL: no step past the acks shown within the bound, so rec-17 gone is a loss')
  t.match(judgedRun.run, { lost: 1, files: { reachedSeq: 0, deletedUnacknowledged: 1 } })
})
