/**
 * Verify against crafted runs: data files written with the real format code, acks served by a
 * stand-in listener. Exact counts for 300k lost records, the control's verdicts and exit codes,
 * superseded and contested runs, the reboot check, the wording of the report, and paths that are not
 * regular files.
 */
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { mkdirSync, openSync, readFileSync, closeSync, rmSync, writeFileSync, writeSync } from 'node:fs'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { fillRecord, runKey, slotOf, slotOffsetBytes } from '../../src/record/records.js'
import { craftClaim, craftMeta, craftRun, listenerWith, range, writeDataFile } from '../fixtures/crafted-run.js'
import { runCli, runInProcess, tempDir } from '../fixtures/cli.js'
import { runCliRebooted } from '../fixtures/rebooted.js'

const verify = (server: string, file: string, ...extra: string[]) => runInProcess(['verify', '--server', server, '--file', file, ...extra])
const json = async (server: string, file: string, ...extra: string[]) => {
  const result = await verify(server, file, '--json', ...extra)
  return { code: result.code, report: JSON.parse(result.stdout), stderr: result.stderr }
}

t.test('300,000 lost acknowledged records with later survivors: exact counts, text and --json', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'data')
  const acked = 600_020
  const meta = craftMeta('a000000000000001', file, { slotCount: 700_000 })
  // Seqs 12, 14, ..., 600010 are zeros; everything else survived, including the last ten.
  const present = [...range(1, 10), ...range(0, 299_999).map((i) => 11 + 2 * i), ...range(600_011, 600_020)]
  writeDataFile(meta, present, { sizeSlots: acked })
  const server = await listenerWith(t, [craftRun(meta, acked)])

  const { code, report } = await json(server, file)
  t.equal(code, 1)
  const run = report.runs[0]
  t.match(run, { verdict: 'fail', role: 'tested', acked, lost: 300_000, intact: 300_020, torn: 0, corrupt: 0, lostRangeCount: 300_000 })
  t.equal(run.lostRanges.length, 1000, 'lostRanges capped at 1000')
  t.match(run.lostRanges[0], { fromSeq: 12, toSeq: 12, count: 1 })
  t.match(run.lostRanges[999], { fromSeq: 12 + 2 * 999 })
  t.same(run.reordering, { count: 300_000, survivedSeq: 600_020, earliestLostSeq: 12 }, 'every earlier failed record counted')

  const text = await verify(server, file)
  t.equal(text.code, 1)
  t.match(text.stdout, /^FAIL: 300,000 of 600,020 acknowledged records/)
  t.match(text.stdout, /\.\.\. and 299,990 more lost ranges/)
  t.match(text.stdout, /reordering: record 600020 survived while 300,000 earlier acknowledged records \(from seq 12\)/)
  t.equal(text.stderr, '')
})

t.test('the control: verdicts and exit codes 0, 1 and 4', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'data')
  const synced = craftMeta('b000000000000001', `${file}.fdatasync`, { groupId: 'b000000000000001', requestedPath: file })
  const control = craftMeta('b000000000000002', `${file}.none`, { groupId: 'b000000000000001', requestedPath: file, method: 'none' })
  const cases: Array<{
    name: string
    syncedKept: number[] | null
    syncedAcked?: number
    controlKept: number[] | null
    code: number
    verdict: string
    text: RegExp
  }> = [
    {
      name: 'synced intact, control lost 5',
      syncedKept: range(1, 20),
      controlKept: range(1, 15),
      code: 0,
      verdict: 'pass',
      text: /control \(none\): 5 of 20 unsynced records lost: the cut was real/,
    },
    {
      name: 'synced intact, control lost nothing',
      syncedKept: range(1, 20),
      controlKept: range(1, 20),
      code: 4,
      verdict: 'inconclusive',
      text: /control \(none\): all 20 unsynced records survived, it lost nothing: the cut tested nothing/,
    },
    {
      name: 'synced lost one, control lost 5',
      syncedKept: range(1, 19),
      controlKept: range(1, 15),
      code: 1,
      verdict: 'fail',
      text: /^FAIL: fdatasync lost acknowledged data/,
    },
    {
      name: 'nothing acknowledged by the synced method',
      syncedKept: [],
      syncedAcked: 0,
      controlKept: range(1, 15),
      code: 4,
      verdict: 'inconclusive',
      text: /^INCONCLUSIVE: fdatasync acknowledged nothing/,
    },
    {
      name: 'control alone, lost 5',
      syncedKept: null,
      controlKept: range(1, 15),
      code: 0,
      verdict: 'pass',
      text: /^PASS: control \(none\): 5 of 20 unsynced records lost: the cut was real/,
    },
    {
      name: 'control alone, lost nothing',
      syncedKept: null,
      controlKept: range(1, 20),
      code: 4,
      verdict: 'inconclusive',
      text: /^INCONCLUSIVE: control \(none\): all 20 .* the cut tested nothing/,
    },
  ]
  for (const c of cases) {
    await t.test(c.name, async (t) => {
      const runs = []
      if (c.syncedKept !== null) {
        writeDataFile(synced, c.syncedKept, { sizeSlots: 20 })
        runs.push(craftRun(synced, c.syncedAcked ?? 20))
      } else {
        rmSync(synced.path, { force: true }) // a file of the group with no run at the listener is refused (verify-attacks)
      }
      writeDataFile(control, c.controlKept!, { sizeSlots: 20 })
      runs.push(craftRun(control, 20))
      const server = await listenerWith(t, runs)
      const { code, report } = await json(server, file)
      t.equal(code, c.code, 'exit code')
      t.equal(report.verdict, c.verdict)
      const none = report.runs.find((r: { method: string }) => r.method === 'none')
      t.equal(none.role, 'control')
      t.equal(none.verdict, c.controlKept!.length < 20 ? 'pass' : 'inconclusive')
      if (c.syncedKept !== null) t.equal(report.runs.find((r: { method: string }) => r.method === 'fdatasync').role, 'tested')
      const text = await verify(server, file)
      t.equal(text.code, c.code)
      t.match(text.stdout, c.text)
    })
  }
})

t.test('--run of a run that a later run replaced: superseded, not judged, exit 2', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'data')
  const older = craftMeta('c000000000000001', file)
  const newer = craftMeta('c000000000000002', file, { createdMs: older.createdMs + 10_000 })
  const olderRun = craftRun(older, 20)
  const newerRun = craftRun(newer, 5)
  const claims = [craftClaim(newerRun), craftClaim(olderRun)]
  const server = await listenerWith(t, [olderRun, newerRun], claims)
  writeDataFile(newer, range(1, 5), { sizeSlots: 5 })
  const { code, report } = await json(server, file, '--run', older.runId)
  t.equal(code, 2)
  t.match(report, { verdict: 'not-judged', reason: 'superseded', runs: [] })
  t.match(report.detail, /run c000000000000001 was superseded by run c000000000000002 \(fdatasync, announced /)
  t.equal(report.claims.length, 2)
  const text = await verify(server, file, '--run', older.runId)
  t.equal(text.code, 2)
  t.match(text.stdout, /^NOT JUDGED: run c000000000000001 was superseded by run c000000000000002/)
  t.notMatch(text.stdout, /lost/)

  writeDataFile(older, range(1, 20), { sizeSlots: 20 })
  t.equal((await verify(server, file, '--run', older.runId)).code, 0, 'while the file still holds the run, it is judged')
})

t.test('competing claims on a path: named, not blamed on the storage', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'data')
  const victim = craftMeta('d000000000000001', file)
  const shadow = craftMeta('d000000000000002', file, { createdMs: victim.createdMs + 10_000 })
  const victimRun = craftRun(victim, 20, { peer: '10.0.0.7' })
  const shadowRun = craftRun(shadow, 20, { peer: '10.9.9.9' })
  writeDataFile(victim, range(1, 20), { sizeSlots: 20 })

  await t.test('a shadowing announcement from another address', async (t) => {
    const server = await listenerWith(t, [shadowRun], [craftClaim(shadowRun), craftClaim(victimRun)])
    const { code, report } = await json(server, file)
    t.equal(code, 2)
    t.match(report, { verdict: 'not-judged', reason: 'conflicting-claims', runs: [] })
    t.match(
      report.detail,
      /holds run d000000000000001, announced from 10\.0\.0\.7, but the latest run, d000000000000002, was announced from 10\.9\.9\.9/,
    )
    t.equal(report.claims.length, 2)
    const text = await verify(server, file)
    t.equal(text.code, 2)
    t.match(text.stdout, /run d000000000000002 \(fdatasync\) from 10\.9\.9\.9, announced .*, ended/)
    t.match(text.stdout, /run d000000000000001 \(fdatasync\) from 10\.0\.0\.7/)
    t.match(text.stdout, /hint: pick one with --run RUNID; run the listener with --token/)
    t.notMatch(text.stdout, /lost|FAIL/)
  })

  await t.test('two writers live on the path at once', async (t) => {
    const server = await listenerWith(t, [shadowRun], [craftClaim(shadowRun, { live: true }), craftClaim(victimRun, { live: true })])
    const { code, report } = await json(server, file)
    t.equal(code, 2)
    t.match(report, { reason: 'conflicting-claims', detail: /2 writers are writing this path right now/ })
    t.match(report.claims, [
      { runId: shadow.runId, live: true },
      { runId: victim.runId, live: true },
    ])
  })

  await t.test('--run picks one explicitly and judges it', async (t) => {
    const server = await listenerWith(t, [victimRun, shadowRun], [craftClaim(shadowRun), craftClaim(victimRun)])
    const { code, report } = await json(server, file, '--run', victim.runId)
    t.equal(code, 0)
    t.match(report.runs[0], { runId: victim.runId, verdict: 'pass', intact: 20 })
  })

  await t.test('an older run from the same address still holding the file: judged (its loss is real)', async (t) => {
    const sameOrigin = craftRun(shadow, 20, { peer: '10.0.0.7' })
    const server = await listenerWith(t, [sameOrigin], [craftClaim(sameOrigin), craftClaim(victimRun)])
    const { code, report } = await json(server, file)
    t.equal(code, 1)
    t.match(report.runs[0], { lost: 20, superblock: { kind: 'other-run', runId: victim.runId } })
  })
})

t.test('rebootedSinceWrite from the boot ids', async (t) => {
  let bootId: string
  try {
    bootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()
  } catch {
    t.comment('no /proc/sys/kernel/random/boot_id here: nothing to compare')
    return
  }
  const dir = tempDir(t)
  const file = join(dir, 'data')
  const meta = craftMeta('e000000000000001', file)
  writeDataFile(meta, range(1, 20), { sizeSlots: 20 })
  for (const [writerBootId, expected] of [
    [bootId, false],
    ['00000000-0000-0000-0000-000000000000', true],
    [null, null],
  ] as const) {
    const server = await listenerWith(t, [craftRun(meta, 20, { writer: { bootId: writerBootId, fingerprint: null } })])
    const { code, report } = await json(server, file)
    t.equal(code, 0, 'the exit code stays data-based')
    t.equal(report.runs[0].rebootedSinceWrite, expected, `writer boot id ${writerBootId}`)
    const text = await verify(server, file)
    if (expected === false)
      t.match(
        text.stdout,
        /No reboot happened since the write: .* page cache still holds every write and a pass proves nothing about power loss/,
      )
    else t.notMatch(text.stdout, /No reboot/)
    const unknownBoot =
      'could not tell whether this machine rebooted since the write (its writer reported no boot id): a pass proves nothing unless the power was really cut'
    if (expected === null) {
      t.ok(report.notes.includes(unknownBoot), 'JSON: the unknown boot is a note')
      t.ok(text.stdout.includes(`\nnote: ${unknownBoot}.\n`), 'text: the unknown boot is said under the PASS')
    } else {
      t.notMatch(report.notes.join('\n'), /could not tell whether/, `writer boot id ${writerBootId}: known, no caveat`)
      t.notMatch(text.stdout, /could not tell whether/)
    }
  }
  const elsewhere = craftMeta('e000000000000002', file, { host: 'another-machine' })
  writeDataFile(elsewhere, range(1, 20), { sizeSlots: 20 })
  const server = await listenerWith(t, [craftRun(elsewhere, 20, { writer: { bootId, fingerprint: null } })])
  const { report } = await json(server, file, '--host', 'another-machine')
  t.equal(report.runs[0].rebootedSinceWrite, null, 'not compared when the writer ran on another host')
  t.ok(
    report.notes.includes(
      `could not tell whether another-machine (the machine that wrote) rebooted since the write (verify runs on ${hostname()}): a pass proves nothing unless the power was really cut`,
    ),
    "the caveat names the writer's machine and this one",
  )
})

t.test('no boot id on this machine (an empty boot_id): a PASS says the reboot could not be told, a FAIL stays a plain FAIL', async (t) => {
  const dir = tempDir(t)
  const noBootId = join(dir, 'empty-boot-id')
  writeFileSync(noBootId, '')
  const file = join(dir, 'data')
  const meta = craftMeta('e000000000000003', file)
  writeDataFile(meta, range(1, 20), { sizeSlots: 20 })
  const server = await listenerWith(t, [
    craftRun(meta, 20, { writer: { bootId: '00000000-0000-0000-0000-000000000001', fingerprint: null } }),
  ])
  const caveat =
    'could not tell whether this machine rebooted since the write (no boot id on this platform): a pass proves nothing unless the power was really cut'
  const asJson = await runCliRebooted(noBootId, ['verify', '--server', server, '--file', file, '--json'])
  t.equal(asJson.code, 0, asJson.stderr)
  const report = JSON.parse(asJson.stdout)
  t.equal(report.runs[0].rebootedSinceWrite, null)
  t.ok(report.notes.includes(caveat), `JSON notes: ${JSON.stringify(report.notes)}`)
  const text = await runCliRebooted(noBootId, ['verify', '--server', server, '--file', file])
  t.equal(text.code, 0, text.stderr)
  t.match(text.stdout, /^PASS/)
  t.ok(text.stdout.includes(`\nnote: ${caveat}.\n`), text.stdout)

  const lossy = craftMeta('e000000000000004', file)
  writeDataFile(lossy, range(1, 10), { sizeSlots: 20 })
  const lossyServer = await listenerWith(t, [
    craftRun(lossy, 20, { writer: { bootId: '00000000-0000-0000-0000-000000000001', fingerprint: null } }),
  ])
  const failed = await runCliRebooted(noBootId, ['verify', '--server', lossyServer, '--file', file])
  t.equal(failed.code, 1, failed.stderr)
  t.notMatch(failed.stdout, /could not tell whether/, 'a loss is a loss whatever the boot')
})

t.test('wording: a superblock-only failure, interrupted overwrites', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'data')
  const meta = craftMeta('f000000000000001', file, { slotCount: 20 })

  writeDataFile(meta, range(1, 20), { sizeSlots: 20, superblock: false })
  const server = await listenerWith(t, [craftRun(meta, 20)])
  const broken = await verify(server, file)
  t.equal(broken.code, 1)
  t.match(broken.stdout, /^FAIL: the superblock of run f000000000000001 .* did not survive: superblock is zeros/)
  t.notMatch(broken.stdout, /\b0 of 20\b/)

  // Seq 40 (never acknowledged) goes to seq 20's slot 19: its sector 0 landed, sector 1 did not (1 KiB records, two sectors).
  t.equal(slotOf(runKey('f000000000000002'), 'append', 40, 20), 19)
  const wide = craftMeta('f000000000000002', file, { slotCount: 20, recordSizeBytes: 1024 })
  writeDataFile(wide, range(1, 20), { sizeSlots: 20 })
  const wideKey = runKey(wide.runId)
  const wideNewer = Buffer.alloc(1024)
  fillRecord(wideNewer, wideKey, 40, 19, (wide.createdMs + 2000) * 1000)
  const fd = openSync(file, 'r+')
  writeSync(fd, wideNewer, 0, 512, slotOffsetBytes(1024, 19)) // sector 0 of seq 40, sector 1 still seq 20
  closeSync(fd)
  const wideServer = await listenerWith(t, [craftRun(wide, 20)])
  const { code, report } = await json(wideServer, file)
  t.equal(code, 0)
  t.match(report.runs[0], { intact: 19, interrupted: 1, verdict: 'pass' })
  const text = await verify(wideServer, file)
  t.match(text.stdout, /^PASS: every acknowledged record of run f000000000000002 .* survived: 19 intact, 1 interrupted newer overwrites\./)
  t.notMatch(text.stdout, /survived intact/)
  t.notMatch(text.stdout, /acknowledged seq 40|unacknowledged.*seq 20\b/)
})

t.test('a FIFO or a directory at the path: one-line error, exit 3, no hang', async (t) => {
  const dir = tempDir(t)
  const fifo = join(dir, 'fifo')
  execFileSync('mkfifo', [fifo])
  const directory = join(dir, 'directory')
  mkdirSync(directory)
  for (const [path, kind] of [
    [fifo, 'a FIFO'],
    [directory, 'a directory'],
  ] as const) {
    const server = await listenerWith(t, [craftRun(craftMeta('a100000000000001', path), 20)])
    const result = await runCli(['verify', '--server', server, '--file', path], 30_000)
    t.equal(result.code, 3, `${kind}: exit 3`)
    t.equal(result.stderr, `plugcheck: ${path} is ${kind}, not a regular file\nhint: give --file the data file that write created\n`)
  }
})
