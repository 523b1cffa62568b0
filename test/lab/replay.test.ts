/**
 * Record, then replay (the CI slice of `npm run lab -- --replay N`): a real plugcheck write (fdatasync)
 * on the lab's ext4 over the recording NBD server, per pattern; then crash states of the recording
 * rebuilt as images, mounted, and judged by `plugcheck verify --acks` and by the lab's own reader.
 * Consistent states must never fail, lying states that really lost an acknowledged record must fail,
 * and every verdict must match the lab's reader. Then ext4 mounted barrier=0 (no flush ever sent): its
 * honest-disk states must lose acked records, and verify must fail them. Then the product's other
 * writes: `--method fdatasync,none` (the control's lost records are its own: the group still passes)
 * and `--direct --jobs 2` (two threads, files and traces). Lying states come a third per fault:
 * dropped, torn, misdirected. The lab's verdict rules (replay-verdict.ts) are checked against verify's
 * over every mix of runs. States are seeded (PLUGCHECK_LAB_SEED replays the
 * choice; a wrong verdict prints the line that replays it from the kept recording).
 */
import t from 'tap'
import fs from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  type BlockLog,
  type CrashState,
  consistentStates,
  lyingFault,
  lyingFaults,
  lyingState,
  parseState,
  stateSpec,
  stateWrites,
  windowWrites,
} from '../fixtures/lab/crash-states.js'
import { labUnavailableReason } from '../fixtures/lab/harness.js'
import { recordRun } from '../fixtures/lab/record.js'
import { Replayer, replayCommand, type StateResult } from '../fixtures/lab/replay.js'
import { expectedExitCode, type RunReading } from '../fixtures/lab/replay-verdict.js'
import { groupVerdict, roleOf, verdictExitCodes } from '../../src/client/verify/verdict-rules.js'
import { labSeed, seededRandom } from '../fixtures/lab/seeded.js'
import { stacks } from '../fixtures/lab/stacks.js'

const slice = { append: { consistent: 20, lying: 15 }, overwrite: { consistent: 12, lying: 12 } } as const
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
      { kind: 'lying', window: 5, keep: [9], drop: [], moved: [{ write: 3, toBytes: 1052672 }] },
      {
        kind: 'lying',
        window: 5,
        keep: [],
        drop: [],
        moved: [
          { write: 2, toBytes: 8192 },
          { write: 4, toBytes: 0 },
        ],
      },
    ]
    for (const state of states) t.same(parseState(stateSpec(state)), state, stateSpec(state))
    t.equal(stateSpec(states[3]!), 'consistent/w=7/keep=1-3,7,9-10/drop=/torn=')
    t.equal(stateSpec(states[5]!), 'lying/w=5/keep=/drop=/torn=/moved=2@8192,4@0')
    t.same(
      states.map((s) => lyingFault(s)),
      [null, 'torn', null, null, 'misdirected', 'misdirected'],
    )
    t.throws(() => parseState('consistent/w=x'), /not a crash state/)
    t.throws(() => parseState('lying/w=5/keep=/drop=/torn=/moved=2'), /not a crash state/)
  })

  t.test("the lab's verdict of a state is verify's documented one, for every mix of tested runs, controls and jobs", async (t) => {
    // Every group of 1 to 3 runs (a tested method, --direct, the control; jobs of one method) over every
    // reading of a run: acked or not, its superblock its own or not, acked records lost or not.
    const kinds = [
      { method: 'fdatasync', direct: false },
      { method: 'fdatasync', direct: true },
      { method: 'none', direct: false },
    ]
    const readings: RunReading[] = kinds.flatMap((k) =>
      [0, 5].flatMap((acked) => [true, false].flatMap((superblockValid) => [0, 2].map((lost) => ({ ...k, acked, superblockValid, lost })))),
    )
    // A writer that saw the subtle disk lose a record ended its run storage-lost: lost-running, in pairs.
    const endedStorageLost: RunReading[] = readings.filter((r) => r.lost > 0).map((r) => ({ ...r, endedStorageLost: true }))
    let groups = 0
    const check = (runs: RunReading[]): void => {
      groups++
      const verdict = groupVerdict(
        runs.map((r) => ({
          ...r,
          role: roleOf(r.method),
          torn: 0,
          corrupt: 0,
          superblock: { kind: r.superblockValid ? 'valid' : 'damaged' },
          ended: r.endedStorageLost === true ? 'storage-lost' : null,
        })),
      )
      const lab = expectedExitCode(runs)
      if (lab !== verdictExitCodes[verdict]) t.fail(`${JSON.stringify(runs)}: the lab wants ${lab}, verify's rules say ${verdict}`)
    }
    for (const a of readings) {
      for (const b of readings) for (const c of readings) check([a, b, c])
    }
    for (const a of [...readings, ...endedStorageLost]) {
      check([a])
      for (const b of [...readings, ...endedStorageLost]) check([a, b])
    }
    t.pass(`${groups} groups agree`)
    // The control's lost records are its own: the group passes when the tested method kept everything.
    const tested = { method: 'fdatasync', direct: false, acked: 5, superblockValid: true, lost: 0 }
    t.equal(expectedExitCode([tested, { method: 'none', direct: false, acked: 5, superblockValid: true, lost: 3 }]), 0)
    t.equal(
      expectedExitCode([tested, { method: 'none', direct: false, acked: 5, superblockValid: true, lost: 0 }]),
      4,
      'a control that kept all: the cut tested nothing',
    )
    t.equal(
      expectedExitCode([tested, { method: 'none', direct: false, acked: 5, superblockValid: false, lost: 0 }]),
      1,
      "the control's fsynced file lost",
    )
  })

  t.test('a misdirected write lands at the wrong offset in its place in the order, and its own offset keeps what was there', async (t) => {
    const sector = (fill: string): Buffer => Buffer.alloc(1024, fill)
    // Window 0: writes 0-2, flush 1; window 1: write 3, flush 2; window 2: write 4 (not covered).
    const log: BlockLog = {
      writes: [
        { op: 0, offsetBytes: 0, data: sector('a') },
        { op: 1, offsetBytes: 4096, data: sector('b') },
        { op: 2, offsetBytes: 8192, data: sector('c') },
        { op: 4, offsetBytes: 4608, data: sector('d') },
        { op: 6, offsetBytes: 12288, data: sector('e') },
      ],
      flushes: [
        { writesBefore: 3, repliedNs: 10n },
        { writesBefore: 4, repliedNs: 20n },
      ],
    }
    const shifted = stateWrites(log, { kind: 'lying', window: 2, keep: [], drop: [], moved: [{ write: 1, toBytes: 4608 }] })
    t.same(
      shifted.map((w) => [w.offsetBytes, w.data[0]]),
      [
        [0, 0x61],
        [4608, 0x62],
        [8192, 0x63],
        [4608, 0x64],
      ],
      'write 1 shifted by a sector, before write 3 that covers the same sector; 4096 is never written',
    )
    const swapped = stateWrites(log, {
      kind: 'lying',
      window: 2,
      keep: [4],
      drop: [],
      moved: [
        { write: 0, toBytes: 8192 },
        { write: 2, toBytes: 0 },
      ],
    })
    t.same(
      swapped.map((w) => [w.offsetBytes, w.data[0]]),
      [
        [8192, 0x61],
        [4096, 0x62],
        [0, 0x63],
        [4608, 0x64],
        [12288, 0x65],
      ],
    )
    const random = seededRandom(7)
    let drawn = 0
    for (let i = 0; i < 50; i++) {
      const state = lyingState(log, 2, random, 'misdirected')
      if (state === null) continue
      drawn++
      t.equal(lyingFault(state), 'misdirected')
      for (const { write, toBytes } of state.moved!) {
        t.ok(write < 4, `write ${write} was covered by a completed flush`)
        t.not(toBytes, log.writes[write]!.offsetBytes, 'at another offset')
        t.ok(toBytes >= 0 && toBytes + 1024 <= 12288 + 1024, 'within what the recording wrote')
      }
    }
    t.ok(drawn > 40, `${drawn} of 50 misdirected states drawn`)
    for (const fault of lyingFaults) {
      const state = lyingState(log, 2, seededRandom(1), fault)
      t.equal(state === null ? null : lyingFault(state), fault)
    }
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

      // Lying states, their faults in turn: every fault must cost an acked record in some state, and verify must fail it.
      // A state of a fault may hurt nothing acked (about half of the torn ones do): a fault that has not yet cost a
      // record gets more states, up to three times its share, so a seed cannot leave one untested (each state is
      // judged all the same: a wrong verdict in any is a failure).
      const share = slice[pattern].lying / lyingFaults.length
      const failedLosses = new Map<string, number>(lyingFaults.map((f) => [f, 0]))
      const tried = new Map<string, number>(lyingFaults.map((f) => [f, 0]))
      for (let i = 0; ; i++) {
        const fault = lyingFaults[i % lyingFaults.length]!
        if (i >= slice[pattern].lying && lyingFaults.every((f) => failedLosses.get(f)! > 0 || tried.get(f)! >= 3 * share)) break
        if (i >= slice[pattern].lying && (failedLosses.get(fault)! > 0 || tried.get(fault)! >= 3 * share)) continue
        tried.set(fault, tried.get(fault)! + 1)
        const state = lyingState(replayer.log, first + 1 + Math.floor(random() * (last - first)), random, fault)
        if (state === null) continue
        const result = await check(state)
        if (result.reallyLost > 0 && result.verifyCode === 1) failedLosses.set(fault, failedLosses.get(fault)! + 1)
      }
      for (const [fault, n] of failedLosses)
        t.ok(n > 0, `lying states (${fault}) lost acknowledged records and verify failed them (${n} of ${tried.get(fault)})`)

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

  // More of the product under replay: the control beside fdatasync (one group of two runs), --direct
  // with --jobs 2 (two threads, two files, two traces), and --direct on the subtle disk (it loses a few
  // percent of the record writes it acknowledged, during the run: its disk seed is fixed, so it loses
  // the first of them within a few records): each run's acks from its own trace, each run's file read
  // by the lab, the group's verdict by verify's rules.
  interface Product {
    readonly flags: string
    readonly method: string
    readonly pattern: 'append' | 'overwrite'
    /** write --size: 1 MiB holds 127 records of 8 KiB, so the control's overwrites hit the same slots. */
    readonly size?: string
    readonly runs: number
    readonly direct?: boolean
    readonly jobs?: number
    readonly subtle?: boolean
    readonly consistent: number
    readonly lying: number
  }
  const products: readonly Product[] = [
    // Overwrite: the page cache replaces a control record with a newer one of its slot before writing it back, so no write holds it.
    { flags: 'fdatasync,none', method: 'fdatasync,none', pattern: 'overwrite', size: '1MiB', runs: 2, consistent: 8, lying: 6 },
    {
      flags: 'fdatasync --direct --jobs 2',
      method: 'fdatasync',
      pattern: 'append',
      runs: 2,
      direct: true,
      jobs: 2,
      consistent: 8,
      lying: 6,
    },
    {
      flags: 'fdatasync --direct on the subtle disk',
      method: 'fdatasync',
      pattern: 'append',
      runs: 1,
      direct: true,
      subtle: true,
      consistent: 4,
      lying: 3,
    },
  ]
  const subtleDiskSeed = 6
  for (const product of products) {
    const what = product.method.includes('none')
      ? "every verdict right, the control's losses its own"
      : product.subtle === true
        ? 'states that lost acked records fail'
        : 'every verdict right'
    t.test(`ext4 ${product.pattern}, write --method ${product.flags}: ${what}`, async (t) => {
      const random = seededRandom(seed)
      const dir = fs.mkdtempSync(join(tmpdir(), 'plugcheck-lab-replay-product-'))
      let keep = false
      t.teardown(() => (keep ? t.comment(`kept the recording in ${dir}`) : fs.rmSync(dir, { recursive: true, force: true })))
      const recording = await recordRun({
        outsideDir: dir,
        method: product.method,
        pattern: product.pattern,
        records: 100,
        stack: stacks.ext4,
        size: product.size ?? '8MiB',
        ...(product.direct === true ? { direct: true } : {}),
        ...(product.jobs === undefined ? {} : { jobs: product.jobs }),
        ...(product.subtle === true ? { disk: 'subtle' as const, seed: subtleDiskSeed } : {}),
      })
      t.equal(recording.runs.length, product.runs, `${product.runs} runs recorded`)
      t.equal(recording.tracePaths.length, product.jobs ?? 1)
      const replayer = new Replayer(recording, join(dir, 'scratch'))
      const { first, last } = replayer.interestingWindows()
      const lastAcks = replayer.ackedPerRun(last)
      t.ok(
        lastAcks.every((n) => n > 0),
        `every run acked records by the last window (${lastAcks.join(', ')})`,
      )
      const lostByDisk = replayer.log.writes.filter((w) => w.lostByDisk === true).length
      if (product.subtle === true) t.ok(lostByDisk > 0, `the subtle disk lost ${lostByDisk} record writes`)
      else t.equal(lostByDisk, 0, 'the honest disk lost no write')
      const results: StateResult[] = []
      const check = async (state: CrashState): Promise<void> => {
        const result = await replayer.replay(state)
        if (result.wrong !== null) keep = true
        t.equal(result.wrong, null, `${stateSpec(state)}: ${result.detail}`, {
          ...(result.wrong === null ? {} : { replay: replayCommand(dir, state) }),
        })
        results.push(result)
      }
      const pool: CrashState[] = []
      for (let w = first; w <= last; w++) pool.push(...consistentStates(replayer.log, w, random, 4))
      // The last window first (every ack of every run), then a seeded sample.
      const lastWindow = pool.filter((s) => s.window === last).slice(0, 2)
      const sampled = Array.from({ length: product.consistent - lastWindow.length }, () => pool[Math.floor(random() * pool.length)]!)
      for (const state of [...lastWindow, ...sampled]) await check(state)
      const consistent = results.slice()
      if (product.subtle === true) {
        t.ok(
          consistent.some((r) => r.reallyLost > 0 && r.verifyCode === 1),
          'a consistent state of the subtle disk lost acked records, and verify failed it',
        )
      } else {
        t.ok(
          consistent.every((r) => r.verifyCode !== 1),
          'no consistent state fails',
        )
      }
      // A lying state may happen to break only what no ack covers (a write rewritten later, a block of
      // the file system's): more are drawn, up to four times as many, until one costs an acked record.
      const lyingLost = (): boolean => results.slice(consistent.length).some((r) => r.reallyLost > 0)
      for (let i = 0; i < product.lying || (!lyingLost() && i < product.lying * 4); i++) {
        const state = lyingState(
          replayer.log,
          first + 1 + Math.floor(random() * (last - first)),
          random,
          lyingFaults[i % lyingFaults.length]!,
        )
        if (state !== null) await check(state)
      }
      t.ok(
        results.slice(consistent.length).some((r) => r.reallyLost > 0 && r.verifyCode === 1),
        'a lying state lost acked records and verify failed it',
      )
      if (product.method.includes('none')) {
        // Unsynced, the control's records are on no image before the clean unmount wrote them back.
        const own = consistent.filter((r) => r.controlLost > 0)
        t.ok(own.length > 0, `consistent states where the control lost acked records: ${own.length}`)
        t.ok(
          own.every((r) => r.verifyCode === 0),
          'each passes: the control losing records shows the cut was real',
        )
      }
    })
  }
}
