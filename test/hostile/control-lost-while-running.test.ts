/**
 * A control (`none`) whose records the storage lost while the run was going, with no power cut at all:
 * the writer sees it, ends every run as `storage-lost` and exits 3 ("no verdict on a method"). Its
 * losses were not made by a cut (there was none), so verify must not call them proof that "the cut
 * was real" and pass the group: the cut tested nothing, the verdict is inconclusive (exit 4).
 */
import t from 'tap'
import { closeSync, openSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { fileSize, runCli, spawnCli, startListener, tempDir, waitFor } from '../fixtures/cli.js'

t.test('a control that lost records while running, no cut: verify does not say the cut was real', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'p.dat')
  const recordBytes = 8192
  const writer = spawnCli([
    'write',
    '--server',
    listener.server,
    '--file',
    file,
    '--method',
    'fdatasync,none',
    '--size',
    '64MiB',
    '--duration',
    '20',
  ])
  let stderr = ''
  writer.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
  const exited = new Promise<number>((resolve) => writer.on('close', (c) => resolve(c ?? -1)))
  t.teardown(() => void writer.kill('SIGKILL'))
  // Enough records in the control's file that slots 100..1099 hold acknowledged records.
  await waitFor(
    '1,200 control records',
    () => fileSize(`${file}.none`) >= recordBytes * 1300 && fileSize(`${file}.fdatasync`) >= recordBytes * 1300,
    30_000,
  )
  writer.kill('SIGSTOP')
  const fd = openSync(`${file}.none`, 'r+')
  writeSync(fd, Buffer.alloc(recordBytes * 1000), 0, recordBytes * 1000, recordBytes * 101)
  closeSync(fd)
  writer.kill('SIGCONT')
  const code = await exited
  t.equal(code, 3, `the writer ends the run as storage-lost of the control (stderr: ${stderr})`)
  t.match(stderr, /storage lost data while the run was going/)

  const verify = await runCli(['verify', '--server', listener.server, '--file', file])
  t.notMatch(verify.stdout, /the cut was real/, "no cut happened: the control's losses do not prove one")
  t.equal(verify.code, 4, `inconclusive: the cut tested nothing (stdout: ${verify.stdout}, stderr: ${verify.stderr})`)
})
