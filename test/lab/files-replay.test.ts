/**
 * Record, then replay a `--pattern files` run (the CI slice of `npm run lab -- --replay N --pattern
 * files`): a real plugcheck writer making record files (fdatasync, --keep-files 64) on the lab's file
 * system over the recording NBD server; then crash states rebuilt as images, mounted, and judged by
 * `plugcheck verify --acks` and by the lab's own reader of the directory (files-reader.ts).
 *
 *   ext4 rename         consistent states never lose an acknowledged file and never FAIL; lying states
 *                       that lost one (by the reader) all FAIL, and some did
 *   ext4 --no-dir-sync  consistent states lose acknowledged files (a rename not yet covered by any sync):
 *                       verify FAILs every one of them, and the lab counts none as a wrong verdict
 *   xfs --publish link  consistent states never lose one; no wrong verdict
 * States are seeded (PLUGCHECK_LAB_SEED replays the choice; a wrong verdict prints the line that replays
 * it from the kept recording). About a minute.
 */
import t from 'tap'
import { replayFilesCampaign } from '../fixtures/lab/files-replay.js'
import { labUnavailableReason } from '../fixtures/lab/harness.js'
import { type ReplayRow, wrongVerdicts } from '../fixtures/lab/replay-campaign.js'
import { labSeed } from '../fixtures/lab/seeded.js'
import type { StackName } from '../fixtures/lab/stacks.js'

const reason = labUnavailableReason()
if (reason !== null) {
  t.fail(
    `the power-cut lab cannot run here: ${reason}\nhint: run the suite as root on Linux with /dev/fuse and nbdkit, libnbd-bin, e2fsprogs, xfsprogs (.ci/run installs them)`,
  )
} else {
  const seed = labSeed()
  t.comment(`lab seed ${seed} (replay with PLUGCHECK_LAB_SEED=${seed})`)
  const lines: string[] = []
  const say = (line: string): void => void lines.push(line)
  const replay = async (stack: StackName, states: number, dirSync: boolean, publish: 'rename' | 'link') => {
    lines.length = 0
    const rows = await replayFilesCampaign(
      { states, stacks: [stack], method: 'fdatasync', seed, records: 80, dirSync, publish, keepFiles: 64 },
      say,
    )
    const consistent = rows.find((r) => r.kind === 'consistent')
    // Lying states come in a row per fault (dropped, torn, misdirected): counted together here.
    const lyingRows = rows.filter((r) => r.kind.startsWith('lying'))
    if (consistent === undefined || lyingRows.length === 0) throw new Error(`no rows: ${lines.join('\n')}`)
    const sum = (of: (r: ReplayRow) => number): number => lyingRows.reduce((n, r) => n + of(r), 0)
    const lying = { reallyLost: sum((r) => r.reallyLost), caught: sum((r) => r.caught), checked: sum((r) => r.checked) }
    return { rows, consistent, lying, log: lines.join('\n') }
  }
  const checked = (row: ReplayRow): number => row.checked - row.unmountable

  t.test('ext4, rename and directory sync: consistent states keep every acknowledged file, lying losses all fail', async (t) => {
    const { rows, consistent, lying, log } = await replay('ext4', 12, true, 'rename')
    t.equal(wrongVerdicts(rows), 0, `no wrong verdict:\n${log}`)
    t.equal(consistent.checked, 12)
    t.equal(consistent.reallyLost, 0, 'no consistent state lost an acknowledged file')
    t.equal(consistent.exits.get('0'), checked(consistent), 'verify passed every consistent state')
    t.ok(lying.reallyLost > 0, `lying states lost acknowledged files (${lying.reallyLost} of ${lying.checked}):\n${log}`)
    t.equal(lying.caught, lying.reallyLost, 'verify failed every lying state that lost one')
  })

  t.test('ext4 without the directory sync: the states that lose a published file are failed, not counted wrong', async (t) => {
    const { rows, consistent, log } = await replay('ext4', 8, false, 'rename')
    t.equal(wrongVerdicts(rows), 0, `no wrong verdict:\n${log}`)
    t.ok(consistent.reallyLost > 0, `consistent states lost acknowledged files without the directory sync (${consistent.reallyLost} of 8)`)
    t.equal(consistent.caught, consistent.reallyLost, 'verify failed each of them')
    t.equal(consistent.exits.get('1'), consistent.reallyLost, 'and only them')
  })

  t.test('xfs, link and unlink with the directory sync: consistent states keep every acknowledged file', async (t) => {
    const { rows, consistent, lying, log } = await replay('xfs', 6, true, 'link')
    t.equal(wrongVerdicts(rows), 0, `no wrong verdict:\n${log}`)
    t.equal(consistent.reallyLost, 0)
    t.equal(consistent.exits.get('0'), checked(consistent))
    t.equal(lying.caught, lying.reallyLost, 'every lying loss failed')
  })
}
