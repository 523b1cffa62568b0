/**
 * A recording whose disk cannot start must fail at once and leave nothing open: a listener
 * left listening kept the test file alive until tap's 600 s timeout.
 */
import t from 'tap'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { waitFor } from '../fixtures/cli.js'
import { labUnavailableReason } from '../fixtures/lab/harness.js'
import { recordRun } from '../fixtures/lab/record.js'
import { stacks } from '../fixtures/lab/stacks.js'

const reason = labUnavailableReason()
if (reason !== null) {
  t.fail(`the lab cannot run here: ${reason}`)
} else {
  t.test('a disk that cannot start: recordRun rejects and closes its listener', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'plugcheck-record-start-'))
    t.teardown(() => rmSync(dir, { recursive: true, force: true }))
    const servers = (): number => process.getActiveResourcesInfo().filter((kind) => kind === 'TCPServerWrap').length
    const before = servers()
    // mkfs refuses an unknown option, so the lab's disk never starts.
    const broken = { ...stacks.ext4, mkfsArgs: ['--no-such-mkfs-option'] }
    await t.rejects(recordRun({ outsideDir: dir, method: 'fdatasync', pattern: 'append', records: 4, stack: broken, size: '1MiB' }), /mkfs/)
    // The server's handle goes once its close callback has run, which a loaded machine may put off a turn or two.
    const gone = await waitFor('the listening socket to close', () => servers() === before, 10_000).then(
      () => true,
      () => false,
    )
    t.ok(gone, `no listening socket left behind (${servers()} open, ${before} before)`)
    const mounts = readFileSync('/proc/self/mountinfo', 'utf8')
      .split('\n')
      .filter((line) => line.includes(dir))
    t.same(mounts, [], 'nothing left mounted under the recording')
  })
}
