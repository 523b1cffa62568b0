/**
 * `write --pattern files` as a child process against a real listener on 127.0.0.1: the record files
 * it leaves (names, bytes, the kept window, no temporary name), the listener's acks against them, the
 * superblock it makes, a second run over the first's directory, a second writer refused, a SIGKILLed
 * writer, and every refusal (exit 2, nothing touched).
 */
import t, { type Test } from 'tap'
import { spawnSync } from 'node:child_process'
import { lstatSync, mkdirSync, readFileSync, readdirSync, renameSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import {
  binPath,
  exitedWithOutput,
  runCli,
  startListener,
  tempDir,
  waitFor,
  watchCli,
  writeThenKill,
  type ListenerChild,
} from '../fixtures/cli.js'
import { decodeSuperblock, type RunMeta } from '../../src/record/format.js'
import { fillRecord, readU64, runKey, writeTimeOffset } from '../../src/record/records.js'
import { seqOfRecordFile, seqOfTempFile } from '../../src/record/files-layout.js'

let listener: ListenerChild
t.before(async () => {
  listener = await startListener(tempDir(t, 'plugcheck-files-listener-'))
})
t.teardown(() => listener.kill())

/** A files writer's command line on dir. */
const filesWriter = (dir: string, extra: readonly string[]): string[] => [
  'write',
  '--server',
  listener.server,
  '--file',
  dir,
  '--pattern',
  'files',
  ...extra,
]
const write = (file: string, extra: readonly string[]) => runCli(filesWriter(file, ['--json', ...extra]))

/** The summary event's one run: acknowledged count and run id. */
function summaryOf(stdout: string): { runId: string; acknowledged: number; pattern: string } {
  const summary = stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line))
    .find((e) => e.event === 'summary')
  return summary.runs[0]
}

async function ackedAtListener(runId: string): Promise<number> {
  const result = await runCli(['runs', '--server', listener.server, '--json'])
  const run = JSON.parse(result.stdout).runs.find((r: { runId: string }) => r.runId === runId)
  return run.ackedThroughSeq
}

function superblockOf(dir: string): RunMeta {
  const reading = decodeSuperblock(readFileSync(join(dir, 'superblock')))
  if (reading.kind !== 'valid') throw new Error(`superblock: ${reading.detail}`)
  return reading.meta
}

/** The seqs of the record files in dir, sorted; throws on a name that is neither a record nor the superblock. */
function recordSeqs(dir: string): { records: number[]; temps: number[] } {
  const records: number[] = []
  const temps: number[] = []
  for (const name of readdirSync(dir)) {
    if (name === 'superblock') continue
    const seq = seqOfRecordFile(name)
    const temp = seqOfTempFile(name)
    if (seq !== null) records.push(seq)
    else if (temp !== null) temps.push(temp)
    else throw new Error(`unexpected name ${name} in ${dir}`)
  }
  return { records: records.sort((a, b) => a - b), temps }
}

/** Every record file holds exactly fillRecord's bytes for its seq (its write time read back and checked plausible). */
function checkRecordBytes(t: Test, dir: string, meta: RunMeta, seqs: readonly number[], startedMs: number): void {
  const key = runKey(meta.runId)
  const expected = Buffer.alloc(meta.recordSizeBytes)
  let wrong = 0
  for (const seq of seqs) {
    const bytes = readFileSync(join(dir, `rec-${seq}`))
    const writeTimeUs = bytes.length >= writeTimeOffset + 8 ? readU64(bytes, writeTimeOffset) : 0
    fillRecord(expected, key, seq, (seq - 1) % meta.slotCount, writeTimeUs)
    const plausible = writeTimeUs / 1000 >= startedMs - 60_000 && writeTimeUs / 1000 <= Date.now() + 60_000
    if (!bytes.equals(expected) || !plausible) wrong++
  }
  t.equal(wrong, 0, `all ${seqs.length} record files hold their seq's record`)
}

t.test('fdatasync: rec-1..rec-N, each its record, N acknowledged and recorded by the listener', async (t) => {
  const dir = join(tempDir(t), 'run')
  const startedMs = Date.now()
  const result = await write(dir, ['--method', 'fdatasync', '--duration', '1', '--keep-files', '1000000'])
  t.equal(result.code, 0, result.stderr)
  const run = summaryOf(result.stdout)
  t.equal(run.pattern, 'files')
  t.ok(run.acknowledged > 0, `${run.acknowledged} acknowledged`)
  const { records, temps } = recordSeqs(dir)
  t.same(temps, [], 'no temporary name left')
  t.same(
    records,
    Array.from({ length: run.acknowledged }, (_, i) => i + 1),
    'rec-1 .. rec-N, N = acknowledged',
  )
  t.equal(await ackedAtListener(run.runId), records.length, "the listener's acked count equals the files made")
  const meta = superblockOf(dir)
  t.equal(meta.runId, run.runId)
  t.equal(meta.pattern, 'files')
  t.same(meta.files, { dirSync: true, publish: 'rename' })
  t.equal(meta.slotCount, 1_000_000)
  const announced = JSON.parse(result.stdout.split('\n')[0]!)
  t.same(
    [announced.event, announced.pattern, announced.files],
    ['announced', 'files', { dirSync: true, publish: 'rename', keptFiles: 1_000_000 }],
  )
  checkRecordBytes(t, dir, meta, records, startedMs)
})

t.test('--keep-files 5 with none: only the last 5 record files remain', async (t) => {
  const dir = join(tempDir(t), 'run')
  const startedMs = Date.now()
  const result = await write(dir, ['--method', 'none', '--duration', '1', '--keep-files', '5'])
  t.equal(result.code, 0, result.stderr)
  const run = summaryOf(result.stdout)
  t.ok(run.acknowledged > 5, `${run.acknowledged} acknowledged, more than kept`)
  const n = run.acknowledged
  t.same(recordSeqs(dir), { records: [n - 4, n - 3, n - 2, n - 1, n], temps: [] })
  t.equal(await ackedAtListener(run.runId), n)
  const meta = superblockOf(dir)
  t.equal(meta.slotCount, 5)
  checkRecordBytes(t, dir, meta, [n - 4, n - 3, n - 2, n - 1, n], startedMs)
})

t.test('--publish link --no-dir-sync: no temporary name left, the settings in the superblock', async (t) => {
  const dir = join(tempDir(t), 'run')
  const result = await write(dir, [
    '--method',
    'fdatasync',
    '--duration',
    '1',
    '--publish',
    'link',
    '--no-dir-sync',
    '--keep-files',
    '100000',
  ])
  t.equal(result.code, 0, result.stderr)
  const run = summaryOf(result.stdout)
  const { records, temps } = recordSeqs(dir)
  t.same(temps, [])
  t.equal(records.length, run.acknowledged)
  t.equal(await ackedAtListener(run.runId), records.length)
  t.same(superblockOf(dir).files, { dirSync: false, publish: 'link' })
  t.equal(lstatSync(join(dir, `rec-${records.at(-1)}`)).nlink, 1, 'the temporary name was unlinked: one link left')
})

t.test('the trail and the summary say the pattern and how the files are made', async (t) => {
  const dir = join(tempDir(t), 'run')
  const result = await runCli(
    filesWriter(dir, ['--method', 'none', '--duration', '0.3', '--publish', 'link', '--no-dir-sync', '--keep-files', '7']),
  )
  t.equal(result.code, 0, result.stderr)
  t.match(result.stdout, /^run [0-9a-f]{16}: none, files \(link, no directory sync, 7 kept\), .*\/run$/m)
  t.match(result.stdout, /^run [0-9a-f]{16}: none, files \(link, no directory sync, 7 kept\), 8 KiB records, /m)
})

t.test("a second run over an earlier run's directory deletes only that run's files and takes the directory", async (t) => {
  const dir = join(tempDir(t), 'run')
  const first = await write(dir, ['--method', 'none', '--duration', '0.5', '--keep-files', '50'])
  t.equal(first.code, 0, first.stderr)
  const firstRun = summaryOf(first.stdout)
  const second = await write(dir, ['--method', 'fdatasync', '--duration', '0.3', '--keep-files', '100000'])
  t.equal(second.code, 0, second.stderr)
  const secondRun = summaryOf(second.stdout)
  t.not(secondRun.runId, firstRun.runId)
  t.equal(superblockOf(dir).runId, secondRun.runId)
  t.same(
    recordSeqs(dir).records,
    Array.from({ length: secondRun.acknowledged }, (_, i) => i + 1),
    "none of the first run's files left",
  )
})

t.test('a second writer on a live files run is refused (the superblock is locked), and the first goes on', async (t) => {
  const dir = join(tempDir(t), 'run')
  const { child: first, exited } = watchCli(filesWriter(dir, ['--method', 'none', '--keep-files', '20']))
  t.teardown(async () => {
    first.kill('SIGKILL')
    await exited
  })
  await waitFor('the first writer to make record files', () => {
    try {
      return readdirSync(dir).some((name) => name.startsWith('rec-'))
    } catch {
      return false
    }
  })
  const superblock = readFileSync(join(dir, 'superblock'))
  const second = await write(dir, ['--method', 'none', '--duration', '1'])
  t.equal(second.code, 2, second.stderr)
  t.match(second.stderr, /another plugcheck write is running on it/)
  t.same(readFileSync(join(dir, 'superblock')), superblock, "the first run's superblock untouched")
  t.equal(first.exitCode, null, 'the first writer still runs')
})

t.test('a SIGKILLed writer leaves at most one temporary file, and every completed record under its name', async (t) => {
  const base = tempDir(t)
  const dir = join(base, 'run')
  const completed = await writeThenKill(
    listener.server,
    dir,
    ['--pattern', 'files', '--method', 'fdatasync', '--keep-files', '1000000'],
    200,
    join(base, 'trace'),
  )
  const { records, temps } = recordSeqs(dir)
  t.ok(temps.length <= 1, `temporary files: ${temps.join(', ') || 'none'}`)
  if (temps.length === 1) t.equal(temps[0], records.length + 1, "the temporary file is the next seq's")
  t.same(
    records,
    Array.from({ length: records.length }, (_, i) => i + 1),
    'rec-1 .. rec-N, no gap',
  )
  // The trace logs a record once its last durable step returned: every one of them is published.
  t.ok(records.length >= completed, `${records.length} record files for ${completed} completed records`)
})

t.test('refusals: exit 2, and nothing touched', async (t) => {
  const base = tempDir(t)

  t.test('a foreign file in the directory, even with --force', async (t) => {
    const dir = join(base, 'foreign')
    mkdirSync(dir)
    writeFileSync(join(dir, 'superblock'), 'not a superblock')
    writeFileSync(join(dir, 'rec-1'), 'mine')
    writeFileSync(join(dir, 'notes.txt'), 'precious')
    for (const extra of [[], ['--force']]) {
      const result = await write(dir, ['--duration', '1', ...extra])
      t.equal(result.code, 2, result.stderr)
      t.match(result.stderr, /refusing to use .*foreign for --pattern files: it holds "notes\.txt", which plugcheck did not make/)
    }
    t.same(readdirSync(dir).sort(), ['notes.txt', 'rec-1', 'superblock'])
    t.equal(readFileSync(join(dir, 'notes.txt'), 'utf8'), 'precious')
    t.equal(readFileSync(join(dir, 'rec-1'), 'utf8'), 'mine')
    t.equal(readFileSync(join(dir, 'superblock'), 'utf8'), 'not a superblock')
  })

  t.test('a subdirectory, or a symbolic link, with a record name', async (t) => {
    const dir = join(base, 'subdir')
    mkdirSync(join(dir, 'rec-5'), { recursive: true })
    writeFileSync(join(dir, 'rec-5', 'inner'), 'inner')
    let result = await write(dir, ['--duration', '1', '--force'])
    t.equal(result.code, 2, result.stderr)
    t.match(result.stderr, /"rec-5" \(a directory\)/)
    t.equal(readFileSync(join(dir, 'rec-5', 'inner'), 'utf8'), 'inner')
    const linked = join(base, 'linked')
    mkdirSync(linked)
    writeFileSync(join(base, 'target'), 'target')
    symlinkSync(join(base, 'target'), join(linked, 'rec-1'))
    result = await write(linked, ['--duration', '1', '--force'])
    t.equal(result.code, 2, result.stderr)
    t.match(result.stderr, /"rec-1" \(a symbolic link\)/)
    t.equal(readFileSync(join(base, 'target'), 'utf8'), 'target')
  })

  t.test('PATH a symbolic link to a directory', async (t) => {
    mkdirSync(join(base, 'real'))
    symlinkSync(join(base, 'real'), join(base, 'alias'))
    const result = await write(join(base, 'alias'), ['--duration', '1'])
    t.equal(result.code, 2, result.stderr)
    t.match(result.stderr, /alias for --pattern files: it is a symbolic link/)
    t.same(readdirSync(join(base, 'real')), [])
  })

  t.test('record files but no superblock, or the superblock of another pattern', async (t) => {
    const dir = join(base, 'nosuper')
    mkdirSync(dir)
    writeFileSync(join(dir, 'rec-1'), 'one')
    const result = await write(dir, ['--duration', '1'])
    t.equal(result.code, 2, result.stderr)
    t.match(result.stderr, /holds record files but no superblock/)
    t.same(readdirSync(dir), ['rec-1'])
  })

  t.test('PATH a regular file: a user file, and an append run data file', async (t) => {
    const plain = join(base, 'plain')
    writeFileSync(plain, 'user data')
    let result = await write(plain, ['--duration', '1', '--force'])
    t.equal(result.code, 2, result.stderr)
    t.match(result.stderr, /it is a file, and the files pattern makes a directory there/)
    t.equal(readFileSync(plain, 'utf8'), 'user data')
    const data = join(base, 'append.dat')
    const append = await runCli(['write', '--server', listener.server, '--file', data, '--size', '1MiB', '--duration', '0.2'])
    t.equal(append.code, 0, append.stderr)
    const before = readFileSync(data)
    result = await write(data, ['--duration', '1'])
    t.equal(result.code, 2, result.stderr)
    t.same(readFileSync(data), before, 'the append data file untouched')
  })

  t.test('the files flags without --pattern files', async (t) => {
    for (const [flags, named] of [
      [['--no-dir-sync'], '--no-dir-sync is'],
      [['--dir-sync'], '--dir-sync is'],
      [['--publish', 'link'], '--publish is'],
      [['--keep-files', '5'], '--keep-files is'],
      [['--publish', 'rename', '--keep-files', '5'], '--publish, --keep-files are'],
    ] as const) {
      const file = join(base, 'never')
      const result = await runCli(['write', '--server', listener.server, '--file', file, '--duration', '1', ...flags])
      t.equal(result.code, 2, result.stderr)
      t.equal(result.stderr, `plugcheck: ${named} for --pattern files only\nhint: add --pattern files, or leave them out\n`)
      t.same(
        readdirSync(base).filter((n) => n === 'never'),
        [],
        'no file made',
      )
    }
  })

  t.test('--keep-files out of range, and a window --size cannot give', async (t) => {
    for (const [flags, message] of [
      [['--keep-files', '0'], /--keep-files must be at least 1/],
      [['--keep-files', '1.5'], /--keep-files must be a whole number/],
      [['--keep-files', String(2 ** 24 + 1)], /--keep-files is at most 16777216/],
      [['--size', '1TiB', '--record-size', '512'], /would keep 2147483647 record files; a files run keeps at most 16777216/],
    ] as const) {
      const result = await write(join(base, 'range'), ['--duration', '1', ...flags])
      t.equal(result.code, 2, result.stderr)
      t.match(result.stderr, message)
    }
    t.same(
      readdirSync(base).filter((n) => n === 'range'),
      [],
    )
  })
})

t.test('the watch over a files run: its superblock replaced by another program ends the run as changed, exit 3', async (t) => {
  const dir = join(tempDir(t), 'run')
  const { child: writer, out, exited } = watchCli(filesWriter(dir, ['--method', 'none', '--keep-files', '20']))
  t.teardown(() => writer.kill('SIGKILL'))
  await waitFor('record files', () => {
    try {
      return readdirSync(dir).some((name) => name.startsWith('rec-'))
    } catch {
      return false
    }
  })
  // Replaced by rename, as an editor saves: the path now names another file.
  writeFileSync(join(dir, '.superblock.plugcheck-0000000000000000.tmp'), readFileSync(join(dir, 'superblock')))
  renameSync(join(dir, '.superblock.plugcheck-0000000000000000.tmp'), join(dir, 'superblock'))
  t.equal(await exited, 3, out.stderr)
  t.match(out.stderr, new RegExp(`the data file ${dir}/superblock was replaced by another file during the run`))
})

/**
 * The writer's own system calls, under strace: per record, in this order, the create, the method's
 * file sync, the close, the publish, the recycling, the directory sync, and only then the ack's send.
 */
for (const variant of [
  { publish: 'rename', dirSync: true, extra: [] as string[] },
  { publish: 'link', dirSync: false, extra: ['--publish', 'link', '--no-dir-sync'] },
] as const) {
  t.test(
    `under strace (${variant.publish}, ${variant.dirSync ? 'directory sync' : 'no directory sync'}): every ack after the record's last durable step`,
    async (t) => {
      const base = tempDir(t)
      const log = join(base, 'strace.log')
      const keep = 3
      // More records than kept, so the recycling shows: a loaded machine under strace may need longer than 0.3 s.
      let acked = 0
      let ops: string[] = []
      for (const seconds of [0.3, 1, 3, 9]) {
        if (acked > keep) break
        const dir = join(base, `run-${seconds}`)
        const result = await runStraced(
          log,
          filesWriter(dir, ['--method', 'fdatasync', '--duration', String(seconds), '--keep-files', String(keep), ...variant.extra]),
        )
        t.equal(result.code, 0, result.stderr)
        const lines = readFileSync(log, 'utf8').split('\n')
        ops = lines.map((line) => opOf(line, dir)).filter((op) => op !== null)
        acked = ops.filter((op) => op === 'ack').length
      }
      t.ok(acked > keep, `${acked} acks`)
      const expected: string[] = []
      for (let seq = 1; seq <= acked; seq++) {
        expected.push(`create .rec-${seq}.tmp`, `fdatasync .rec-${seq}.tmp`, `close .rec-${seq}.tmp`)
        if (variant.publish === 'rename') expected.push(`rename .rec-${seq}.tmp rec-${seq}`)
        else expected.push(`link .rec-${seq}.tmp rec-${seq}`, `unlink .rec-${seq}.tmp`)
        if (seq > keep) expected.push(`unlink rec-${seq - keep}`)
        if (variant.dirSync) expected.push('fdatasync directory')
        expected.push('ack')
      }
      t.same(ops.slice(0, expected.length), expected, 'each record: create, sync, close, publish, recycle, directory sync, ack')
    },
  )
}

async function runStraced(log: string, args: readonly string[]) {
  const { spawn } = await import('node:child_process')
  const trace = ['-f', '-y', '-o', log, '-e', 'trace=openat,fdatasync,close,renameat,renameat2,linkat,unlinkat,sendto']
  const child = spawn('strace', [...trace, process.execPath, binPath, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
  child.stdout!.resume()
  const code = await new Promise<number | null>((resolve) => {
    void exitedWithOutput(child).then((exit) => resolve(exit.code)) // its stderr returned whole
    child.on('error', (error) => {
      stderr += `could not start strace (CONTRIBUTING.md lists it): ${error.message}`
      resolve(null)
    })
  })
  return { code, stderr }
}

/** One strace line as the step it is of a files run in dir, or null for any other call. */
function opOf(line: string, dir: string): string | null {
  const name = (quoted: string): string => quoted.replace(/^"|"$/g, '')
  if (/\bsendto\(\d+<(TCP|socket):.*\\243ack/.test(line)) return 'ack'
  let m = new RegExp(`\\bopenat\\(\\d+<${dir}>, "(\\.rec-\\d+\\.tmp)"`).exec(line)
  if (m !== null) return `create ${m[1]}`
  m = new RegExp(`\\b(fdatasync|close)\\(\\d+<${dir}/(\\.rec-\\d+\\.tmp)>\\)`).exec(line)
  if (m !== null) return `${m[1]} ${m[2]}`
  if (new RegExp(`\\bfdatasync\\(\\d+<${dir}>\\)`).test(line)) return 'fdatasync directory'
  m = new RegExp(`\\brenameat2?\\(\\d+<${dir}>, ("[^"]+"), \\d+<${dir}>, ("[^"]+")`).exec(line)
  if (m !== null) return `rename ${name(m[1]!)} ${name(m[2]!)}`
  m = new RegExp(`\\blinkat\\(\\d+<${dir}>, ("[^"]+"), \\d+<${dir}>, ("[^"]+")`).exec(line)
  if (m !== null) return `link ${name(m[1]!)} ${name(m[2]!)}`
  m = new RegExp(`\\bunlinkat\\(\\d+<${dir}>, ("[^"]+")`).exec(line)
  if (m !== null) return `unlink ${name(m[1]!)}`
  return null
}

t.test('a failed call ends the run (never retried): the directory made immutable mid-run, exit 3 naming the call', async (t) => {
  if (process.getuid?.() !== 0) {
    t.pass('chattr +i needs root; the suite runs as root (README)')
    return
  }
  const dir = join(tempDir(t), 'run')
  const { child: writer, out, exited } = watchCli(filesWriter(dir, ['--method', 'fdatasync', '--keep-files', '1000000']))
  t.teardown(() => {
    spawnSync('chattr', ['-i', dir])
    writer.kill('SIGKILL')
  })
  await waitFor('record files', () => {
    try {
      return readdirSync(dir).some((name) => name.startsWith('rec-'))
    } catch {
      return false
    }
  })
  const chattr = spawnSync('chattr', ['+i', dir], { encoding: 'utf8' })
  t.equal(chattr.status, 0, `chattr +i: ${chattr.stderr}`)
  t.equal(await exited, 3, out.stderr)
  t.match(
    out.stderr,
    new RegExp(`plugcheck: (openat|renameat|unlinkat|linkat) failed on ${dir}[^ ]* after seq \\d+ \\(method fdatasync\\): EPERM`),
  )
  const acknowledged = Number(/([\d,]+) records synced and acknowledged/.exec(out.stdout)?.[1]?.replace(/,/g, ''))
  spawnSync('chattr', ['-i', dir])
  const { records } = recordSeqs(dir)
  t.same(
    records.slice(0, acknowledged),
    Array.from({ length: acknowledged }, (_, i) => i + 1),
    'every acknowledged record file is there',
  )
  t.ok(records.length <= acknowledged + 1, 'at most the record whose call failed beyond them')
})
