/** The names of a files run's directory: each name read back to its seq, and nothing else read as one. */
import t from 'tap'
import { recordFileName, recycledBy, seqOfRecordFile, seqOfTempFile, tempFileName } from '../../../src/record/files-layout.js'

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
