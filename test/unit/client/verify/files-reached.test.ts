/**
 * How far a files run's writer got (files-reached.ts): the highest unacknowledged record or temporary
 * file holding exactly its own record of the run; names, foreign files and wrong sizes prove no step;
 * at most maxReachedReads files are read, so a directory of many record-sized strays costs that many reads.
 */
import { symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { maxReachedReads, UnacknowledgedFiles } from '../../../../src/client/verify/files-reached.js'
import { RecordFiles } from '../../../../src/client/verify/files-record.js'
import { listenedRunMs } from '../../../../src/client/verify/judge.js'
import type { RunMeta } from '../../../../src/record/format.js'
import { craftFilesMeta, craftRun, filesRecord, range, writeFilesRun } from '../../../fixtures/crafted-run.js'

const keep = 10

function setUp(dir: string): { meta: RunMeta; records: RecordFiles } {
  const meta = craftFilesMeta('f0000000000000a1', join(dir, 'run'), keep)
  writeFilesRun(meta, range(16, 25))
  return { meta, records: new RecordFiles(meta, Date.now(), listenedRunMs(craftRun(meta, 25))) }
}

t.test('the highest file holding its own record: a record file or a temporary one', async (t) => {
  const { meta, records } = setUp(t.testdir())
  writeFileSync(join(meta.path, 'rec-26'), filesRecord(meta, 26))
  writeFileSync(join(meta.path, '.rec-27.tmp'), filesRecord(meta, 27))
  const files = new UnacknowledgedFiles()
  files.push(26, false)
  files.push(27, true)
  t.equal(files.count, 2)
  t.equal(files.writerReached(meta.path, records), 27)
})

t.test('names alone prove nothing: another seq, another run, garbage, a short file, a link, a name listed only', async (t) => {
  const dir = t.testdir() // made once: testdir() empties it on every call
  const { meta, records } = setUp(dir)
  const other = craftFilesMeta('f0000000000000b2', join(meta.path, 'x'), keep)
  writeFileSync(join(meta.path, 'rec-26'), filesRecord(meta, 26))
  writeFileSync(join(meta.path, 'rec-30'), filesRecord(meta, 29)) // another seq's record under the name
  writeFileSync(join(meta.path, 'rec-31'), filesRecord(other, 31)) // another run's record
  writeFileSync(join(meta.path, 'rec-32'), Buffer.alloc(meta.recordSizeBytes, 0x5a)) // garbage of a record's size
  writeFileSync(join(meta.path, 'rec-33'), filesRecord(meta, 33).subarray(0, 100)) // part of its record
  writeFileSync(join(dir, 'outside'), filesRecord(meta, 34))
  symlinkSync(join(dir, 'outside'), join(meta.path, 'rec-34')) // its record, out of the directory: not followed
  const files = new UnacknowledgedFiles()
  for (const seq of [26, 30, 31, 32, 33, 34, 35]) files.push(seq, false) // rec-35 listed, gone by now
  t.equal(files.writerReached(meta.path, records), 26)
})

t.test('nothing holds its record: 0', async (t) => {
  const { meta, records } = setUp(t.testdir())
  writeFileSync(join(meta.path, 'rec-40'), 'not a record')
  const files = new UnacknowledgedFiles()
  t.equal(files.writerReached(meta.path, records), 0, 'none listed')
  files.push(40, false)
  t.equal(files.writerReached(meta.path, records), 0)
})

t.test(`at most ${maxReachedReads} record-sized files are read, the highest first; a name listed twice is read once`, async (t) => {
  const { meta, records } = setUp(t.testdir())
  writeFileSync(join(meta.path, 'rec-26'), filesRecord(meta, 26))
  const garbage = Buffer.alloc(meta.recordSizeBytes, 0x5a)
  const reachable = new UnacknowledgedFiles()
  const beyond = new UnacknowledgedFiles()
  reachable.push(26, false)
  beyond.push(26, false)
  // maxReachedReads - 1 garbage files above 26 (each listed twice): 26 is the last read allowed.
  for (let seq = 27; seq < 27 + maxReachedReads - 1; seq++) {
    writeFileSync(join(meta.path, `rec-${seq}`), garbage)
    reachable.push(seq, false)
    reachable.push(seq, false)
    beyond.push(seq, false)
  }
  t.equal(reachable.writerReached(meta.path, records), 26, 'within the bound, duplicates not counted as reads')
  // One more garbage file above them: 26 would be the 65th read.
  const top = 27 + maxReachedReads - 1
  writeFileSync(join(meta.path, `rec-${top}`), garbage)
  beyond.push(top, false)
  t.equal(beyond.writerReached(meta.path, records), 0, 'past the bound the search stops')
  t.equal(maxReachedReads, 64, 'the bound docs/verify-semantics.md states')
})
