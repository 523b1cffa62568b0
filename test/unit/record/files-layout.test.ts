/** The names of a files run's directory: each name read back to its seq, and nothing else read as one. */
import t from 'tap'
import { maxOverwriteSlots } from '../../../src/record/format.js'
import { runKey, slotOf } from '../../../src/record/records.js'
import {
  isSuperblockTempName,
  maxKeptFiles,
  recordFileName,
  recycledBy,
  seqOfRecordFile,
  seqOfTempFile,
  superblockTempName,
  tempFileName,
} from '../../../src/record/files-layout.js'

t.test('every name written reads back to its seq', async (t) => {
  for (const seq of [1, 9, 10, 32_767, 2 ** 31, 2 ** 45]) {
    t.equal(seqOfRecordFile(recordFileName(seq)), seq, recordFileName(seq))
    t.equal(seqOfTempFile(tempFileName(seq)), seq, tempFileName(seq))
    t.equal(seqOfRecordFile(tempFileName(seq)), null, 'a temporary name is not a record name')
    t.equal(seqOfTempFile(recordFileName(seq)), null, 'a record name is not a temporary name')
  }
})

t.test('names no writer makes are not records', async (t) => {
  const foreign = [
    'rec-0',
    'rec-01',
    'rec-',
    'rec-1.tmp',
    'rec-1 ',
    ' rec-1',
    'rec-+1',
    'rec-1e3',
    'REC-1',
    'rec-1/x',
    'superblock',
    '.rec-0.tmp',
    '.rec-1',
    'rec-35184372088833',
    'rec-99999999999999999',
    '.rec-12.tmp.x',
  ]
  for (const name of foreign) {
    t.equal(seqOfRecordFile(name), null, name)
    t.equal(seqOfTempFile(name), null, name)
  }
})

t.test('recycling deletes the record keep steps back, once the window is full', async (t) => {
  t.equal(recycledBy(1, 3), null)
  t.equal(recycledBy(3, 3), null)
  t.equal(recycledBy(4, 3), 1)
  t.equal(recycledBy(100, 3), 97)
})

t.test("the superblock's temporary name is known as one, and nothing like it is", async (t) => {
  t.equal(superblockTempName('0123456789abcdef'), '.superblock.plugcheck-0123456789abcdef.tmp')
  t.ok(isSuperblockTempName(superblockTempName('0123456789abcdef')))
  for (const name of [
    'superblock',
    '.superblock.tmp',
    '.superblock.plugcheck-0123.tmp',
    '.superblock.plugcheck-0123456789ABCDEF.tmp',
    'x.superblock.plugcheck-0123456789abcdef.tmp',
  ])
    t.notOk(isSuperblockTempName(name), name)
})

t.test("a files run's record has the slot of the same seq in an append run of the same window", async (t) => {
  const key = runKey('0123456789abcdef')
  for (const [seq, keep, slot] of [
    [1, 5, 0],
    [5, 5, 4],
    [6, 5, 0],
    [12, 5, 1],
  ] as const) {
    t.equal(slotOf(key, 'files', seq, keep), slot, `seq ${seq} of ${keep}`)
    t.equal(slotOf(key, 'files', seq, keep), slotOf(key, 'append', seq, keep))
  }
})

t.test('--keep-files is bounded as the run meta bounds the slots of every run but append', async (t) => {
  t.equal(maxKeptFiles, maxOverwriteSlots)
})
