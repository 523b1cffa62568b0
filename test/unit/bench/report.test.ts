/**
 * Whole runs on /dev/shm (tmpfs): the --json document against its zod schema, n/a rows for methods
 * forced unavailable, and the two judgements tmpfs must trigger: the in-memory warning and the
 * "indistinguishable from no sync" flag (on tmpfs every sync costs about what no sync costs).
 */
import t from 'tap'
import fs from 'node:fs'
import { benchReportSchema, type BenchReport } from '../../../src/bench/schema.js'
import { quickSecs, runCli, scratchDir } from '../../fixtures/bench-helpers.js'

const shm = '/dev/shm'

t.test('--json on tmpfs, with open_sync and fdatasync forced unavailable', async (t) => {
  const dir = scratchDir(shm, t)
  const result = runCli(['bench', '--secs', quickSecs, '--file', dir, '--json'], {
    env: { PLUGCHECK_DISABLE_METHODS: 'open_sync,fdatasync' },
  })
  t.equal(result.status, 0, result.stderr)
  const parsed = benchReportSchema.safeParse(JSON.parse(result.stdout))
  if (!parsed.success) t.fail(`schema: ${JSON.stringify(parsed.error.issues.slice(0, 3))}`)
  const report = parsed.data as BenchReport
  t.same(fs.readdirSync(dir), [], 'scratch file removed')

  t.equal(report.secsPerTest, Number(quickSecs))
  t.equal(report.recordSizeBytes, 8192)
  t.match(report.file, new RegExp(`^${dir}/plugcheck-bench\\.`))
  t.same(
    report.sections.map((s) => s.id),
    ['one-write', 'two-writes', 'open-sync-sizes', 'non-write-descriptor', 'non-sync', 'metadata'],
    "pg_test_fsync's section order, then the metadata section it lacks",
  )
  t.same(
    report.sections[5]!.rows.map((r) => [r.id, r.durable]),
    [
      ['metadata/open_datasync', true],
      ['metadata/fdatasync', true],
      ['metadata/fsync', true],
      ['metadata/fsync_writethrough', true],
      ['metadata/open_sync', true],
      ['metadata/pwritev2_dsync', true],
      ['metadata/barrier_fsync', false],
      ['metadata/flush_data_only', false],
      ['metadata/none', false],
    ],
  )
  t.match(
    report.sections[5]!.rows.find((r) => r.id === 'metadata/fsync')!.calls,
    /^create \(O_EXCL\), pwrite, fsync, close, rename, unlink of the file 16 back, directory: fsync\(directory\)$/,
  )
  t.same(
    report.sections[0]!.rows.map((r) => r.label),
    [
      'open_datasync (buffered)',
      'open_datasync (direct)',
      'fdatasync',
      'fsync',
      'fsync_writethrough',
      'open_sync (buffered)',
      'open_sync (direct)',
      'pwritev2 RWF_DSYNC',
      'barrier_fsync',
      'flush_data_only',
    ],
  )
  const rows = report.sections.flatMap((s) => s.rows)
  t.equal(rows.length, 37)
  for (const row of rows) {
    if (row.method === 'open_sync' || row.method === 'fdatasync') {
      t.equal(row.status, 'n/a', `${row.id} is n/a`)
      t.match(row.reason, /disabled by PLUGCHECK_DISABLE_METHODS/)
      t.equal(row.opsPerSec, null)
    } else if (row.method === 'fsync_writethrough') {
      t.equal(row.status, 'n/a', 'fsync_writethrough is n/a on Linux')
      t.match(row.reason, /Linux has no write-through flush call/)
    } else if (row.method === 'barrier_fsync' || row.method === 'flush_data_only') {
      t.equal(row.status, 'n/a', `${row.method} is n/a on Linux`)
      t.match(row.reason, row.method === 'barrier_fsync' ? /macOS only/ : /Windows only/)
      t.equal(row.durable, false, 'not a durability promise')
    } else {
      t.equal(row.status, 'ok', `${row.id} ran`)
      t.ok(row.opCount! > 0 && row.opsPerSec! > 0, `${row.id} has figures`)
      t.ok(row.latencyUsP50! <= row.latencyUsP99! && row.latencyUsP99! <= row.latencyUsMax!, `${row.id} percentiles ordered`)
      // ops/sec and usecs/op are the same measurement, as pg_test_fsync prints them.
      t.ok(Math.abs(row.opsPerSec! * row.usecsPerOp! - 1e6) < 1, `${row.id} ops/sec x usecs/op = 1 s`)
    }
  }

  t.equal(report.fingerprint.target.fileSystem.type, 'tmpfs')
  t.equal(report.fingerprint.target.fileSystem.magic, '0x1021994')
  t.equal(report.fingerprint.target.inMemory, true)
  t.equal(report.fingerprint.device, null)
  t.match(report.fingerprint.os.kernel, /\d+\.\d+/)

  const kinds = new Set(report.flags.map((f) => f.kind))
  t.ok(kinds.has('in-memory-file-system'), 'in-memory flag')
  const noSync = report.flags.filter((f) => f.kind === 'indistinguishable-from-no-sync')
  t.ok(noSync.length > 0, 'at least one durable row flagged as indistinguishable from no sync')
  t.match(noSync[0]?.message, /is indistinguishable from a write without any sync .*run a plug test/)
  // The metadata section's durable rows are set against its own baseline (the same files made without a sync).
  t.ok(
    noSync.some((f) => f.rowIds[0] === 'metadata/fsync' && /indistinguishable from the same files made without any sync/.test(f.message)),
    'a metadata row flagged against the metadata baseline',
  )
  const sameCall = report.flags.filter((f) => f.kind === 'same-call')
  t.same(
    sameCall.map((f) => f.rowIds),
    [['one-write/open_datasync-buffered', 'one-write/pwritev2_dsync']],
    'same-call lists only rows that ran',
  )
})

t.test('text on tmpfs: the environment first, a loud warning, the tables, the judgement', async (t) => {
  const dir = scratchDir(shm, t)
  const result = runCli(['bench', '--secs', quickSecs, '--record-size', '4k'], { cwd: dir })
  t.equal(result.status, 0, result.stderr)
  const out = result.stdout
  t.match(out, /^plugcheck bench: .*plugcheck-bench\.\S+ \(scratch file, 4 KiB records, removed at exit\)\n/)
  t.match(out, /^file system {2}tmpfs \(statfs magic 0x1021994\)/m)
  t.match(out, /^WARNING: NOTHING WRITTEN THERE SURVIVES A POWER CUT/m)
  t.ok(out.indexOf('WARNING') < out.indexOf('Compare file sync methods'), 'the warning comes before the figures')
  t.match(out, /Compare file sync methods using one 4kB write:/)
  t.match(out, /Compare open_sync with different write sizes:/)
  t.match(out, /^ {8} 1 \* {2}8kB open_sync write +[\d.]+ ops\/sec +\d+ usecs\/op +p50/m)
  t.match(out, /^ {8}16 \* 512B open_sync writes +[\d.]+ ops\/sec/m)
  t.match(out, /^ {8}fsync_writethrough {30}n\/a {2}Linux has no write-through/m)
  t.match(out, /^ {8}fdatasync {21} +[\d.]+ ops\/sec +\d+ usecs\/op {3}p50 +[\d.]+ {2}p99 +[\d.]+ {2}max +[\d.]+$/m)
  t.match(out, /^Plausibility:\n {2}not storage: /m)
  t.match(out, /^ {2}no sync: {5}.* is indistinguishable from a write without any sync/m)
  t.match(out, /^Compare metadata syncs: one 4kB file per op, created, written, synced, renamed, directory synced:$/m)
  t.match(out, /^ {8}none \(no sync\) +[\d.]+ ops\/sec/m)
  t.same(fs.readdirSync(dir), [], 'scratch file removed')
})
