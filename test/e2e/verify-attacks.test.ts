/**
 * Verdicts an attack on verify got wrong, each now pinned: a run verified while its writer is still
 * writing, a control whose file is gone, a superblock with stray bytes, a file replaced by a later run
 * that reported elsewhere, and claim order that is the listener's, not the wall clock's.
 */
import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { closeSync, openSync, writeSync, rmSync } from 'node:fs'
import { craftClaim, craftMeta, craftRun, fakeListener, listenerWith, range, writeDataFile } from '../fixtures/crafted-run.js'
import { runCli, runInProcess, startListener, tempDir } from '../fixtures/cli.js'

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
  const text = await runInProcess([
    'verify',
    '--server',
    await listenerWith(t, [sameBoot], [craftClaim(sameBoot, { live: true })]),
    '--file',
    file,
  ])
  t.match(text.stdout, /NOT JUDGED: run 7000000000000001 \(fdatasync\) is still being written/)
  t.notMatch(text.stdout, /FAIL/)

  const otherBoot = craftRun(meta, 50, { writer: { bootId: '00000000-0000-0000-0000-000000000000', fingerprint: null } })
  const rebooted = await verify(await listenerWith(t, [otherBoot], [craftClaim(otherBoot, { live: true })]), file)
  t.equal(rebooted.code, 1, 'the machine rebooted: the writer is gone whatever the listener thinks, so the run is judged')
  t.match(rebooted.report.runs[0], { rebootedSinceWrite: true, corrupt: 1 })
})

t.test('a control whose file is gone or replaced cannot show the cut: it lost a synced creation', async (t) => {
  const dir = tempDir(t)
  const tested = craftMeta('7000000000000011', join(dir, 'data.fdatasync'), {
    groupId: '7000000000000010',
    requestedPath: join(dir, 'data'),
  })
  const control = craftMeta('7000000000000012', join(dir, 'data.none'), {
    groupId: '7000000000000010',
    method: 'none',
    requestedPath: join(dir, 'data'),
  })
  writeDataFile(tested, range(1, 20), { sizeSlots: 20 })
  writeDataFile(control, range(1, 20), { sizeSlots: 20 })
  const runs = [craftRun(tested, 20), craftRun(control, 20)]
  const server = await listenerWith(t, runs)
  t.equal((await verify(server, join(dir, 'data'))).code, 4, 'no cut: the control lost nothing, inconclusive')
  rmSync(control.path)
  const gone = await verify(server, join(dir, 'data'))
  t.equal(gone.code, 1, "a deleted control file is a lost synced creation: fail, and never 'the cut was real'")
  t.match(
    gone.report.runs.find((r: { role: string }) => r.role === 'control'),
    { verdict: 'fail', lost: 20 },
  )
  const text = await runInProcess(['verify', '--server', server, '--file', join(dir, 'data')])
  t.match(text.stdout, /FAIL: the control's \(none\) file, created and fsynced before any record, is gone or replaced/)
  t.notMatch(text.stdout, /: the cut was real/)
  writeDataFile({ ...control, runId: '70000000000000ff', groupId: '70000000000000ff' }, [], { sizeSlots: 20 }) // another write's run
  t.equal((await verify(server, join(dir, 'data'))).code, 1, "a control file holding another run's superblock fails the same way")
})

t.test('every byte of the superblock is checked', async (t) => {
  const file = join(tempDir(t), 'data')
  const meta = craftMeta('7000000000000021', file)
  const server = await listenerWith(t, [craftRun(meta, 10)])
  for (const [name, offset] of [
    ['reserved field', 10],
    ['zero tail', 400],
    ['last byte of the block', 511],
  ] as const) {
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
  writeDataFile({ ...judged, runId: '7000000000000032', groupId: '7000000000000032', createdMs: judged.createdMs + 5000 }, range(1, 3), {
    sizeSlots: 10,
  })
  const later = await verify(server, file)
  t.equal(later.code, 2)
  t.match(later.report, { verdict: 'not-judged', reason: 'superseded', detail: /7000000000000032.*another listener/ })
  // An older run in the file is what a cut that lost the new file's creation leaves: that is a loss.
  writeDataFile({ ...judged, runId: '7000000000000030', groupId: '7000000000000030', createdMs: judged.createdMs - 5000 }, range(1, 3), {
    sizeSlots: 10,
  })
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
  const secondRun = {
    ...craftRun(second, 5),
    announcedMs: first.createdMs - 30_000,
    spans: [[1, 5, first.createdMs - 29_000, first.createdMs - 28_000]] as [number, number, number, number][],
  }
  writeDataFile(second, range(1, 5), { sizeSlots: 10 })
  const server = await listenerWith(t, [firstRun, secondRun], [craftClaim(secondRun), craftClaim(firstRun)])
  const old = await verify(server, file, ['--run', first.runId])
  t.equal(old.code, 2, 'the first run was replaced by the second, which the listener lists as newer')
  t.match(old.report, { verdict: 'not-judged', reason: 'superseded', detail: /superseded by run 7000000000000042/ })
})

t.test('a file replaced later under another host name or spelling of the path is not a loss', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'data')
  const judged = craftMeta('7000000000000051', file)
  const server = await listenerWith(t, [craftRun(judged, 10)])
  for (const [name, over] of [
    ['another spelling of the path', { requestedPath: join(dir, 'link', 'data') }],
    ['another host name', { host: 'renamed-host' }],
  ] as const) {
    writeDataFile({ ...judged, runId: '7000000000000052', createdMs: judged.createdMs + 5000, ...over }, range(1, 3), { sizeSlots: 10 })
    const result = await verify(server, file)
    t.equal(result.code, 2, `${name}: not judged`)
    t.match(result.report, { verdict: 'not-judged', reason: 'superseded', detail: /7000000000000052/ })
  }
})

t.test('a data file whose file system is not there is an operating error, not a loss', async (t) => {
  const dir = tempDir(t)
  const missingDir = craftMeta('7000000000000061', join(dir, 'unmounted', 'data'))
  const gone = await runInProcess(['verify', '--server', await listenerWith(t, [craftRun(missingDir, 10)]), '--file', missingDir.path])
  t.equal(gone.code, 3)
  t.match(gone.stderr, /the directory .*unmounted of run 7000000000000061's data file does not exist: is its file system mounted\?/)

  const elsewhere = craftMeta('7000000000000062', join(dir, 'data'))
  writeDataFile(elsewhere, [], { sizeSlots: 10 })
  const fingerprint = {
    os: { platform: 'linux', kernel: 'k', kernelVersion: 'v', arch: 'x64', distribution: null },
    bootId: null,
    virtualMachine: false,
    target: {
      path: dir,
      fileSystem: {
        type: 'ext4',
        magic: '0xef53',
        mountPoint: '/mnt/plugcheck-under-test',
        source: '/dev/vdz1',
        mountOptions: [],
        superOptions: [],
      },
      inMemory: false,
    },
    device: null,
  }
  const run = craftRun(elsewhere, 10, { writer: { bootId: null, fingerprint } })
  const unmounted = await runInProcess(['verify', '--server', await listenerWith(t, [run]), '--file', elsewhere.path])
  t.equal(unmounted.code, 3, 'the path now leads to another file system: exit 3, not a FAIL')
  t.match(
    unmounted.stderr,
    /was written on the file system mounted at \/mnt\/plugcheck-under-test \(ext4 on \/dev\/vdz1\), but .* is now on the one mounted at /,
  )
})

t.test('a later write that never created its file does not hide the earlier run the file still holds', async (t) => {
  const file = join(tempDir(t), 'data')
  const earlier = craftMeta('7000000000000071', file)
  const later = craftMeta('7000000000000072', file, { createdMs: earlier.createdMs + 10_000 })
  writeDataFile(earlier, range(1, 5), { sizeSlots: 10 }) // 10 acknowledged, 5 survived: a real loss
  const earlierRun = craftRun(earlier, 10)
  const failedToStart = { reason: 'error' as const, detail: 'could not start: EROFS', atMs: later.createdMs + 10 }
  for (const [end, code, name] of [
    [failedToStart, 1, 'the writer reported it stopped before its first record: the earlier run is judged, and its loss is real'],
    [
      { reason: 'vanished' as const, atMs: later.createdMs + 10 },
      4,
      'cut before its first ack: its file may have been created, so the latest run is judged (nothing acknowledged)',
    ],
  ] as const) {
    const laterRun = { ...craftRun(later, 0), announcedMs: later.createdMs, end }
    const claims = [craftClaim(laterRun), craftClaim(earlierRun)]
    // The latest group for a plain query, any run by id, as a listener answers.
    const server = await fakeListener(t, (query) => ({
      type: 'runs',
      runs: query.runId === undefined ? [laterRun] : [laterRun, earlierRun].filter((r) => r.meta.runId === query.runId),
      claims,
    }))
    const result = await verify(server, file)
    t.equal(result.code, code, name)
    if (code === 1) {
      t.match(result.report.runs[0], { runId: earlier.runId, lost: 5, intact: 5 })
      t.match(result.report.notes, [/the latest run \(7000000000000072\) stopped before its first record \(could not start: EROFS\)/])
    }
  }
})

t.test('a group member whose acks are missing is an error, never a pass of the rest', async (t) => {
  const dir = tempDir(t)
  const requested = join(dir, 'data')
  const tested = craftMeta('7000000000000081', `${requested}.fdatasync`, { groupId: '7000000000000080', requestedPath: requested })
  const control = craftMeta('7000000000000082', `${requested}.none`, {
    groupId: '7000000000000080',
    method: 'none',
    requestedPath: requested,
  })
  writeDataFile(tested, [], { sizeSlots: 20 })
  writeDataFile(control, [], { sizeSlots: 20 })
  const result = await runInProcess(['verify', '--server', await listenerWith(t, [craftRun(control, 20)]), '--file', requested])
  t.equal(result.code, 3)
  t.match(result.stderr, /data\.fdatasync holds run 7000000000000081 \(fdatasync\) of this group, but the listener .* has no acks for it/)
})

t.test("a run announced with the listener's token from a new address is judged: a lost creation stays a FAIL", async (t) => {
  const file = join(tempDir(t), 'data')
  const earlier = craftMeta('7000000000000091', file)
  const latest = craftMeta('7000000000000092', file, { createdMs: earlier.createdMs + 10_000 })
  writeDataFile(earlier, range(1, 10), { sizeSlots: 10 }) // the cut lost the latest run's file creation
  const earlierRun = craftRun(earlier, 10, { peer: '10.0.0.7' })
  for (const [authenticated, code, name] of [
    [false, 2, 'no token: a stranger may have announced the latest run, so nothing is judged'],
    [true, 1, 'with the token: the new address is the same writer after a reboot, and its loss is real'],
  ] as const) {
    const latestRun = { ...craftRun(latest, 5, { peer: '10.0.0.99' }), announcedMs: latest.createdMs, authenticated }
    const server = await fakeListener(t, (query) => ({
      type: 'runs',
      runs: query.runId === undefined ? [latestRun] : [latestRun, earlierRun].filter((r) => r.meta.runId === query.runId),
      claims: [craftClaim(latestRun, { authenticated }), craftClaim(earlierRun)],
    }))
    const result = await verify(server, file)
    t.equal(result.code, code, name)
  }
})

t.test('a real listener with --token stores its runs as authenticated', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'), ['--token', 'sesame'])
  t.teardown(() => listener.kill())
  const file = join(dir, 'data')
  t.equal(
    (await runCli(['write', '--server', listener.server, '--file', file, '--size', '1MiB', '--duration', '0.3', '--token', 'sesame'])).code,
    0,
  )
  const result = await runInProcess(['verify', '--server', listener.server, '--file', file, '--token', 'sesame', '--json'])
  t.equal(result.code, 0)
  t.match(JSON.parse(result.stdout).claims, [{ authenticated: true }])
})

t.test('runs of one group from two addresses are contested, not judged', async (t) => {
  const dir = tempDir(t)
  const requested = join(dir, 'data')
  const honest = craftMeta('70000000000000a1', `${requested}.fdatasync`, { groupId: '70000000000000a0', requestedPath: requested })
  const joined = craftMeta('70000000000000a2', `${requested}.fsync`, {
    groupId: '70000000000000a0',
    method: 'fsync',
    requestedPath: requested,
  })
  writeDataFile(honest, range(1, 10), { sizeSlots: 10 })
  const runs = [craftRun(joined, 100, { peer: '127.0.0.2' }), craftRun(honest, 10, { peer: '127.0.0.1' })]
  const result = await verify(await listenerWith(t, runs), requested)
  t.equal(result.code, 2, 'a stranger who joined the group does not make healthy storage FAIL')
  t.match(result.report, { verdict: 'not-judged', reason: 'conflicting-claims', detail: /announced from 2 addresses/ })
})

t.test('a flood of claims cannot push the run the file holds out of sight', async (t) => {
  const file = join(tempDir(t), 'data')
  const honest = craftMeta('70000000000000b1', file)
  writeDataFile(honest, range(1, 10), { sizeSlots: 10 })
  const honestRun = craftRun(honest, 10, { peer: '127.0.0.1' })
  const flood = Array.from({ length: 64 }, (_, i) => {
    const meta = craftMeta(`70000000000000${(0xc0 + i).toString(16)}`, file, { createdMs: honest.createdMs - 1000 })
    return { ...craftRun(meta, i === 0 ? 50 : 0, { peer: '127.0.0.2' }), announcedMs: honest.createdMs + 1000 + i }
  })
  const latest = flood[0]!
  const server = await fakeListener(t, (query) => ({
    type: 'runs',
    runs: query.runId === undefined ? [latest] : [honestRun, ...flood].filter((r) => r.meta.runId === query.runId),
    claims: flood.map((r) => craftClaim(r)), // the newest 64: the honest run is not among them
  }))
  const result = await verify(server, file)
  t.equal(result.code, 2, 'contested: the file holds a run announced from another address')
  t.match(result.report, { reason: 'conflicting-claims', detail: /the file holds run 70000000000000b1, announced from 127\.0\.0\.1/ })
  t.ok(
    result.report.claims.some((c: { runId: string }) => c.runId === honest.runId),
    'the honest run is looked up and listed',
  )
})
