/**
 * The data file on disk holds a run that vanished (a power cut) and was never verified, written
 * under another host name than this write's: the machine came back with a new name (DHCP or
 * cloud-init naming it), or the disk is shared with the machine that wrote it. The file's superblock
 * names that run; the listener holds it, vanished, unverified. A new `write` on the path replaces the
 * file and destroys that evidence: it must be refused (exit 2, naming the verify command), the file
 * left as it was, unless --discard-unverified.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { binPath, fileSize, runCli, startListener, tempDir, traceEntryBytes, waitFor } from '../fixtures/cli.js'

t.test('a write does not destroy the unverified run of the file under its old host name', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'listener'))
  t.teardown(() => listener.kill())
  const file = join(dir, 'p.dat')
  const trace = join(dir, 'trace')
  // The writer, on this machine under its earlier name.
  const writer = spawn(
    'unshare',
    [
      '--uts',
      'sh',
      '-c',
      'hostname plugcheck-old-name && exec "$@"',
      'sh',
      process.execPath,
      binPath,
      'write',
      '--server',
      listener.server,
      '--file',
      file,
      '--method',
      'fdatasync',
      '--trace-file',
      trace,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  )
  let stderr = ''
  writer.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
  const exited = new Promise<void>((resolve) => writer.on('exit', () => resolve()))
  try {
    await waitFor(`200 synced records (${stderr})`, () => fileSize(trace) >= 200 * traceEntryBytes)
  } finally {
    writer.kill('SIGKILL') // the power cut
    await exited
  }
  const runs = await runCli(['runs', '--server', listener.server])
  t.match(runs.stdout, /plugcheck-old-name.*vanished/, "the listener holds the old name's run, vanished")
  const before = readFileSync(file)

  const again = await runCli(['write', '--server', listener.server, '--file', file, '--method', 'fdatasync', '--duration', '1'])
  t.equal(
    again.code,
    2,
    `refused: the file holds an unverified vanished run (stdout: ${again.stdout.slice(0, 300)} stderr: ${again.stderr})`,
  )
  t.match(again.stderr, /refusing to write/)
  t.ok(readFileSync(file).equals(before), 'the evidence is untouched')
})
