/**
 * verify reads what the acknowledged records need: a large overwrite file with a few records
 * acknowledged costs their own bytes, not a read chunk each (bytes read counted by the kernel, rchar).
 */
import { closeSync, ftruncateSync, openSync, readFileSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { judgeRun } from '../../../../src/client/verify/judge.js'
import { threadsEnv } from '../../../../src/client/verify/scan-threads.js'
import { encodeSuperblock } from '../../../../src/record/format.js'
import { fillRecord, runKey, slotOf, slotOffsetBytes } from '../../../../src/record/records.js'
import { craftMeta, craftRun } from '../../../fixtures/crafted-run.js'

const bytesRead = (): number => Number(/rchar: (\d+)/.exec(readFileSync('/proc/self/io', 'utf8'))?.[1])

for (const threads of ['0', '2']) {
  t.test(`100 records acknowledged in a sparse 20 GiB overwrite file (${threads} checking threads)`, async (t) => {
    const saved = process.env[threadsEnv]
    process.env[threadsEnv] = threads
    t.teardown(() => {
      if (saved === undefined) delete process.env[threadsEnv]
      else process.env[threadsEnv] = saved
    })
    const recordSize = 8192
    const slotCount = (20 * 2 ** 30) / recordSize
    const path = join(t.testdir(), 'sparse.dat')
    const meta = craftMeta('5a5a5a5a12345678', path, { pattern: 'overwrite', recordSizeBytes: recordSize, slotCount })
    const key = runKey(meta.runId)
    const fd = openSync(path, 'w')
    ftruncateSync(fd, slotOffsetBytes(recordSize, slotCount))
    writeSync(fd, encodeSuperblock(meta), 0, recordSize, 0)
    const record = Buffer.alloc(recordSize)
    const acked = 100
    for (let seq = 1; seq <= acked; seq++) {
      const slot = slotOf(key, meta.pattern, seq, slotCount)
      fillRecord(record, key, seq, slot, 1)
      writeSync(fd, record, 0, recordSize, slotOffsetBytes(recordSize, slot))
    }
    // One record lost: its slot zeroed again, which the sparse read must still find.
    const lostSlot = slotOf(key, meta.pattern, 50, slotCount)
    writeSync(fd, Buffer.alloc(recordSize), 0, recordSize, slotOffsetBytes(recordSize, lostSlot))
    closeSync(fd)

    const before = bytesRead()
    const report = await judgeRun(craftRun(meta, acked))
    const readBytes = bytesRead() - before
    t.equal(report.intact, acked - 1)
    t.equal(report.lost, 1)
    t.equal(report.verdict, 'fail')
    // 100 records and the superblock are 0.8 MiB (rchar also counts the modules a checking thread
    // reads as it starts, some 20 MiB under tsx); a 16 MiB chunk per record would be 1,600 MiB.
    t.ok(readBytes < 256 * 2 ** 20, `read ${(readBytes / 2 ** 20).toFixed(1)} MiB for ${acked} acknowledged records`)
  })
}
