/**
 * Another program (rm, a temporary-file cleaner) deletes record files a files run keeps while it
 * runs. The writer only notices when their turn to be recycled comes (unlinkat: ENOENT); it used to
 * end the run as a failed call ('error', "check the device"), and verify then judged the deleted
 * files lost: FAIL, "the storage stack reported these writes durable and then did not keep them".
 * Like a data file deleted during the run, it must end as 'file-changed': writer exit 3 naming what
 * happened, verify NOT JUDGED (exit 2), the storage not blamed.
 */
import t from 'tap'
import { existsSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, startListener, watchCli, tempDir, waitFor, type ListenerChild } from '../fixtures/cli.js'

let listener: ListenerChild
t.before(async () => {
  listener = await startListener(tempDir(t, 'plugcheck-files-rm-listener-'))
})
t.teardown(() => listener.kill())

t.test('kept record files deleted mid-run: the run ends as file-changed, verify judges nothing', async (t) => {
  const dir = join(tempDir(t), 'run')
  const args = ['write', '--server', listener.server, '--file', dir, '--pattern', 'files', '--keep-files', '100', '--duration', '60']
  const { child: writer, out, exited } = watchCli(args)
  t.teardown(() => writer.kill('SIGKILL'))
  await waitFor('rec-60', () => existsSync(join(dir, 'rec-60')), 30_000)
  for (let seq = 40; seq <= 60; seq++) rmSync(join(dir, `rec-${seq}`), { force: true }) // kept: the window is 100
  const code = await Promise.race([exited, new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), 30_000))])
  t.equal(code, 3, out.stderr)
  t.match(out.stderr, /the record file .*\/run\/rec-\d+ was deleted during the run, by something other than plugcheck/)
  t.match(out.stderr, /verify will not judge this run/)
  t.notMatch(out.stderr, /unlinkat failed/)

  const verify = await runCli(['verify', '--server', listener.server, '--file', dir])
  t.equal(verify.code, 2, 'not judged')
  t.match(
    verify.stdout + verify.stderr,
    /NOT JUDGED: run [0-9a-f]{16} \(fdatasync\) ended because the record file .* was deleted during the run/,
  )
  t.notMatch(verify.stdout, /FAIL/)
})
