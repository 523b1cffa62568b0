/**
 * The writer reads its own data files back during the run. An acknowledged record that reads back
 * wrong from the same file (same inode, not shorter, our superblock, our lock) is the storage losing
 * data while running: the run ends as 'storage-lost', write exits 1, and verify judges it (FAIL, the
 * losses counted), where it used to end as 'file-changed' and verify refused to judge (exit 2),
 * hiding every lost record. Another program is still blamed on evidence of one: another run's
 * superblock written over ours, a truncation (even one the next append extended over a hole).
 *
 * The storage's loss is played by this test writing zeros (or an older record's bytes) into the
 * records in place, through the file's own inode, as a disk returning stale blocks would show it.
 */
import t from 'tap'
import { closeSync, openSync, readSync, truncateSync, writeSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { decodeSuperblock, encodeSuperblock } from '../../src/record/format.js'
import { fileSize, runInProcess, spawnCli, startListener, tempDir, traceEntryBytes, waitFor } from '../fixtures/cli.js'

/** Small records: the test overwrites thousands of them at once, and a writer that runs long fills little disk. */
const recordBytes = 512

interface Writer {
  readonly file: string
  readonly trace: string
  readonly exit: Promise<number | null>
  out(): string
  err(): string
}

function startWriter(t: { teardown(fn: () => unknown): void }, server: string, file: string, extra: readonly string[] = []): Writer {
  const trace = `${file}.trace`
  const child = spawnCli([
    'write',
    '--server',
    server,
    '--file',
    file,
    '--record-size',
    String(recordBytes),
    '--size',
    '1GiB',
    '--duration',
    '20',
    '--trace-file',
    trace,
    ...extra,
  ])
  t.teardown(() => child.kill('SIGKILL'))
  let out = ''
  let err = ''
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()))
  child.stderr!.on('data', (c: Buffer) => (err += c.toString()))
  const exit = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
  return { file, trace, exit, out: () => out, err: () => err }
}

/** Records synced so far (the trace file grows by one entry per completed sync). */
const synced = (w: Writer): number => Math.floor(fileSize(w.trace) / traceEntryBytes)

/** Overwrites the records of seqs 1..count (append: seq s in slot s-1) in place with bytes. */
function overwriteRecords(file: string, count: number, fill: (slot: number, record: Buffer) => void): void {
  const region = Buffer.alloc(count * recordBytes)
  for (let slot = 0; slot < count; slot++) fill(slot, region.subarray(slot * recordBytes, (slot + 1) * recordBytes))
  const fd = openSync(file, 'r+')
  try {
    writeSync(fd, region, 0, region.length, recordBytes)
  } finally {
    closeSync(fd)
  }
}

function readBlock(file: string, offset: number): Buffer {
  const block = Buffer.alloc(recordBytes)
  const fd = openSync(file, 'r')
  try {
    readSync(fd, block, 0, recordBytes, offset)
  } finally {
    closeSync(fd)
  }
  return block
}

interface RunJson {
  runId: string
  ended: string
  acked: number
  intact: number
  lost: number
  torn: number
  corrupt: number
  verdict: string
}

const storageLosses: Record<
  string,
  { fill: (file: string) => (slot: number, record: Buffer) => void; found: string; failed: (r: RunJson) => number }
> = {
  zeros: { fill: () => () => undefined, found: 'zeros', failed: (r) => r.lost },
  // Record 1's bytes in every slot: a device returning another block's data (record 1 itself stays right).
  'an older record': {
    fill: (file) => {
      const first = readBlock(file, recordBytes)
      return (_slot, record) => void first.copy(record)
    },
    found: 'record 1 of this run',
    failed: (r) => r.lost + r.torn + r.corrupt,
  },
}

for (const [what, loss] of Object.entries(storageLosses)) {
  t.test(`acknowledged records overwritten in place with ${what}: storage-lost, write exits 1, verify FAILs counting each`, async (t) => {
    const dir = tempDir(t)
    const listener = await startListener(join(dir, 'listener'))
    t.teardown(() => listener.kill())
    const w = startWriter(t, listener.server, join(dir, 'data'))
    await waitFor(`2,000 synced records (${w.err()})`, () => synced(w) >= 2000, 60_000)
    // Every record synced so far but the last few: the writer's read-back samples one of its records at random.
    const count = synced(w) - 10
    overwriteRecords(w.file, count, loss.fill(w.file))
    const code = await w.exit
    t.equal(code, 1, `write exits 1: it found proof of a broken promise (stderr: ${w.err()})`)
    t.match(
      w.err(),
      new RegExp(
        `^plugcheck: the storage lost data while the run was going: acknowledged record [\\d,]+ of run [0-9a-f]{16} \\(fdatasync\\) reads back as ${loss.found} from slot [\\d,]+ of ${w.file.replace(/\./g, '\\.')} \\(byte [\\d,]+\\)`,
        'm',
      ),
    )
    t.match(w.err(), /^hint: no power cut is needed to see it: run plugcheck verify --server .* now/m)
    const summary = /([\d,]+) records synced and acknowledged, ([\d,]+) recorded by the listener/.exec(w.out())
    t.ok(summary !== null && summary[1] === summary[2], `every ack recorded before exit:\n${w.out()}`)

    const verified = await runInProcess(['verify', '--server', listener.server, '--file', w.file, '--json'])
    t.equal(verified.code, 1, `verify judges the run and fails it: ${verified.stdout.slice(0, 2000)}`)
    const report = JSON.parse(verified.stdout) as { verdict: string; notes: string[]; runs: RunJson[] }
    const run = report.runs[0]!
    t.equal(report.verdict, 'fail')
    t.equal(run.ended, 'storage-lost', 'the listener holds the end the writer reported')
    t.equal(loss.failed(run), what === 'zeros' ? count : count - 1, `every overwritten acknowledged record counted (${count} overwritten)`)
    t.equal(run.intact, run.acked - loss.failed(run), 'the rest intact')
    t.match(report.notes.join('\n'), /the writer stopped during the run: the storage lost data while the run was going/)

    const words = await runInProcess(['verify', '--server', listener.server, '--file', w.file])
    t.match(words.stdout, /^FAIL: /m)
    t.notMatch(words.stdout, /NOT JUDGED/)
  })
}

t.test("write --jobs 2: a record zeroed in job 2's file ends the write with exit 1; verify FAILs the group, naming job 2", async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'data')
  const child = spawnCli([
    'write',
    '--server',
    listener.server,
    '--file',
    file,
    '--record-size',
    String(recordBytes),
    '--size',
    '1GiB',
    '--duration',
    '20',
    '--jobs',
    '2',
  ])
  t.teardown(() => child.kill('SIGKILL'))
  let err = ''
  child.stderr!.on('data', (c: Buffer) => (err += c.toString()))
  const exit = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
  const job2 = `${file}.job2`
  const written = (): number => Math.floor(fileSize(job2) / recordBytes) - 1
  await waitFor(`2,000 records in job 2's file (${err})`, () => written() >= 2000, 60_000)
  const count = written() - 10
  overwriteRecords(job2, count, () => () => undefined)
  t.equal(await exit, 1, err)
  t.match(
    err,
    new RegExp(
      `^plugcheck: the storage lost data while the run was going: acknowledged record [\\d,]+ of run [0-9a-f]{16} \\(fdatasync\\) reads back as zeros from slot [\\d,]+ of ${job2.replace(/\./g, '\\.')} `,
      'm',
    ),
  )
  t.notMatch(err, /stopped by SIGTERM/, 'the job stopped for the loss does not speak of a signal')

  const verified = await runInProcess(['verify', '--server', listener.server, '--file', file, '--json'])
  t.equal(verified.code, 1, verified.stdout.slice(0, 2000))
  const report = JSON.parse(verified.stdout) as { verdict: string; runs: Array<RunJson & { path: string }> }
  t.equal(report.verdict, 'fail')
  const [first, second] = report.runs
  t.match(
    first,
    { path: `${file}.job1`, ended: 'interrupted', lost: 0, torn: 0, corrupt: 0, verdict: 'pass' },
    'job 1 was stopped, its records intact',
  )
  t.match(second, { path: job2, ended: 'storage-lost', lost: count, verdict: 'fail' }, `job 2: the ${count} zeroed records lost`)
})

t.test("another run's superblock written over ours during the run: file-changed, exit 3, verify judges nothing", async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const w = startWriter(t, listener.server, join(dir, 'data'))
  await waitFor(`500 synced records (${w.err()})`, () => synced(w) >= 500, 60_000)
  const ours = decodeSuperblock(readBlock(w.file, 0))
  if (ours.kind !== 'valid') throw new Error(`the writer's superblock does not decode: ${ours.detail}`)
  // An older run's: verify would otherwise take it for a lost file creation and blame the storage.
  const other = { ...ours.meta, runId: randomBytes(8).toString('hex'), createdMs: ours.meta.createdMs - 3_600_000 }
  const fd = openSync(w.file, 'r+')
  writeSync(fd, encodeSuperblock(other), 0, recordBytes, 0)
  closeSync(fd)
  t.equal(await w.exit, 3, w.err())
  t.match(
    w.err(),
    new RegExp(
      `the superblock of the data file .*data now holds run ${other.runId}, not run ${ours.meta.runId}: something other than plugcheck wrote it during the run`,
    ),
  )
  const verified = await runInProcess(['verify', '--server', listener.server, '--file', w.file])
  t.equal(verified.code, 2, verified.stdout)
  t.match(verified.stdout, /^NOT JUDGED: run [0-9a-f]{16} \(fdatasync\) ended because the superblock of the data file/)
})

t.test('truncated during the run and extended again by the next record: still another program (a hole), exit 3', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const w = startWriter(t, listener.server, join(dir, 'data'))
  await waitFor(`500 synced records (${w.err()})`, () => synced(w) >= 500, 60_000)
  truncateSync(w.file, recordBytes) // the superblock stays; the writer's next append extends the file over a hole
  t.equal(await w.exit, 3, w.err())
  t.match(
    w.err(),
    /plugcheck: the data file .*data (has a hole where records were written \([\d,]+ bytes allocated, [\d,]+ written\)|was truncated to [\d,]+ bytes during the run)/,
  )
  const verified = await runInProcess(['verify', '--server', listener.server, '--file', w.file])
  t.equal(verified.code, 2, verified.stdout)
  t.match(verified.stdout, /^NOT JUDGED: /)
})
