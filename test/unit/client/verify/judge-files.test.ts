/**
 * Judging a files run's directory (judge-files.ts), built by hand from record/files-layout.ts with the
 * real record code: every class of loss, the control, what is fine (unacknowledged files, strays), and
 * hostile directories and listeners, each a verdict or a clear exit 3, never a crash or a hang. The
 * stored verdict of each must be one the listener accepts (protocol/verdict-rules.ts).
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, openSync, closeSync, readFileSync, symlinkSync, truncateSync, writeFileSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { judgeFilesRun, maxFilesRunEntries } from '../../../../src/client/verify/judge-files.js'
import type { RunReport } from '../../../../src/client/verify/run-report.js'
import { storedVerdicts } from '../../../../src/client/verify/stored-verdicts.js'
import { PlugcheckError } from '../../../../src/base/errors.js'
import { verdictDisagreement } from '../../../../src/protocol/verdict-rules.js'
import { encodeSuperblock as filesSuperblock, maxOverwriteSlots, type RunMeta } from '../../../../src/record/format.js'
import { craftFilesMeta, craftRun, filesRecord, range, writeFilesRun } from '../../../fixtures/crafted-run.js'

const keep = 10
const acked = 25

/** A run directory of keep 10 with acks 1..25, as an honest stack leaves it: rec-16..rec-25 and the superblock. */
function honestRun(t: Test, over: Partial<RunMeta> = {}, name = 'run'): RunMeta {
  const meta = craftFilesMeta('f000000000000001', join(testDir(t), name), keep, over)
  writeFilesRun(meta, range(acked - keep + 1, acked))
  return meta
}

/** The test's directory, made once (tap's testdir() empties it on every call). */
const dirs = new WeakMap<Test, string>()
function testDir(t: Test): string {
  let dir = dirs.get(t)
  if (dir === undefined) {
    dir = t.testdir()
    dirs.set(t, dir)
  }
  return dir
}

const judge = (meta: RunMeta, through = acked, over: Parameters<typeof judgeFilesRun>[1] = {}) =>
  judgeFilesRun(craftRun(meta, through), over)

/** The stored verdict of a one-run report, checked as the listener checks it: undefined when it agrees. */
function listenerObjection(report: RunReport): string | undefined {
  const [stored] = storedVerdicts(
    { verdict: report.verdict, host: 'h', file: report.path, source: 's', claims: [], notes: [], runs: [report] },
    null,
    null,
    Date.now(),
  )
  return verdictDisagreement(stored!.result, report.method, report.acked, true)
}

t.test('an honest directory passes: the kept records intact, the deleted ones gone, unacknowledged files fine', async (t) => {
  const meta = honestRun(t)
  // The writer was cut after making seq 26 and while making 27: never acknowledged.
  writeFileSync(join(meta.path, 'rec-26'), filesRecord(meta, 26))
  writeFileSync(join(meta.path, '.rec-27.tmp'), filesRecord(meta, 27).subarray(0, 100))
  const report = await judge(meta)
  t.match(report, { verdict: 'pass', acked, intact: keep, superseded: acked - keep, lost: 0, torn: 0, corrupt: 0, lostRangeCount: 0 })
  t.match(report.files, { keep, deleted: 15, cameBack: 0, renameLost: 0, zeroLength: 0, short: 0, unacknowledged: 2, strays: 0 })
  t.equal(report.superblock.kind, 'valid')
  t.equal(listenerObjection(report), undefined)
})

t.test('fewer acks than the window: nothing deleted, every acknowledged file judged', async (t) => {
  const meta = craftFilesMeta('f000000000000002', join(testDir(t), 'run'), keep)
  writeFilesRun(meta, range(1, 7))
  const report = await judge(meta, 7)
  t.match(report, { verdict: 'pass', intact: 7, superseded: 0, lost: 0 })
  t.equal(report.files?.deleted, 0)
})

interface Damage {
  readonly name: string
  readonly damage: (meta: RunMeta) => void
  readonly expect: Partial<RunReport>
  readonly files?: Partial<NonNullable<RunReport['files']>>
  readonly reason?: RegExp
  readonly corrupt?: RegExp
  readonly torn?: RegExp
}

const damages: Damage[] = [
  {
    name: 'a kept record file missing: lost',
    damage: (m) => execFileSync('rm', [join(m.path, 'rec-20')]),
    expect: { lost: 1, intact: 9 },
    reason: /^the file is missing$/,
  },
  {
    name: 'a record only under its temporary name: rename lost',
    damage: (m) => {
      execFileSync('mv', [join(m.path, 'rec-20'), join(m.path, '.rec-20.tmp')])
    },
    expect: { lost: 1, intact: 9 },
    files: { renameLost: 1 },
    reason: /^rename lost/,
  },
  {
    name: 'a zero-length record file',
    damage: (m) => truncateSync(join(m.path, 'rec-20'), 0),
    expect: { lost: 1, intact: 9 },
    files: { zeroLength: 1 },
    reason: /^zero-length file/,
  },
  {
    name: 'a short record file',
    damage: (m) => truncateSync(join(m.path, 'rec-20'), 200),
    expect: { lost: 1, intact: 9 },
    files: { short: 1 },
    reason: /^short file/,
  },
  {
    name: 'a flipped byte',
    damage: (m) => {
      const path = join(m.path, 'rec-20')
      const bytes = readFileSync(path)
      bytes[300] = bytes[300]! ^ 0x40
      writeFileSync(path, bytes)
    },
    expect: { corrupt: 1, lost: 0, intact: 9 },
    corrupt: /^rec-20: /,
  },
  {
    name: 'a deleted record came back',
    damage: (m) => writeFileSync(join(m.path, 'rec-3'), filesRecord(m, 3)),
    expect: { lost: 1, intact: 10, superseded: 14 },
    files: { cameBack: 1, deleted: 15 },
    reason: /^a deleted record file came back/,
  },
  {
    name: "a file holding another seq's record (its own slot)",
    damage: (m) => writeFileSync(join(m.path, 'rec-20'), filesRecord(m, 10)),
    expect: { corrupt: 1, intact: 9 },
    corrupt: /rec-20 holds record 10, not record 20/,
  },
  {
    name: "a file holding another seq's record (another slot)",
    damage: (m) => writeFileSync(join(m.path, 'rec-20'), filesRecord(m, 21)),
    expect: { corrupt: 1, intact: 9 },
    corrupt: /^rec-20: .*record 21/,
  },
  {
    name: 'a record file zeroed in place (the size kept, the data not)',
    damage: (m) => writeFileSync(join(m.path, 'rec-20'), Buffer.alloc(m.recordSizeBytes)),
    expect: { lost: 1, intact: 9 },
    reason: /^zeros/,
  },
  {
    name: 'a record file longer than a record',
    damage: (m) => writeFileSync(join(m.path, 'rec-20'), Buffer.concat([filesRecord(m, 20), Buffer.from('more')])),
    expect: { corrupt: 1, intact: 9 },
    corrupt: /holds 1028 bytes: its record and 4 more/,
  },
]

for (const d of damages) {
  t.test(d.name, async (t) => {
    const meta = honestRun(t)
    d.damage(meta)
    const report = await judge(meta)
    t.match(report, { verdict: 'fail', acked, ...d.expect })
    t.equal(
      report.intact + report.lost + report.torn + report.corrupt + report.superseded + report.interrupted,
      acked,
      'every acknowledged seq counted once',
    )
    if (d.files !== undefined) t.match(report.files, d.files)
    if (d.reason !== undefined) t.match(report.lostRanges[0]?.reason, d.reason)
    if (d.corrupt !== undefined) t.match(report.corruptRecords[0]?.detail, d.corrupt)
    t.equal(listenerObjection(report), undefined, 'the listener takes the stored verdict')
    // What the listener stores and `plugcheck report` sums: each kind of loss in lost, torn or corrupt.
    const [stored] = storedVerdicts(
      { verdict: 'fail', host: 'h', file: '', source: 's', claims: [], notes: [], runs: [report] },
      null,
      null,
    )
    t.match(stored!.result, {
      verdict: 'fail',
      lost: report.lost,
      torn: report.torn,
      corrupt: report.corrupt,
      superseded: report.superseded,
    })
    t.ok(stored!.result.lostRanges.length > 0, 'the failed seqs go with it')
  })
}

t.test('a torn record file of several sectors: torn', async (t) => {
  const meta = craftFilesMeta('f000000000000003', join(testDir(t), 'run'), keep, { recordSizeBytes: 4096 })
  writeFilesRun(meta, range(16, 25))
  const fd = openSync(join(meta.path, 'rec-20'), 'r+')
  writeSync(fd, Buffer.alloc(2048), 0, 2048, 2048)
  closeSync(fd)
  const report = await judge(meta)
  t.match(report, { verdict: 'fail', torn: 1, intact: 9, lost: 0, corrupt: 0 })
  t.match(report.tornRecords[0], { seq: 20, slot: 9, detail: /^rec-20: 4 of 8 sectors lack the acknowledged write/ })
})

t.test('several losses: ranges in seq order, the absent ones counted as ranges, reordering said', async (t) => {
  const meta = honestRun(t)
  for (const seq of [16, 17, 18]) execFileSync('rm', [join(meta.path, `rec-${seq}`)])
  execFileSync('mv', [join(meta.path, 'rec-19'), join(meta.path, '.rec-19.tmp')])
  truncateSync(join(meta.path, 'rec-22'), 0)
  const report = await judge(meta)
  // rec-16, the oldest kept, may have gone with step 26, under way at the cut: not a loss.
  t.match(report, { verdict: 'fail', lost: 4, intact: 5, superseded: 16, files: { deletedUnacknowledged: 1 } })
  t.same(
    report.lostRanges.map((r) => [r.fromSeq, r.toSeq, r.reason.split(':')[0]]),
    [
      [17, 18, 'the file is missing'],
      [19, 19, 'rename lost'],
      [22, 22, 'zero-length file'],
    ],
  )
  t.same(report.reordering, { count: 4, survivedSeq: 25, earliestLostSeq: 17 })
  t.match(report.files?.records, [{ seq: 22, lengthBytes: 0, detail: /rec-22 is empty/ }])
})

t.test('the control (none): its losses pass, nothing lost is inconclusive, its superblock lost fails', async (t) => {
  const lossy = honestRun(t, { method: 'none' })
  execFileSync('rm', [join(lossy.path, 'rec-25')])
  const lost = await judge(lossy)
  t.match(lost, { role: 'control', verdict: 'pass', lost: 1 })
  t.equal(listenerObjection(lost), undefined)

  const kept = craftFilesMeta('f000000000000004', join(testDir(t), 'kept'), keep, { method: 'none' })
  writeFilesRun(kept, range(16, 25))
  t.match(await judge(kept), { role: 'control', verdict: 'inconclusive', lost: 0 })

  const noBlock = craftFilesMeta('f000000000000005', join(testDir(t), 'noblock'), keep, { method: 'none' })
  writeFilesRun(noBlock, range(16, 25), { superblock: false })
  const failed = await judge(noBlock)
  t.match(failed, { role: 'control', verdict: 'fail', superblock: { kind: 'missing', detail: 'the run directory holds no superblock' } })
  t.equal(listenerObjection(failed), undefined)
})

t.test('the superblock: missing, damaged or another run: the run fails', async (t) => {
  const meta = honestRun(t)
  const path = join(meta.path, 'superblock')
  const bytes = readFileSync(path)
  bytes[30] = bytes[30]! ^ 1
  writeFileSync(path, bytes)
  const report = await judge(meta)
  t.match(report, { verdict: 'fail', lost: 0, intact: keep, superblock: { kind: 'damaged' } })
  t.equal(listenerObjection(report), undefined)
})

t.test('the run directory: missing, a file, a symbolic link, a FIFO', async (t) => {
  const dir = testDir(t)
  const missing = craftFilesMeta('f000000000000006', join(dir, 'missing'), keep)
  const gone = await judge(missing)
  t.match(gone, { verdict: 'fail', lost: keep, superseded: acked - keep, superblock: { kind: 'missing' } })
  t.same(
    gone.lostRanges.map((r) => [r.fromSeq, r.toSeq, r.reason]),
    [[16, 25, 'the run directory is missing']],
  )

  const file = craftFilesMeta('f000000000000007', join(dir, 'file'), keep)
  writeFileSync(file.path, 'the user put a file here')
  t.match(await judge(file), { verdict: 'fail', lost: keep, superblock: { kind: 'not-a-directory' } })

  const real = honestRun(t)
  const linked = craftFilesMeta('f000000000000001', join(dir, 'linked'), keep)
  symlinkSync(real.path, linked.path)
  await t.rejects(judge(linked), { constructor: PlugcheckError, exitCode: 3, message: /is a symbolic link, not the directory write made/ })

  const fifo = craftFilesMeta('f000000000000008', join(dir, 'fifo'), keep)
  execFileSync('mkfifo', [fifo.path])
  await t.rejects(judge(fifo), { exitCode: 3, message: /is a FIFO, not a directory/ })
})

t.test('hostile names and entries: never followed, never blocking, strays noted', async (t) => {
  const meta = honestRun(t)
  const outside = join(testDir(t), 'outside')
  writeFileSync(outside, filesRecord(meta, 21))
  execFileSync('rm', [join(meta.path, 'rec-21'), join(meta.path, 'rec-22'), join(meta.path, 'rec-23')])
  symlinkSync(outside, join(meta.path, 'rec-21')) // a good record, out of the directory: not followed
  execFileSync('mkfifo', [join(meta.path, 'rec-22')]) // opening it must not block
  mkdirSync(join(meta.path, 'rec-23'))
  writeFileSync(join(meta.path, 'rec-01'), filesRecord(meta, 1))
  writeFileSync(join(meta.path, 'rec-99999999999999999'), 'x')
  writeFileSync(join(meta.path, 'notes.txt'), 'the user keeps notes here')
  mkdirSync(join(meta.path, 'rec-4')) // a deleted seq's name holding a directory: no file came back
  execFileSync('mkfifo', [join(meta.path, '.rec-24.tmp')])
  const report = await judge(meta)
  t.match(report, { verdict: 'fail', lost: 3, intact: 7, superseded: 15 })
  t.match(report.files, { notAFile: 3, cameBack: 0, strays: 4 })
  t.same(
    report.lostRanges.map((r) => [r.fromSeq, r.toSeq, r.reason]),
    [
      [21, 21, 'its name holds a symbolic link, not a file'],
      [22, 22, 'its name holds a FIFO, not a file'],
      [23, 23, 'its name holds a directory, not a file'],
    ],
  )
  t.same([...(report.files?.strayNames ?? [])].sort(), ['"notes.txt"', '"rec-01"', '"rec-4"', '"rec-99999999999999999"'])
})

t.test('a listener claiming 2^45 acks: judged by arithmetic, at once', async (t) => {
  const meta = craftFilesMeta('f000000000000009', join(testDir(t), 'run'), maxOverwriteSlots)
  writeFilesRun(meta, range(1, 20))
  const started = Date.now()
  const report = await judge(meta, 2 ** 45)
  t.ok(Date.now() - started < 5000, `judged in ${Date.now() - started} ms`)
  t.match(report, {
    verdict: 'fail',
    acked: 2 ** 45,
    lost: maxOverwriteSlots - 1 + 20,
    intact: 0,
    superseded: 2 ** 45 - maxOverwriteSlots - 20 + 1,
    files: { deletedUnacknowledged: 1 },
  })
  t.equal(report.files?.cameBack, 20, 'rec-1..20 were deleted long ago: each is back')
  t.same(
    report.lostRanges.map((r) => [r.fromSeq, r.toSeq]),
    [
      [1, 20],
      [2 ** 45 - maxOverwriteSlots + 2, 2 ** 45],
    ],
  )
  t.equal(listenerObjection(report), undefined)
  await t.rejects(judge(meta, 2 ** 45 + 1), { exitCode: 3, message: /more than any writer can have written/ })
})

t.test('a directory of more entries than the bound: refused with exit 3, nothing judged', async (t) => {
  t.ok(maxFilesRunEntries >= maxOverwriteSlots, 'the bound leaves room for every file a run keeps')
  const meta = honestRun(t)
  for (let i = 0; i < 40; i++) writeFileSync(join(meta.path, `junk-${i}`), '')
  await t.rejects(judge(meta, acked, { maxEntries: 50 }), {
    exitCode: 3,
    message: /holds more than 50 entries, more than a files run makes/,
  })
  t.match(await judge(meta, acked, { maxEntries: 51 }), { verdict: 'pass', files: { strays: 40 } })
})

t.test('the superblock in the directory: a FIFO, a symbolic link or another run: never opened through, the run fails', async (t) => {
  const meta = honestRun(t)
  const block = join(meta.path, 'superblock')
  const good = readFileSync(block)
  execFileSync('rm', [block])
  execFileSync('mkfifo', [block])
  t.match(await judge(meta), {
    verdict: 'fail',
    intact: keep,
    superblock: { kind: 'damaged', detail: "the run directory's superblock is a FIFO, not a file" },
  })

  execFileSync('rm', [block])
  const outside = join(testDir(t), 'outside-superblock')
  writeFileSync(outside, good)
  symlinkSync(outside, block)
  t.match(await judge(meta), { verdict: 'fail', superblock: { kind: 'damaged', detail: /is a symbolic link, not a file/ } })

  execFileSync('rm', [block])
  const other = craftFilesMeta('f00000000000000a', meta.path, keep)
  writeFileSync(block, filesSuperblock(other))
  const report = await judge(meta)
  t.match(report, { verdict: 'fail', intact: keep, superblock: { kind: 'other-run', runId: 'f00000000000000a' } })
  t.equal(listenerObjection(report), undefined)
})

t.test('steps past the last ack deleted acknowledged records: gone as the run recycles, not lost; one more absent is', async (t) => {
  // The writer got to seq 28 (its acks 26..28 never reached the listener): steps 26..28 deleted rec-16..18.
  const meta = craftFilesMeta('f00000000000000b', join(testDir(t), 'ahead'), keep)
  writeFilesRun(meta, range(19, 28))
  const ahead = await judge(meta)
  t.match(ahead, { verdict: 'pass', intact: 10 - 3, lost: 0, superseded: 15 + 3 })
  t.match(ahead.files, { deleted: 15, deletedUnacknowledged: 3, unacknowledged: 3, highestSeq: 28 })
  t.equal(listenerObjection(ahead), undefined)

  // Step 26 under way: its deletion of rec-16 kept, its own file not (no directory sync yet).
  const partial = craftFilesMeta('f00000000000000c', join(testDir(t), 'partial'), keep)
  writeFilesRun(partial, range(17, 25))
  t.match(await judge(partial), { verdict: 'pass', intact: 9, lost: 0, superseded: 16, files: { deletedUnacknowledged: 1 } })

  // The same, and rec-17 gone too: nothing explains it.
  execFileSync('rm', [join(partial.path, 'rec-17')])
  const lost = await judge(partial)
  t.match(lost, { verdict: 'fail', intact: 8, lost: 1, superseded: 16, files: { deletedUnacknowledged: 1 } })
  t.match(lost.lostRanges, [{ fromSeq: 17, toSeq: 17, reason: 'the file is missing' }])

  // A temporary file shows how far the writer got as well: .rec-27.tmp means steps through 26 ran.
  const temp = craftFilesMeta('f00000000000000d', join(testDir(t), 'temp'), keep)
  writeFilesRun(temp, range(18, 25))
  writeFileSync(join(temp.path, '.rec-27.tmp'), filesRecord(temp, 27))
  t.match(await judge(temp), { verdict: 'pass', intact: 8, superseded: 17, files: { deletedUnacknowledged: 2, highestSeq: 27 } })

  // Fewer acks than the window: no step deletes anything, every absence is a loss.
  const young = craftFilesMeta('f00000000000000e', join(testDir(t), 'young'), keep)
  writeFilesRun(young, range(2, 9))
  t.match(await judge(young, 9), { verdict: 'fail', lost: 1, files: { deletedUnacknowledged: 0 } })
})

t.test('nothing acknowledged: inconclusive whatever the directory holds; a stray name with control bytes is printed escaped', async (t) => {
  const meta = craftFilesMeta('f00000000000000f', join(testDir(t), 'idle'), keep)
  writeFilesRun(meta, [1, 2])
  writeFileSync(join(meta.path, 'evil\n\u001b[31mname'), 'x')
  const report = await judge(meta, 0)
  t.match(report, { verdict: 'inconclusive', acked: 0, intact: 0, lost: 0, superseded: 0, files: { unacknowledged: 2, strays: 1 } })
  t.same(report.files?.strayNames, ['"evil\\n\\u001b[31mname"'])
  t.notOk(
    report.files?.strayNames.some((name) => /[\u0000-\u001f]/.test(name)),
    'no control byte in a listed name',
  )
})
