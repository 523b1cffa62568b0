/**
 * `plugcheck verify --file DIR` of a files run (`--pattern files`): run directories made by hand from
 * record/files-layout.ts with the real record code, acks served by a stand-in listener on 127.0.0.1.
 * Verdicts, exit codes, the words and the JSON of each outcome, a group of two methods (with its
 * control) found by the path given to write or by a member's directory, and hostile places, in
 * process and as a real child process.
 */
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { symlinkSync, truncateSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import {
  craftClaim,
  craftFilesMeta,
  craftRun,
  fakeListener,
  filesRecord,
  listenerWith,
  range,
  writeFilesRun,
} from '../fixtures/crafted-run.js'
import { runCli, runInProcess, startListener, tempDir } from '../fixtures/cli.js'
import { recordRun } from '../fixtures/store-fixture.js'
import { AckStore } from '../../src/store/ack-store.js'

const verify = (server: string, file: string, ...extra: string[]) => runInProcess(['verify', '--server', server, '--file', file, ...extra])
const json = async (server: string, file: string, ...extra: string[]) => {
  const result = await verify(server, file, '--json', ...extra)
  return { code: result.code, report: JSON.parse(result.stdout), stderr: result.stderr }
}

const keep = 10
const acked = 25

t.test('an honest directory: PASS, exit 0, in words and JSON', async (t) => {
  const dir = join(tempDir(t), 'run')
  const meta = craftFilesMeta('e100000000000001', dir, keep)
  writeFilesRun(meta, range(16, 26)) // 26: made, never acknowledged
  const server = await listenerWith(t, [craftRun(meta, acked)])
  const text = await verify(server, dir)
  t.equal(text.code, 0)
  t.match(
    text.stdout,
    /^PASS: all 25 acknowledged records of run e100000000000001 \(fdatasync, files, 1 KiB records, .*\) survived: the latest 10 intact, the 15 before them deleted as the run recycles its files\./,
  )
  t.match(text.stdout, /1 files of records never acknowledged: not judged/)
  const { code, report } = await json(server, dir)
  t.equal(code, 0)
  t.match(report.runs[0], {
    verdict: 'pass',
    pattern: 'files',
    acked,
    intact: 10,
    superseded: 15,
    lost: 0,
    files: { keep, deleted: 15, renameLost: 0, zeroLength: 0, short: 0, cameBack: 0, unacknowledged: 1 },
  })
})

t.test('each way a files run loses: FAIL, exit 1, each named', async (t) => {
  const dir = join(tempDir(t), 'run')
  const meta = craftFilesMeta('e100000000000002', dir, keep)
  writeFilesRun(meta, range(16, 25))
  execFileSync('mv', [join(dir, 'rec-17'), join(dir, '.rec-17.tmp')]) // rename lost
  truncateSync(join(dir, 'rec-19'), 0) // zero-length
  truncateSync(join(dir, 'rec-20'), 300) // short
  writeFileSync(join(dir, 'rec-21'), filesRecord(meta, 11)) // another seq's record
  writeFileSync(join(dir, 'rec-5'), filesRecord(meta, 5)) // a deleted one back
  execFileSync('rm', [join(dir, 'rec-23')]) // lost
  const server = await listenerWith(t, [craftRun(meta, acked)])

  const { code, report } = await json(server, dir)
  t.equal(code, 1)
  const run = report.runs[0]
  t.match(run, { verdict: 'fail', acked, intact: 5, lost: 5, corrupt: 1, torn: 0, superseded: 14 })
  t.match(run.files, { renameLost: 1, zeroLength: 1, short: 1, cameBack: 1 })
  t.same(
    run.lostRanges.map((r: { fromSeq: number; reason: string }) => [r.fromSeq, r.reason.split(':')[0]]),
    [
      [5, 'a deleted record file came back'],
      [17, 'rename lost'],
      [19, 'zero-length file'],
      [20, 'short file'],
      [23, 'the file is missing'],
    ],
  )
  t.match(run.corruptRecords, [{ seq: 21, detail: /rec-21 holds record 11, not record 21/ }])

  const text = await verify(server, dir)
  t.equal(text.code, 1)
  t.match(
    text.stdout,
    /^FAIL: 6 of 25 acknowledged records of run e100000000000002 \(fdatasync, files, 1 KiB records, .*\) did not survive: 5 lost, 0 torn, 1 corrupt\./,
  )
  t.match(
    text.stdout,
    /record files: 1 rename lost \(there only under the temporary name \.rec-SEQ\.tmp: the rename was not kept\); 1 zero-length \(the name survived, the data did not\); 1 short \(the name survived with part of the data\); 1 deleted and back \(the acknowledged deletion was not kept\)\./,
  )
  t.match(text.stdout, /rec-19 is empty: the name survived, the data did not/)
  t.match(text.stdout, /rec-20 holds 300 of the record's 1024 bytes/)
  t.match(text.stdout, /lost seq 17: rename lost: the record is there only under its temporary name; acknowledged/)
  t.match(text.stdout, /corrupt seq 21 at offset 0, 1024 bytes: rec-21 holds record 11, not record 21/)
})

t.test('a group of two methods with the control: PASS when the control lost; by the path or by a member directory', async (t) => {
  const base = join(tempDir(t), 'run')
  const group = 'e100000000000003'
  const synced = craftFilesMeta(group, `${base}.fdatasync`, keep, { requestedPath: base })
  const control = craftFilesMeta('e100000000000004', `${base}.none`, keep, { groupId: group, requestedPath: base, method: 'none' })
  writeFilesRun(synced, range(16, 25))
  writeFilesRun(control, range(16, 22)) // 23..25 lost: unsynced
  const runs = [craftRun(synced, acked), craftRun(control, acked)]
  // A listener that knows the runs by the path given to write, as the real one does.
  const server = await fakeListener(t, (query) => {
    const found = runs.filter((r) => r.meta.requestedPath === query.requestedPath)
    return { type: 'runs', runs: found, claims: found.map((r) => craftClaim(r)) }
  })

  const { code, report } = await json(server, base)
  t.equal(code, 0)
  t.equal(report.verdict, 'pass')
  t.match(report.runs, [
    { method: 'fdatasync', verdict: 'pass', intact: 10 },
    { method: 'none', role: 'control', verdict: 'pass', lost: 3 },
  ])
  const text = await verify(server, base)
  t.match(text.stdout, /^PASS: every acknowledged record of the tested method survived, and the control lost records: the cut was real\./)

  // The directory `ls` shows: its superblock names the write, which is judged whole.
  const byMember = await json(server, `${base}.fdatasync`)
  t.equal(byMember.code, 0)
  t.equal(byMember.report.runs.length, 2)
  t.match(byMember.report.notes.join('\n'), /is the fdatasync data file of the write to/)

  // The tested one loses a file: FAIL, exit 1, whatever the control did.
  execFileSync('rm', [join(synced.path, 'rec-24')])
  const failed = await json(server, base)
  t.equal(failed.code, 1)
  t.match(failed.report.runs[0], { method: 'fdatasync', verdict: 'fail', lost: 1 })
})

t.test('the control alone lost nothing: INCONCLUSIVE, exit 4', async (t) => {
  const dir = join(tempDir(t), 'run')
  const meta = craftFilesMeta('e100000000000005', dir, keep, { method: 'none' })
  writeFilesRun(meta, range(16, 25))
  const server = await listenerWith(t, [craftRun(meta, acked)])
  const text = await verify(server, dir)
  t.equal(text.code, 4)
  t.match(text.stdout, /^INCONCLUSIVE: control \(none\): all 25 unsynced records survived, it lost nothing/)
})

t.test('a real child: an honest directory passes, hostile places give a verdict or exit 3, never a hang', async (t) => {
  const root = tempDir(t)
  const dir = join(root, 'run')
  const meta = craftFilesMeta('e100000000000006', dir, keep)
  writeFilesRun(meta, range(16, 25))
  execFileSync('rm', [join(dir, 'rec-25')])
  execFileSync('mkfifo', [join(dir, 'rec-25')])
  writeFileSync(join(dir, 'rec-99999999999999999'), 'x')
  const server = await listenerWith(t, [craftRun(meta, acked)])
  const child = await runCli(['verify', '--server', server, '--file', dir, '--json'], 30_000)
  t.equal(child.code, 1, child.stderr)
  t.match(JSON.parse(child.stdout).runs[0], { verdict: 'fail', lost: 1, intact: 9, files: { notAFile: 1, strays: 1 } })

  // A listener claiming 2^45 acks within a minute: refused as the wire's bad frame, exit 3 (judge-files.test.ts judges such a claim by arithmetic).
  const huge = await listenerWith(t, [craftRun(meta, 2 ** 45)])
  const claimed = await runCli(['verify', '--server', huge, '--file', dir, '--json'], 30_000)
  t.equal(claimed.code, 3, claimed.stderr)
  t.match(claimed.stderr, /more than a writer can have written/)

  // The run's place a symbolic link to a directory: refused, exit 3, nothing followed.
  const linkPath = join(root, 'linked')
  symlinkSync(dir, linkPath)
  const linkedMeta = craftFilesMeta('e100000000000007', linkPath, keep)
  const linked = await runCli(['verify', '--server', await listenerWith(t, [craftRun(linkedMeta, acked)]), '--file', linkPath], 30_000)
  t.equal(linked.code, 3)
  t.match(linked.stderr, /is a symbolic link to a directory, not the directory write made/)

  // A FIFO where the directory was: exit 3, not a hang.
  const fifoPath = join(root, 'fifo')
  execFileSync('mkfifo', [fifoPath])
  const fifoMeta = craftFilesMeta('e100000000000008', fifoPath, keep)
  const fifo = await runCli(['verify', '--server', await listenerWith(t, [craftRun(fifoMeta, acked)]), '--file', fifoPath], 30_000)
  t.equal(fifo.code, 3)
  t.match(fifo.stderr, /fifo/i)
})

t.test('offline from a listener directory (--acks) and by run id (--run): the same judgement', async (t) => {
  const root = tempDir(t)
  const dir = join(root, 'run')
  const meta = craftFilesMeta('e100000000000009', dir, keep)
  writeFilesRun(meta, range(16, 25))
  truncateSync(join(dir, 'rec-21'), 0)
  const listenerDir = join(root, 'listener')
  const store = await AckStore.open(listenerDir)
  await recordRun(store, meta, acked, 'vanished')
  await store.close()

  const offline = await runInProcess(['verify', '--acks', listenerDir, '--file', dir, '--json'])
  t.equal(offline.code, 1, offline.stderr)
  t.match(JSON.parse(offline.stdout).runs[0], { runId: meta.runId, verdict: 'fail', lost: 1, intact: 9, files: { zeroLength: 1 } })

  const byId = await runInProcess(['verify', '--acks', listenerDir, '--file', dir, '--run', meta.runId])
  t.equal(byId.code, 1, byId.stderr)
  t.match(byId.stdout, /^FAIL: 1 of 25 acknowledged records of run e100000000000009/)
  t.match(byId.stdout, /lost seq 21: zero-length file: the name survived, the data did not/)
})

t.test('written without the directory sync, published by link: the same judgement, the report says what was not asked', async (t) => {
  const dir = join(tempDir(t), 'run')
  const meta = craftFilesMeta('e10000000000000a', dir, keep, { files: { dirSync: false, publish: 'link' } })
  writeFilesRun(meta, range(16, 25))
  // link, then unlink of the temporary name: a kept link with its temporary name still there is intact.
  writeFileSync(join(dir, '.rec-24.tmp'), filesRecord(meta, 24))
  const server = await listenerWith(t, [craftRun(meta, acked)])
  const kept = await json(server, dir)
  t.equal(kept.code, 0)
  t.match(kept.report.runs[0], { verdict: 'pass', intact: 10, files: { dirSync: false, publish: 'link', renameLost: 0 } })

  execFileSync('rm', [join(dir, 'rec-22')])
  const text = await verify(server, dir)
  t.equal(text.code, 1)
  t.match(text.stdout, /^FAIL: 1 of 25 acknowledged records/)
  t.match(
    text.stdout,
    /Written without a directory sync \(--no-dir-sync\): fdatasync made each file's data durable, nothing asked the stack to keep its name or its deletion, and it did not\./,
  )
  t.notMatch(text.stdout, /reported these writes durable/)
})

t.test('a real listener stores the verdict; report counts each kind of loss of a files run as lost', async (t) => {
  const root = tempDir(t)
  const dir = join(root, 'run')
  const meta = craftFilesMeta('e10000000000000b', dir, keep)
  writeFilesRun(meta, range(16, 25))
  execFileSync('mv', [join(dir, 'rec-18'), join(dir, '.rec-18.tmp')]) // rename lost
  truncateSync(join(dir, 'rec-19'), 0) // zero-length
  writeFileSync(join(dir, 'rec-3'), filesRecord(meta, 3)) // came back
  const store = join(root, 'listener')
  const acks = await AckStore.open(store)
  await recordRun(acks, meta, acked, 'vanished', { peer: '127.0.0.1' })
  await acks.close()
  const listener = await startListener(store)
  t.teardown(() => listener.kill())

  const verified = await runCli(['verify', '--server', listener.server, '--file', dir], 30_000)
  t.equal(verified.code, 1, verified.stderr)
  t.equal(verified.stderr, '', 'the listener took the verdict')

  const report = await runCli(['report', '--dir', store], 30_000)
  t.equal(report.code, 0, report.stderr)
  const row = report.stdout.split('\n').find((l) => l.startsWith(`  ${meta.runId} `)) ?? ''
  t.match(row, new RegExp(`${dir} +fdatasync +vanished +25 +3 +0 +0 +fail`), 'acked 25, lost 3 (rename lost, zero-length, came back), FAIL')
})

t.test("the listener's metadata of a files run disagrees with its directory's superblock: exit 3, named, nothing judged", async (t) => {
  const dir = join(tempDir(t), 'run')
  const meta = craftFilesMeta('e10000000000000c', dir, keep)
  writeFilesRun(meta, range(16, 25))
  const damaged = { ...meta, files: { dirSync: false, publish: 'rename' as const } }
  const server = await listenerWith(t, [craftRun(damaged, acked)])
  const result = await verify(server, `${dir}/`)
  t.equal(result.code, 3)
  t.match(
    result.stderr,
    /describes run e10000000000000c otherwise than the checksummed superblock of its data file .*: files is \{"dirSync":false,"publish":"rename"\} at the listener, \{"dirSync":true,"publish":"rename"\} in the file; nothing was judged/,
  )
  t.equal(result.stdout, '')
})
