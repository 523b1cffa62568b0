/**
 * verify --file PATH.method or PATH.jobK, the names `ls` shows for a write of several methods or
 * --jobs: real writes (fdatasync and the none control, a short --duration) to a loopback listener,
 * then verify by each file's name, as a child process. The write is judged as `verify --file PATH`
 * judges it (the same runs, verdict and exit code, a note saying why), a flipped byte of a record
 * fails it, and a file whose superblock cannot be read, a copy under another name, another host or a
 * missing file judge nothing: exit 2 with the reason and, where one exists, the exact command.
 */
import t from 'tap'
import { copyFileSync, openSync, closeSync, writeSync, truncateSync, readFileSync } from 'node:fs'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { pathsByName } from '../../../../src/client/verify/member-file.js'
import { runCli, startListener, tempDir, type ListenerChild } from '../../../fixtures/cli.js'

interface Judged {
  readonly code: number
  readonly file: string
  readonly verdict: string
  readonly runIds: string[]
  readonly paths: string[]
  readonly notes: string[]
}

async function verifyJson(listener: ListenerChild, file: string, extra: readonly string[] = []): Promise<Judged> {
  const result = await runCli(['verify', '--server', listener.server, '--file', file, '--json', ...extra])
  if (result.stdout === '') throw new Error(`verify --file ${file} printed no report (exit ${result.code}): ${result.stderr}`)
  const report = JSON.parse(result.stdout) as { file: string; verdict: string; notes: string[]; runs: { runId: string; path: string }[] }
  return {
    code: result.code,
    file: report.file,
    verdict: report.verdict,
    runIds: report.runs.map((r) => r.runId),
    paths: report.runs.map((r) => r.path),
    notes: report.notes,
  }
}

async function write(listener: ListenerChild, file: string, extra: readonly string[]): Promise<void> {
  const result = await runCli(['write', '--server', listener.server, '--file', file, '--size', '1MiB', '--duration', '0.5', ...extra])
  if (result.code !== 0) throw new Error(`write exited ${result.code}: ${result.stderr}`)
}

/** Overwrites bytes of a file in place. */
function patch(path: string, offset: number, bytes: Buffer): void {
  const fd = openSync(path, 'r+')
  try {
    writeSync(fd, bytes, 0, bytes.length, offset)
  } finally {
    closeSync(fd)
  }
}

t.test('the paths a file name suggests', async (t) => {
  t.same(pathsByName('/m/x.dat.fsync.job2'), ['/m/x.dat.fsync', '/m/x.dat'])
  t.same(pathsByName('/m/x.dat.job12'), ['/m/x.dat'])
  t.same(pathsByName('/m/x.dat.fdatasync'), ['/m/x.dat'])
  t.same(pathsByName('/m/x.dat'), [], 'dat is no method')
  t.same(pathsByName('/m/x.dat.job0'), [], 'jobs count from 1')
})

t.test('a write of two methods: verify by each file name judges the write', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const path = join(dir, 'mm.dat')
  await write(listener, path, ['--method', 'fdatasync,none'])
  const plain = await verifyJson(listener, path)
  t.equal(plain.code, 4, 'no cut: the control lost nothing, inconclusive')
  t.same(
    plain.notes.filter((n) => n.includes('superblock says so')),
    [],
  )
  for (const method of ['fdatasync', 'none']) {
    const byName = await verifyJson(listener, `${path}.${method}`)
    t.equal(byName.code, plain.code, `${method}: the exit code of verify --file PATH`)
    t.equal(byName.verdict, plain.verdict)
    t.equal(byName.file, path, 'reported as the path given to write')
    t.same(byName.runIds, plain.runIds, 'the same runs judged')
    t.ok(
      byName.notes.includes(
        `${path}.${method} is the ${method} data file of the write to ${path} (its superblock says so): that write is judged, as plugcheck verify --server ${listener.server} --file ${path} judges it`,
      ),
      byName.notes.join('\n'),
    )
  }
  // A flipped byte in an acknowledged record of the fdatasync file: verify by the control's name fails the write, naming that file.
  patch(`${path}.fdatasync`, 8192 + 1000, Buffer.from([0xff ^ readFileSync(`${path}.fdatasync`)[8192 + 1000]!]))
  const failed = await runCli(['verify', '--server', listener.server, '--file', `${path}.none`])
  t.equal(failed.code, 1, failed.stderr)
  t.match(failed.stdout, /^FAIL/)
  t.match(failed.stdout, `${path}.fdatasync`)
})

t.test('a write of --jobs 2: verify by each job file judges the write; a damaged superblock judges nothing', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const path = join(dir, 'j.dat')
  await write(listener, path, ['--method', 'fdatasync', '--jobs', '2'])
  const plain = await verifyJson(listener, path)
  t.equal(plain.code, 0, 'pass')
  t.same(plain.paths, [`${path}.job1`, `${path}.job2`])
  for (const job of [1, 2]) {
    const byName = await verifyJson(listener, `${path}.job${job}`)
    t.equal(byName.code, 0, `job ${job}: pass, exit 0`)
    t.equal(byName.verdict, 'pass')
    t.same(byName.runIds, plain.runIds)
    t.ok(byName.notes.some((n) => n.startsWith(`${path}.job${job} is the data file of job ${job} of the write to ${path} `)))
  }

  const command = `plugcheck verify --server ${listener.server} --file ${path}`
  // The superblock's metadata with a byte flipped: its checksum no longer holds.
  copyFileSync(`${path}.job1`, join(dir, 'job1.saved'))
  patch(`${path}.job1`, 30, Buffer.from([0xff ^ readFileSync(`${path}.job1`)[30]!]))
  const damaged = await runCli(['verify', '--server', listener.server, '--file', `${path}.job1`])
  t.equal(damaged.code, 2)
  t.equal(damaged.stdout, '')
  t.equal(
    damaged.stderr,
    `plugcheck: no run found for ${path}.job1 written from host ${hostname()} (listener ${listener.server}); its superblock cannot say which write it belongs to (superblock checksum mismatch); the latest write to ${path} has the data file of job 1 at ${path}.job1\nhint: judge that write: ${command}\n`,
  )
  // Offline, from the listener's directory: the command names --acks, and no token (a directory takes none).
  const acksDir = join(dir, 'listener')
  const offline = await runCli(['verify', '--acks', acksDir, '--file', `${path}.job1`, '--token', 'unused'])
  t.equal(offline.code, 2)
  t.match(offline.stderr, `(ack directory ${acksDir}); its superblock cannot say which write it belongs to (superblock checksum mismatch)`)
  t.match(offline.stderr, `\nhint: judge that write: plugcheck verify --acks ${acksDir} --file ${path}\n`)
  // The command it names judges the write: the job whose superblock was damaged fails it.
  const judged = await runCli(command.split(' ').slice(1))
  t.equal(judged.code, 1, judged.stderr)
  t.match(judged.stdout, /superblock/)

  // Zeros over the superblock, and a file cut to nothing: the same refusal, with what was found.
  patch(`${path}.job1`, 0, Buffer.alloc(64))
  const zeros = await runCli(['verify', '--server', listener.server, '--file', `${path}.job1`])
  t.equal(zeros.code, 2)
  t.match(
    zeros.stderr,
    /its superblock cannot say which write it belongs to \(superblock is zeros\); the latest write to .*\nhint: judge that write: /,
  )
  truncateSync(`${path}.job1`, 0)
  const empty = await runCli(['verify', '--server', listener.server, '--file', `${path}.job1`])
  t.equal(empty.code, 2)
  t.match(empty.stderr, /\(file is 0 bytes, shorter than a superblock\)/)

  // A copy under another name: its superblock names the file it was written as.
  copyFileSync(join(dir, 'job1.saved'), join(dir, 'copy.dat'))
  const copy = await runCli(['verify', '--server', listener.server, '--file', join(dir, 'copy.dat')])
  t.equal(copy.code, 2)
  t.match(copy.stderr, `whose data file is ${path}.job1, not this one (copied or renamed?)`)

  // Verify for another host: the file's writer is named, with the command for it.
  const other = await runCli(['verify', '--server', listener.server, '--file', `${path}.job2`, '--host', 'elsewhere'])
  t.equal(other.code, 2)
  t.match(other.stderr, `: another machine wrote it\nhint: if it did: ${command} --host ${hostname()}\n`)

  // No file and no run: nothing to name.
  const missing = await runCli(['verify', '--server', listener.server, '--file', join(dir, 'gone.dat.job1')])
  t.equal(missing.code, 2)
  t.match(missing.stderr, 'and there is no file at that path\nhint: give --file the path given to write')
  for (const result of [damaged, zeros, empty, copy, other, missing]) t.notMatch(result.stderr, /internal error| {4}at /, 'no crash')
})

t.test('a file found by its own name is judged as before, with no note', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  // One method, written to a path that looks like a member's: the listener knows it by this name.
  const path = join(dir, 's.dat.fdatasync')
  await write(listener, path, ['--method', 'fdatasync'])
  const judged = await verifyJson(listener, path)
  t.equal(judged.code, 0)
  t.equal(judged.file, path)
  t.same(judged.paths, [path])
  t.same(
    judged.notes.filter((n) => n.includes('superblock says so')),
    [],
  )
})
