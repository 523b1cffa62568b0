/**
 * plugcheck's commands under Wine with the Windows node.exe, against a Linux listener on 127.0.0.1:
 * the Windows method table, a multi-method write and its verify, a flipped byte caught, bench's
 * Windows rows, and bad input answered in one line with the right exit code. Wine ignores
 * write-through and NO_BUFFERING and turns every flush into fsync: this proves the bindings, the
 * buffers, the error paths and the ack channel over Winsock, not durability.
 */
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readSync, readdirSync, writeFileSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { execFileSync, spawnSync } from 'node:child_process'
import t from 'tap'
import { startListener, tempDir } from '../fixtures/cli.js'
import { ensureWine, runWine, winePath, wineRunTimeoutMs } from '../fixtures/wine.js'

t.test('plugcheck on Windows (under Wine)', async (t) => {
  ensureWine()
  const dir = tempDir(t, 'plugcheck-win-')
  const listener = await startListener(join(dir, 'acks'))
  t.teardown(() => listener.kill())
  const run = (args: string[]) => runWine(args, { timeoutMs: wineRunTimeoutMs })

  t.test('methods --json: the Windows table, fdatasync n/a naming NtFlushBuffersFileEx', async (t) => {
    const result = await run(['methods', '--json'])
    t.equal(result.code, 0, result.stderr)
    const report = JSON.parse(result.stdout)
    t.equal(report.platform, 'win32')
    t.equal(report.family, 'windows')
    const row = (name: string) => report.methods.find((m: { name: string }) => m.name === name)
    t.equal(row('fdatasync').available, false)
    t.match(row('fdatasync').reason, /NtFlushBuffersFileEx/)
    t.equal(row('flush_data_only').available, false)
    t.match(row('open_datasync').calls, /FILE_FLAG_WRITE_THROUGH/)
    t.match(row('fsync').calls, /FlushFileBuffers/)
    t.match(row('fsync_writethrough').calls, /FlushFileBuffers/)
    t.equal(row('open_sync').available, false)
    t.equal(row('none').available, true)
    t.match(report.direct.how, /FILE_FLAG_NO_BUFFERING/)
    t.match(report.notes.join('\n'), /Wine/)
    const text = await run(['methods'])
    t.equal(text.code, 0)
    t.match(text.stdout, /^Sync methods on Windows \(windows port\):/)
    t.match(text.stdout, /^ {2}fdatasync +n\/a +NtFlushBuffersFileEx/m)
    // --pattern files: Windows cannot flush a directory, and says so for every method that syncs.
    for (const name of ['fsync', 'fsync_writethrough', 'open_datasync'])
      t.match(row(name).directorySync, /^none: Windows cannot flush a directory \(MoveFileExW with MOVEFILE_WRITE_THROUGH instead\)$/)
    t.equal(row('none').directorySync, 'none (the control)')
    t.match(text.stdout, /^--pattern files: after each record file is synced \(as above\) and renamed, the directory gets:$/m)
    t.match(text.stdout, /^ {2}fsync +none: Windows cannot flush a directory/m)
  })

  for (const publish of ['rename', 'link'] as const) {
    t.test(`write --pattern files --publish ${publish} under Wine: rec-1 .. rec-N, N acknowledged, no temporary name`, async (t) => {
      const files = join(dir, `files-${publish}`)
      const write = await run([
        'write',
        '--server',
        listener.server,
        '--file',
        winePath(files),
        '--pattern',
        'files',
        '--publish',
        publish,
        '--method',
        'fsync',
        '--keep-files',
        '1000000',
        '--duration',
        '1',
        '--json',
      ])
      t.equal(write.code, 0, write.stderr)
      const summary = write.stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line))
        .find((e) => e.event === 'summary')
      const acknowledged: number = summary.runs[0].acknowledged
      t.ok(acknowledged > 0)
      const names = readdirSync(files).filter((n) => n !== 'superblock')
      t.same(
        names.map((n) => Number(/^rec-(\d+)$/.exec(n)?.[1])).sort((a, b) => a - b),
        Array.from({ length: acknowledged }, (_, i) => i + 1),
      )
    })
  }

  const file = join(dir, 'data')
  t.test('write with four methods for 2 s, then verify under Wine: every acked record intact', async (t) => {
    const write = await run([
      'write',
      '--server',
      listener.server,
      '--file',
      winePath(file),
      '--method',
      'open_datasync,fsync,fsync_writethrough,none',
      '--duration',
      '2',
    ])
    t.equal(write.code, 0, write.stderr)
    // The printed command, pasted into a POSIX shell (a Linux terminal driving Wine): forward slashes, which it keeps.
    const printed = /after a power cut and reboot: plugcheck (verify .*)$/m.exec(write.stdout)?.[1] ?? ''
    t.equal(printed, `verify --server ${listener.server} --file ${winePath(file).replace(/\\/g, '/')}`, 'the path with forward slashes')
    const pasted = execFileSync('sh', ['-c', `printf '%s\\0' ${printed}`], { encoding: 'utf8' })
      .split('\0')
      .slice(0, -1)
    t.same(pasted, ['verify', '--server', listener.server, '--file', winePath(file).replace(/\\/g, '/')], 'the shell passes it on whole')
    for (const method of ['open_datasync', 'fsync', 'fsync_writethrough', 'none'])
      t.ok(existsSync(`${file}.${method}`), `${method} file written`)
    // The run was stored under the backslash spelling (write resolves its path): the pasted command finds it.
    const verify = await run([...pasted, '--json'])
    t.equal(verify.code, 4, `the none control lost nothing without a cut: inconclusive (${verify.stderr})`)
    const report = JSON.parse(verify.stdout)
    t.equal(report.file, winePath(file), 'the path as the run stored it')
    t.equal(report.runs.length, 4)
    t.match(report.notes.join('\n'), /open_datasync on Windows: .*FUA/, "verify says what the method promises on the writer's platform")
    // Wine has no boot id: verify cannot tell whether the machine rebooted, and says so.
    for (const r of report.runs) t.equal(r.rebootedSinceWrite, null, `${r.method}: reboot unknown`)
    t.ok(
      report.notes.includes(
        'could not tell whether this machine rebooted since the write (no boot id on this platform): a pass proves nothing unless the power was really cut',
      ),
      `the unknown boot is a note: ${JSON.stringify(report.notes)}`,
    )
    const text = await run(pasted)
    t.equal(text.code, 4, text.stderr)
    t.match(text.stdout, /^note: could not tell whether this machine rebooted since the write \(no boot id on this platform\)/m)
    for (const r of report.runs) {
      t.ok(r.acked > 0, `${r.method}: records acked`)
      t.equal(r.intact, r.acked, `${r.method}: every acked record intact`)
      t.equal(r.lost, 0)
    }
  })

  t.test('a byte flipped in a record written on Windows is caught by verify on Windows', async (t) => {
    const path = `${file}.fsync`
    const fd = openSync(path, 'r+')
    const byte = Buffer.alloc(1)
    const offset = 8192 * 3 + 100 // record 3 (after the superblock), inside its payload
    readSync(fd, byte, 0, 1, offset)
    byte[0] = byte[0]! ^ 0xff
    writeSync(fd, byte, 0, 1, offset)
    closeSync(fd)
    const verify = await run(['verify', '--server', listener.server, '--file', winePath(file), '--json'])
    t.equal(verify.code, 1, verify.stderr)
    const report = JSON.parse(verify.stdout)
    const fsync = report.runs.find((r: { method: string }) => r.method === 'fsync')
    t.equal(fsync.verdict, 'fail')
    t.ok(fsync.corrupt + fsync.lost + fsync.torn >= 1, 'the damaged record is reported')
  })

  t.test('flush_data_only where NtFlushBuffersFileEx is missing: exit 2 naming it, nothing written', async (t) => {
    const target = join(dir, 'fdo')
    const result = await run([
      'write',
      '--server',
      listener.server,
      '--file',
      winePath(target),
      '--method',
      'flush_data_only',
      '--duration',
      '1',
    ])
    t.equal(result.code, 2)
    t.match(result.stderr, /^plugcheck: method flush_data_only is not available here: NtFlushBuffersFileEx/)
    t.notOk(existsSync(target))
  })

  t.test('bench --secs 0.2 prints the Windows rows', async (t) => {
    const benchDir = join(dir, 'bench')
    mkdirSync(benchDir)
    const result = await run(['bench', '--secs', '0.2', '--file', winePath(benchDir)])
    t.equal(result.code, 0, result.stderr)
    t.match(result.stdout, /^system {7}Windows /m)
    t.match(result.stdout, /^direct I\/O \(the "direct" rows\): CreateFileW\(FILE_FLAG_NO_BUFFERING\)/m)
    t.match(result.stdout, /^ {8}open_datasync \(buffered\) +[\d.]+ ops\/sec/m)
    t.match(result.stdout, /^ {8}open_datasync \(direct\) +[\d.]+ ops\/sec/m)
    t.match(result.stdout, /^ {8}fsync +[\d.]+ ops\/sec/m)
    t.match(result.stdout, /^ {8}fsync_writethrough +[\d.]+ ops\/sec/m)
    t.match(result.stdout, /^ {8}fdatasync +n\/a +NtFlushBuffersFileEx/m)
    t.match(result.stdout, /^note: running under Wine/m)
  })

  t.test('bad input: one line, the right exit code', async (t) => {
    const folder = join(dir, 'a-folder')
    mkdirSync(folder)
    const asDirectory = await run([
      'write',
      '--server',
      listener.server,
      '--file',
      winePath(folder),
      '--method',
      'fsync',
      '--duration',
      '1',
    ])
    t.equal(asDirectory.code, 2)
    t.match(asDirectory.stderr, /^plugcheck: refusing to write to Z:\\.*a-folder: it is a directory\n/)

    const missing = await run([
      'write',
      '--server',
      listener.server,
      '--file',
      winePath(join(dir, 'no-such-folder', 'data')),
      '--method',
      'fsync',
      '--duration',
      '1',
    ])
    t.equal(missing.code, 2)
    t.match(missing.stderr, /^plugcheck: the folder Z:\\.*no-such-folder does not exist\n/)

    // Root ignores file modes, and so does Wine for root: make the file immutable as well.
    const readOnly = join(dir, 'read-only')
    writeFileSync(readOnly, 'not plugcheck data')
    chmodSync(readOnly, 0o444)
    const immutable = spawnSync('chattr', ['+i', readOnly])
    t.teardown(() => spawnSync('chattr', ['-i', readOnly]))
    t.equal(immutable.status, 0, 'chattr +i')
    const refused = await run(['write', '--server', listener.server, '--file', winePath(readOnly), '--method', 'fsync', '--duration', '1'])
    t.equal(refused.code, 2, 'not a plugcheck data file: refused without --force')
    t.match(refused.stderr, /^plugcheck: refusing to overwrite Z:\\.*read-only: it is not a plugcheck data file/)
    const forced = await run([
      'write',
      '--server',
      listener.server,
      '--file',
      winePath(readOnly),
      '--method',
      'fsync',
      '--duration',
      '1',
      '--force',
    ])
    t.equal(forced.code, 3, forced.stderr)
    t.match(forced.stderr, /^plugcheck: could not create Z:\\.*read-only: EPERM \(/m)
    t.notMatch(forced.stderr, /internal error|\n\s+at /)

    const benchMissing = await run(['bench', '--secs', '0.1', '--file', winePath(join(dir, 'no-such-folder', 'x'))])
    t.equal(benchMissing.code, 2)
    t.match(benchMissing.stderr, /^plugcheck: could not create Z:\\.*: ENOENT/)
  })
})
