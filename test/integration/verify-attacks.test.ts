/**
 * Verdicts an attack on verify got wrong, each now pinned: a run verified while its writer is still
 * writing, a control whose file is gone, a superblock with stray bytes, a file replaced by a later run
 * that reported elsewhere, and claim order that is the listener's, not the wall clock's.
 */
import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { closeSync, openSync, writeSync, rmSync } from 'node:fs'
import { craftClaim, craftMeta, craftRun, listenerWith, range, writeDataFile } from '../fixtures/crafted-run.js'
import { runInProcess, tempDir } from '../fixtures/cli.js'

const thisBootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()

async function verify(server: string, file: string, extra: string[] = []) {
  const result = await runInProcess(['verify', '--server', server, '--file', file, '--json', ...extra])
  return { code: result.code, report: JSON.parse(result.stdout || '{}'), stderr: result.stderr }
}

t.test('a run whose writer is still connected is not judged, unless this machine rebooted since', async (t) => {
  const file = join(tempDir(t), 'data')
  const meta = craftMeta('7000000000000001', file)
  writeDataFile(meta, range(1, 50), { sizeSlots: 50 })
  // Record 50 half-written as a live writer would leave it: a healthy run mid-copy.
  const fd = openSync(file, 'r+')
  writeSync(fd, Buffer.alloc(256, 0x55), 0, 256, 512 * 50 + 128)
  closeSync(fd)
  const sameBoot = craftRun(meta, 50, { writer: { bootId: thisBootId, fingerprint: null } })
  const live = await verify(await listenerWith(t, [sameBoot], [craftClaim(sameBoot, { live: true })]), file)
  t.equal(live.code, 2, 'exit 2: nothing judged, no storage blamed')
  t.match(live.report, { verdict: 'not-judged', reason: 'still-running' })
  const text = await runInProcess(['verify', '--server', await listenerWith(t, [sameBoot], [craftClaim(sameBoot, { live: true })]), '--file', file])
  t.match(text.stdout, /NOT JUDGED: run 7000000000000001 \(fdatasync\) is still being written/)
  t.notMatch(text.stdout, /FAIL/)

  const otherBoot = craftRun(meta, 50, { writer: { bootId: '00000000-0000-0000-0000-000000000000', fingerprint: null } })
  const rebooted = await verify(await listenerWith(t, [otherBoot], [craftClaim(otherBoot, { live: true })]), file)
  t.equal(rebooted.code, 1, 'the machine rebooted: the writer is gone whatever the listener thinks, so the run is judged')
  t.match(rebooted.report.runs[0], { rebootedSinceWrite: true, corrupt: 1 })
})

t.test("a control whose file is gone or replaced cannot show the cut", async (t) => {
  const dir = tempDir(t)
  const tested = craftMeta('7000000000000011', join(dir, 'data.fdatasync'), { groupId: '7000000000000010', requestedPath: join(dir, 'data') })
  const control = craftMeta('7000000000000012', join(dir, 'data.none'), { groupId: '7000000000000010', method: 'none', requestedPath: join(dir, 'data') })
  writeDataFile(tested, range(1, 20), { sizeSlots: 20 })
  writeDataFile(control, range(1, 20), { sizeSlots: 20 })
  const runs = [craftRun(tested, 20), craftRun(control, 20)]
  const server = await listenerWith(t, runs)
  t.equal((await verify(server, join(dir, 'data'))).code, 4, 'no cut: the control lost nothing, inconclusive')
  rmSync(control.path)
  const gone = await verify(server, join(dir, 'data'))
  t.equal(gone.code, 4, 'a deleted control file is not a real cut')
  t.match(gone.report.runs.find((r: { role: string }) => r.role === 'control'), { verdict: 'inconclusive', lost: 20 })
  const text = await runInProcess(['verify', '--server', server, '--file', join(dir, 'data')])
  t.match(text.stdout, /file is gone or replaced/)
  t.notMatch(text.stdout, /: the cut was real/)
  writeDataFile({ ...control, runId: '70000000000000ff' }, [], { sizeSlots: 20 })
  t.equal((await verify(server, join(dir, 'data'))).code, 4, "a control file holding another run's superblock is not a real cut either")
})

t.test('every byte of the superblock is checked', async (t) => {
  const file = join(tempDir(t), 'data')
  const meta = craftMeta('7000000000000021', file)
  const server = await listenerWith(t, [craftRun(meta, 10)])
  for (const [name, offset] of [['reserved field', 10], ['zero tail', 400], ['last byte of the block', 511]] as const) {
    writeDataFile(meta, range(1, 10), { sizeSlots: 10 })
    t.equal((await verify(server, file)).code, 0, `${name}: clean first`)
    const fd = openSync(file, 'r+')
    writeSync(fd, Buffer.from([0x01]), 0, 1, offset)
    closeSync(fd)
    const damaged = await verify(server, file)
    t.equal(damaged.code, 1, `${name}: a damaged superblock fails`)
    t.match(damaged.report.runs[0].superblock, { kind: 'damaged' })
  }
})

t.test('a file replaced by a later run of this path that reported elsewhere is not judged as a loss', async (t) => {
  const file = join(tempDir(t), 'data')
  const judged = craftMeta('7000000000000031', file)
  const server = await listenerWith(t, [craftRun(judged, 10)])
  writeDataFile({ ...judged, runId: '7000000000000032', createdMs: judged.createdMs + 5000 }, range(1, 3), { sizeSlots: 10 })
  const later = await verify(server, file)
  t.equal(later.code, 2)
  t.match(later.report, { verdict: 'not-judged', reason: 'superseded', detail: /7000000000000032.*another listener/ })
  // An older run in the file is what a cut that lost the new file's creation leaves: that is a loss.
  writeDataFile({ ...judged, runId: '7000000000000030', createdMs: judged.createdMs - 5000 }, range(1, 3), { sizeSlots: 10 })
  const older = await verify(server, file)
  t.equal(older.code, 1)
  t.match(older.report.runs[0], { lost: 10, superblock: { kind: 'other-run' } })
})

t.test("--run uses the listener's order of claims, not announcement clocks", async (t) => {
  const file = join(tempDir(t), 'data')
  const first = craftMeta('7000000000000041', file)
  const second = craftMeta('7000000000000042', file, { createdMs: first.createdMs + 1000 })
  // The listener's clock stepped back: the later run carries an earlier announcement time.
  const firstRun = craftRun(first, 10)
  const secondRun = { ...craftRun(second, 5), announcedMs: first.createdMs - 30_000, spans: [[1, 5, first.createdMs - 29_000, first.createdMs - 28_000]] as [number, number, number, number][] }
  writeDataFile(second, range(1, 5), { sizeSlots: 10 })
  const server = await listenerWith(t, [firstRun, secondRun], [craftClaim(secondRun), craftClaim(firstRun)])
  const old = await verify(server, file, ['--run', first.runId])
  t.equal(old.code, 2, 'the first run was replaced by the second, which the listener lists as newer')
  t.match(old.report, { verdict: 'not-judged', reason: 'superseded', detail: /superseded by run 7000000000000042/ })
})
