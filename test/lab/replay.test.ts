/**
 * Record, then replay (the CI slice of `npm run lab -- --replay N`): a real plugcheck write (fdatasync)
 * on the lab's ext4 over the recording NBD server, per pattern; then crash states of the recording
 * rebuilt as images, mounted, and judged by `plugcheck verify --acks` and by the lab's own reader.
 * Consistent states must never fail, lying states that really lost an acknowledged record must fail,
 * and every verdict must match the lab's reader. Then ext4 mounted barrier=0 (no flush ever sent): its
 * honest-disk states must lose acked records, and verify must fail them. States are seeded (PLUGCHECK_LAB_SEED replays the
 * choice; a wrong verdict prints the line that replays it from the kept recording).
 */
import t from 'tap'
import fs from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type CrashState, consistentStates, lyingState, parseState, stateSpec, windowWrites } from '../fixtures/lab/crash-states.js'
import { labUnavailableReason } from '../fixtures/lab/harness.js'
import { recordRun } from '../fixtures/lab/record.js'
import { Replayer, replayCommand } from '../fixtures/lab/replay.js'
import { labSeed, seededRandom } from '../fixtures/lab/seeded.js'
import { stacks } from '../fixtures/lab/stacks.js'

const slice = { append: { consistent: 20, lying: 15 }, overwrite: { consistent: 12, lying: 10 } } as const
const nobarrierStates = 8

const reason = labUnavailableReason()
if (reason !== null) {
  t.fail(
    `the power-cut lab cannot run here: ${reason}\nhint: run the suite as root on Linux with /dev/fuse and nbdkit, libnbd-bin, e2fsprogs (.ci/run installs them)`,
  )
} else {
  const seed = labSeed()
  t.comment(`lab seed ${seed} (replay with PLUGCHECK_LAB_SEED=${seed})`)

  t.test('a crash state reads back from its one-line spec', async (t) => {
    const states: CrashState[] = [
      { kind: 'consistent', window: 12, keep: [40, 41], drop: [], torn: { write: 41, bytes: 512 } },
      { kind: 'lying', window: 3, keep: [], drop: [1, 2], torn: { write: 2, bytes: 4096 } },
      { kind: 'consistent', window: 0, keep: [], drop: [] },
      { kind: 'consistent', window: 7, keep: [1, 2, 3, 7, 9, 10], drop: [] },
    ]
    for (const state of states) t.same(parseState(stateSpec(state)), state, stateSpec(state))
    t.equal(stateSpec(states[3]!), 'consistent/w=7/keep=1-3,7,9-10/drop=/torn=')
    t.throws(() => parseState('consistent/w=x'), /not a crash state/)
  })

  t.test('ext4 mounted barrier=0 sends no flush: states an honest disk can leave lose acked records, and verify fails them', async (t) => {
    const random = seededRandom(seed)
    const dir = fs.mkdtempSync(join(tmpdir(), 'plugcheck-lab-replay-nobarrier-'))
    let keep = false
    t.teardown(() => (keep ? t.comment(`kept the recording in ${dir}`) : fs.rmSync(dir, { recursive: true, force: true })))
    const recording = await recordRun({
      outsideDir: dir,
      method: 'fdatasync',
      pattern: 'append',
      records: 80,
      stack: stacks['ext4-nobarrier'],
      size: '8MiB',
    })
    const replayer = new Replayer(recording, join(dir, 'scratch'))
    t.ok(replayer.log.flushes.length < 10, `ext4 sent ${replayer.log.flushes.length} flushes for 80 fdatasyncs`)
    const { last } = replayer.interestingWindows()
    let caught = 0
    for (const state of consistentStates(replayer.log, last, random, nobarrierStates)) {
      const result = await replayer.replay(state)
      if (result.wrong !== null) keep = true
      t.equal(result.wrong, null, `${stateSpec(state)}: ${result.detail}`)
      if (result.reallyLost > 0 && result.verifyCode === 1) caught++
    }
    t.ok(caught > 0, `verify failed ${caught} of ${nobarrierStates} states that lost acked records`)
  })

  for (const pattern of ['append', 'overwrite'] as const) {
    t.test(`ext4 fdatasync ${pattern}: consistent states pass, lying states that lost acked records fail`, async (t) => {
      const random = seededRandom(seed)
      const dir = fs.mkdtempSync(join(tmpdir(), `plugcheck-lab-replay-${pattern}-`))
      let keep = false
      t.teardown(() => (keep ? t.comment(`kept the recording in ${dir}`) : fs.rmSync(dir, { recursive: true, force: true })))
      const recording = await recordRun({ outsideDir: dir, method: 'fdatasync', pattern, records: 120, stack: stacks.ext4, size: '8MiB' })
      const replayer = new Replayer(recording, join(dir, 'scratch'))
      const { first, last } = replayer.interestingWindows()
      t.ok(replayer.log.flushes.length >= 120, `a flush per sync at least (${replayer.log.flushes.length} flushes)`)
      t.ok(last > first, `windows ${first}..${last}`)

      const check = async (state: CrashState): Promise<{ reallyLost: number; verifyCode: number | null }> => {
        const result = await replayer.replay(state)
        if (result.wrong !== null) keep = true
        t.equal(result.wrong, null, `${stateSpec(state)}: ${result.detail}`, {
          ...(result.wrong === null ? {} : { replay: replayCommand(dir, state) }),
        })
        return result
      }

      // The first window with acks and the last (every ack), every state of each; then a seeded sample of the rest.
      const pool: CrashState[] = []
      for (let w = first; w <= last; w++) pool.push(...consistentStates(replayer.log, w, random, 4))
      const ends = pool.filter((s) => s.window === first + 1 || s.window === last).slice(0, slice[pattern].consistent / 2)
      const sampled = Array.from({ length: slice[pattern].consistent - ends.length }, () => pool[Math.floor(random() * pool.length)]!)
      let tornChecked = 0
      for (const state of [...ends, ...sampled]) {
        const result = await check(state)
        t.not(result.verifyCode, 1, `consistent ${stateSpec(state)} is no failure`)
        if (state.torn !== undefined) tornChecked++
      }
      t.comment(`${tornChecked} consistent states with a torn write`)

      let failedLosses = 0
      for (let i = 0; i < slice[pattern].lying; i++) {
        const state = lyingState(replayer.log, first + 1 + Math.floor(random() * (last - first)), random)
        if (state === null) continue
        const result = await check(state)
        if (result.reallyLost > 0 && result.verifyCode === 1) failedLosses++
      }
      t.ok(failedLosses > 0, `lying states lost acknowledged records and verify failed them (${failedLosses} of ${slice[pattern].lying})`)

      // The ack set matters: one ack more than a window allows, while that record's write is not on the image, is a loss both judges see.
      const window = Math.floor((first + last) / 2)
      const acked = replayer.ackedThrough(window)
      const { from } = windowWrites(replayer.log, window)
      const bare: CrashState = { kind: 'consistent', window, keep: [], drop: [] }
      t.equal(from > 0, true)
      const overAcked = await replayer.replay(bare, acked + 1)
      t.equal(overAcked.reallyLost, 1, `acking seq ${acked + 1} in window ${window}: the lab's reader finds it gone`)
      t.equal(overAcked.verifyCode, 1, `and verify fails: ${overAcked.detail}`)
    })
  }
}
