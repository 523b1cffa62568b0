/**
 * `--pattern files` in the power-cut lab.
 *
 * First the lab's own reader of a files run's directory (files-reader.ts) against hand-made damage, and
 * verify beside it on the same directory: both must find exactly the same losses, so the reader the
 * campaign trusts is not a rubber stamp. Then `npm run lab -- --cuts 1 --pattern files --disk
 * honest,lying --method fdatasync` as a child process: the honest disk keeps every acknowledged file
 * (verify PASS, the reader finds nothing lost, no false alarm), the lying disk loses them (verify FAIL
 * exactly when the reader finds an acknowledged file gone), and the campaign exits 0. About 20 s.
 */
import t from 'tap'
import { execFile } from 'node:child_process'
import { copyFileSync, renameSync, rmSync, truncateSync, writeFileSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { runCli, tempDir } from '../fixtures/cli.js'
import { craftFilesMeta, craftRun, filesRecord, listenerWith, range, writeFilesRun } from '../fixtures/crafted-run.js'
import { judgeFilesDirectory } from '../fixtures/lab/files-reader.js'
import { labUnavailableReason } from '../fixtures/lab/harness.js'

const keep = 10
const acked = 25
const runId = 'fa00000000000001'

t.test("the lab's reader and verify find the same losses in a damaged directory", async (t) => {
  const runDir = join(tempDir(t, 'plugcheck-files-reader-'), 'run')
  const meta = craftFilesMeta(runId, runDir, keep)
  const server = await listenerWith(t, [craftRun(meta, acked)])
  writeFilesRun(meta, range(acked - keep + 1, acked))
  const judge = () => judgeFilesDirectory(runDir, runId, meta.recordSizeBytes, keep, acked)

  t.match(judge(), { lost: 0, judged: keep, superblockFound: true }, 'the whole window: nothing lost')

  rmSync(join(runDir, 'rec-17'))
  renameSync(join(runDir, 'rec-18'), join(runDir, '.rec-18.tmp'))
  truncateSync(join(runDir, 'rec-19'), 0)
  truncateSync(join(runDir, 'rec-20'), 100)
  writeFileSync(join(runDir, 'rec-5'), filesRecord(meta, 5))
  const flipped = readFileSync(join(runDir, 'rec-21'))
  flipped[700] = flipped[700]! ^ 0xff
  writeFileSync(join(runDir, 'rec-21'), flipped)
  copyFileSync(join(runDir, 'rec-22'), join(runDir, 'rec-23'))
  const found = judge()
  t.same(found.byKind, { missing: 1, 'rename-lost': 1, 'zero-length': 1, short: 1, 'came-back': 1, wrong: 2 }, 'each kind of damage found')
  t.same(found.lostSeqs, [5, 17, 18, 19, 20, 21, 23])
  const verify = await runCli(['verify', '--server', server, '--file', runDir, '--json'], 30_000)
  t.equal(verify.code, 1, `verify fails (stderr: ${verify.stderr})`)
  const run = JSON.parse(verify.stdout).runs[0]
  t.equal(run.lost + run.torn + run.corrupt, found.lost, 'verify counts the losses the reader counts')
})

t.test('steps past the last ack may have deleted the oldest kept files: not a loss', async (t) => {
  const runDir = join(tempDir(t, 'plugcheck-files-reader-'), 'run')
  const meta = craftFilesMeta(runId, runDir, keep)
  const server = await listenerWith(t, [craftRun(meta, acked)])
  // Step 26 (never acknowledged) deleted rec-16; step 27 made .rec-27.tmp and deleted rec-17.
  writeFilesRun(meta, range(acked - keep + 3, acked))
  writeFileSync(join(runDir, '.rec-27.tmp'), filesRecord(meta, 27))
  t.match(judgeFilesDirectory(runDir, runId, meta.recordSizeBytes, keep, acked), { lost: 0, deletedUnacknowledged: 2 })
  const passed = await runCli(['verify', '--server', server, '--file', runDir, '--json'], 30_000)
  t.equal(passed.code, 0, `verify passes it too (stderr: ${passed.stderr})`)
  // With no trace of step 27, only step 26 (acks 1..25 allow it to have run in part) may have deleted one: rec-17 is lost.
  rmSync(join(runDir, '.rec-27.tmp'))
  t.match(judgeFilesDirectory(runDir, runId, meta.recordSizeBytes, keep, acked), {
    lost: 1,
    lostSeqs: [17],
    byKind: { missing: 1 },
    deletedUnacknowledged: 1,
  })
  const failed = await runCli(['verify', '--server', server, '--file', runDir, '--json'], 30_000)
  t.equal(failed.code, 1, 'verify fails it too')
  t.match(JSON.parse(failed.stdout).runs[0], { lost: 1, lostRanges: [{ fromSeq: 17, toSeq: 17 }] })
})

t.test('the directory gone loses the whole window', async (t) => {
  const runDir = join(tempDir(t, 'plugcheck-files-reader-'), 'run')
  t.match(judgeFilesDirectory(runDir, runId, 1024, keep, acked), { lost: keep, byKind: { 'no-directory': keep }, superblockFound: false })
})

const reason = labUnavailableReason()
if (reason !== null) {
  t.fail(
    `the files power-cut lab cannot run here: ${reason}\nhint: run the suite as root on Linux with /dev/fuse and nbdkit, libnbd-bin, e2fsprogs`,
  )
} else {
  const campaign = fileURLToPath(new URL('../fixtures/lab/campaign.ts', import.meta.url))
  const lab = (args: readonly string[], timeoutMs: number) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = execFile(
        process.execPath,
        ['--import', 'tsx', campaign, ...args],
        { timeout: timeoutMs, encoding: 'utf8' },
        (_error, stdout, stderr) => resolve({ code: child.exitCode, stdout, stderr }),
      )
    })

  t.test("the lab refuses a files run's flags without --pattern files, and --direct with it", async (t) => {
    const cases: Array<[readonly string[], RegExp]> = [
      [['--cuts', '1', '--no-dir-sync'], /^lab: --no-dir-sync is for --pattern files only$/m],
      [['--cuts', '1', '--publish', 'link', '--pattern', 'overwrite'], /^lab: --publish is for --pattern files only$/m],
      [['--replay', '1', '--keep-files', '8'], /^lab: --keep-files is for --pattern files only$/m],
      [['--cuts', '1', '--pattern', 'files', '--direct'], /^lab: --direct with --pattern files is not in the lab yet$/m],
      [['--cuts', '1', '--pattern', 'files', '--publish', 'copy'], /^lab: --publish: /m],
    ]
    for (const [args, message] of cases) {
      const result = await lab(args, 30_000)
      t.equal(result.code, 2, `${args.join(' ')}: exit 2`)
      t.match(result.stderr, message, args.join(' '))
      t.equal(result.stdout, '', 'no table')
    }
  })

  t.test('a campaign of cuts: honest keeps every acknowledged file, lying loses them and is caught', async (t) => {
    const seed = process.env.PLUGCHECK_LAB_SEED ?? '20'
    const result = await lab(
      ['--cuts', '1', '--pattern', 'files', '--disk', 'honest,lying', '--method', 'fdatasync', '--seed', seed],
      120_000,
    )
    t.equal(result.code, 0, `the campaign passes (stderr: ${result.stderr})`)
    const rows = new Map(
      result.stdout
        .trim()
        .split('\n')
        .slice(2)
        .map((line) => line.split(/\s{2,}/))
        .map((cells) => [cells[0], cells]),
    )
    const honest = rows.get('honest')
    const lying = rows.get('lying')
    t.ok(honest !== undefined && lying !== undefined, `a row per disk:\n${result.stdout}`)
    // disk, method, variant, cuts, acked, lost (verify), lost (reader), false alarms, detection, w/o dir sync, wrong verdicts, no mount
    t.match(honest, ['honest', 'fdatasync', 'rename', '1', /^[1-9]/, '0', '0', '0', '-', '-', '0', '0'], 'honest: acked files, none lost')
    t.match(
      lying,
      ['lying', 'fdatasync', 'rename', '1', /^[1-9]/, /^[1-9]/, /^[1-9]/, '0', '1/1', '-', '0', '0'],
      'lying: lost and detected',
    )
    t.match(result.stderr, /honest fdatasync rename cut 1\/1 .*verify pass \(exit 0, lost 0\), reader lost 0/)
    t.match(result.stderr, /lying fdatasync rename cut 1\/1 .*verify fail \(exit 1, lost [1-9]/)
  })
}
