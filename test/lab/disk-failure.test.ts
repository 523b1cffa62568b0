/**
 * Real I/O failures under a running writer: the run stops at the first failed call, never retries
 * it, says which call failed where, and every record acknowledged before it still verifies.
 *   - the disk vanishes (nbdkit and nbdfuse killed, the writer left running): fdatasync or pwrite fails
 *   - the file system fills up: pwrite fails with ENOSPC
 */
import t from 'tap'
import { join } from 'node:path'
import { Listener } from '../../src/server/listen/listener.js'
import { exitedWithOutput, fileSize, runInProcess, spawnCli, tempDir, traceEntryBytes, waitFor } from '../fixtures/cli.js'
import { labFor, labUnavailableReason } from '../fixtures/lab/harness.js'

const reason = labUnavailableReason()
if (reason !== null) {
  t.fail(
    `the power-cut lab cannot run here: ${reason}\nhint: run the suite as root on Linux with /dev/fuse and nbdkit, libnbd-bin, e2fsprogs (.ci/run installs them)`,
  )
} else {
  const outside = tempDir(t, 'plugcheck-lab-failure-')
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: join(outside, 'listener') })
  t.teardown(() => listener.close())
  const server = `127.0.0.1:${listener.address().port}`

  const startWriter = (file: string, extra: string[]) => {
    const trace = join(outside, `trace-${Date.now()}`)
    const writer = spawnCli(['write', '--server', server, '--file', file, '--trace-file', trace, ...extra])
    let stderr = ''
    writer.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
    // Once its last stderr lines are read: the tests match the failed call they name.
    const exit = exitedWithOutput(writer).then(({ code }) => code ?? -1)
    return { writer, exit, trace, stderr: () => stderr }
  }
  // The writer's exit code, or -2 when it had not exited within timeoutMs. The timer is cleared once the
  // writer exits: a pending one would keep this process alive long after its tests ended.
  const exitWithin = async (exit: Promise<number>, timeoutMs: number): Promise<number> => {
    let timer: NodeJS.Timeout | undefined
    const timedOut = new Promise<number>((resolve) => (timer = setTimeout(() => resolve(-2), timeoutMs)))
    const code = await Promise.race([exit, timedOut])
    clearTimeout(timer)
    return code
  }
  const verify = async (file: string) => {
    const result = await runInProcess(['verify', '--server', server, '--file', file, '--json'])
    return { code: result.code, run: JSON.parse(result.stdout).runs[0] }
  }

  t.test('the disk vanishes under the writer: exit 3 naming the failed call; acked records intact', async (t) => {
    const lab = await labFor(t, { mode: 'honest', imageSizeMiB: 64 })
    const file = join(lab.mountPoint, 'data')
    const { writer, exit, trace, stderr } = startWriter(file, ['--method', 'fdatasync', '--size', '8MiB'])
    await waitFor('the writer to sync 100 records', () => fileSize(trace) >= 100 * traceEntryBytes)
    await lab.cut([]) // the disk dies; the writer lives on and must notice
    const code = await exitWithin(exit, 30_000)
    if (code === -2) writer.kill('SIGKILL')
    t.equal(code, 3, `writer exit code (stderr: ${stderr()})`)
    // pread: the writer's read-back of its own records may meet the dead disk first.
    t.match(stderr(), /plugcheck: (fdatasync|pwrite|pread) failed on .*\/data after seq \d+ \(method fdatasync\): E[A-Z]+ \(/)
    // Acks sent just before the cut may still be in a socket buffer: the listener gets 200 ms at least
    // before verify asks it, while the disk reboots.
    await Promise.all([new Promise((resolve) => setTimeout(resolve, 200)), lab.reboot()])
    const { code: verifyCode, run } = await verify(file)
    t.equal(verifyCode, 0, 'every acknowledged record survived (honest disk)')
    t.match(run, { ended: 'error', lost: 0, torn: 0, corrupt: 0 })
    t.ok(run.acked >= 100)
  })

  t.test('the file system fills up: pwrite fails with ENOSPC, exit 3, acked records intact', async (t) => {
    const lab = await labFor(t, { mode: 'honest', imageSizeMiB: 16 })
    const file = join(lab.mountPoint, 'data')
    const { exit, stderr } = startWriter(file, ['--method', 'fdatasync', '--size', '64MiB', '--record-size', '64k'])
    const code = await exitWithin(exit, 60_000)
    t.equal(code, 3, `writer exit code (stderr: ${stderr()})`)
    t.match(stderr(), /plugcheck: pwrite failed on .*\/data after seq \d+ \(method fdatasync\): ENOSPC \(no space left on device\)/)
    const { code: verifyCode, run } = await verify(file)
    t.equal(verifyCode, 0)
    t.match(run, { ended: 'error', lost: 0, torn: 0, corrupt: 0 })
    t.ok(run.acked > 0 && run.intact === run.acked, `${run.acked} acknowledged records intact`)
  })
}
