/**
 * One record file of a files run read and classified (files-record.ts): exactly its own record is
 * intact; every other content its class and reason; a name gone since the listing is absent (null);
 * nothing followed; the findings kept for the judging. (judge-files.test.ts judges whole directories.)
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { intactCode, RecordFiles } from '../../../../src/client/verify/files-record.js'
import { corruptCode } from '../../../../src/client/verify/failed-seqs.js'
import { listenedRunMs } from '../../../../src/client/verify/judge.js'
import { craftFilesMeta, craftRun, filesRecord } from '../../../fixtures/crafted-run.js'

const keep = 10

function setUp(dir: string) {
  const meta = craftFilesMeta('f0000000000000c1', join(dir, 'run'), keep)
  mkdirSync(meta.path)
  const records = new RecordFiles(meta, Date.now(), listenedRunMs(craftRun(meta, 25)))
  const put = (seq: number, bytes: Buffer | string): string => {
    const path = join(meta.path, `rec-${seq}`)
    writeFileSync(path, bytes)
    return path
  }
  /** The class and reason a code stands for. */
  const reason = (code: number) => ({ lossClass: records.classes.get(code), reason: records.failed.reason(code) })
  return { meta, records, put, reason }
}

t.test('its own record: intact, and holdsOwnRecord says so; any other seq does not', async (t) => {
  const { meta, records, put } = setUp(t.testdir())
  const path = put(20, filesRecord(meta, 20))
  t.same(records.judge(path, 20), { code: intactCode })
  t.equal(records.holdsOwnRecord(path, statSync(path), 20), true)
  t.equal(records.holdsOwnRecord(path, statSync(path), 21), false)
  t.equal(records.classes.size, 0, 'no reason given')
})

t.test('another record of its slot under the name, or more than a record: corrupt, with a finding naming it', async (t) => {
  const { meta, records, put } = setUp(t.testdir())
  t.same(records.judge(put(20, filesRecord(meta, 10)), 20), { code: corruptCode })
  t.same(records.judge(put(21, Buffer.concat([filesRecord(meta, 21), Buffer.from('more')])), 21), { code: corruptCode })
  t.match(records.corrupt, [
    { seq: 20, detail: /rec-20 holds record 10, not record 20: another record's contents under its name/ },
    { seq: 21, lengthBytes: meta.recordSizeBytes + 4, detail: /rec-21 holds 1028 bytes: its record and 4 more no write made/ },
  ])
})

t.test('empty, short, zeros: lost, each with its class and reason', async (t) => {
  const { meta, records, put, reason } = setUp(t.testdir())
  const empty = records.judge(put(20, ''), 20)
  t.match(reason(empty!.code), { lossClass: 'zero', reason: 'zero-length file: the name survived, the data did not' })
  const short = records.judge(put(21, filesRecord(meta, 21).subarray(0, 100)), 21)
  t.match(reason(short!.code), { lossClass: 'short', reason: 'short file: the name survived with part of the data' })
  const zeros = records.judge(put(22, Buffer.alloc(meta.recordSizeBytes)), 22)
  t.match(reason(zeros!.code), { lossClass: 'lost' })
  t.match(records.records, [
    { seq: 20, lengthBytes: 0, detail: 'rec-20 is empty: the name survived, the data did not' },
    { seq: 21, lengthBytes: 100, detail: "rec-21 holds 100 of the record's 1024 bytes" },
  ])
})

t.test('not a regular file: a symbolic link (never followed), a FIFO (never blocking), a directory', async (t) => {
  const dir = t.testdir()
  const { meta, records, reason } = setUp(dir)
  writeFileSync(join(dir, 'outside'), filesRecord(meta, 20))
  symlinkSync(join(dir, 'outside'), join(meta.path, 'rec-20'))
  execFileSync('mkfifo', [join(meta.path, 'rec-21')])
  mkdirSync(join(meta.path, 'rec-22'))
  const kinds = [20, 21, 22].map((seq) => reason(records.judge(join(meta.path, `rec-${seq}`), seq)!.code))
  t.match(kinds, [
    { lossClass: 'not-a-file', reason: 'its name holds a symbolic link, not a file' },
    { lossClass: 'not-a-file', reason: 'its name holds a FIFO, not a file' },
    { lossClass: 'not-a-file', reason: 'its name holds a directory, not a file' },
  ])
  t.equal(records.holdsOwnRecord(join(meta.path, 'rec-20'), statSync(join(dir, 'outside')), 20), false, 'a link is not read through')
})

t.test('gone since the listing: absent (null), no finding', async (t) => {
  const { meta, records } = setUp(t.testdir())
  t.equal(records.judge(join(meta.path, 'rec-20'), 20), null)
  t.equal(records.classes.size, 0, 'no reason given')
})

t.test('a reason is one code, its class the first it was given', async (t) => {
  const { records } = setUp(t.testdir())
  const a = records.code('the file is missing', 'missing')
  t.equal(records.code('the file is missing', 'unreadable'), a)
  t.equal(records.classes.get(a), 'missing')
  t.not(records.code('another reason', 'missing'), a)
})
