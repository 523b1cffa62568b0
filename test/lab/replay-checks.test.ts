/**
 * The replay lab's own checks, without a disk: a state line that is not one of the recording's is
 * refused (exit 2) before anything is mounted, a verdict right by luck is caught by comparing verify's
 * count of lost records with the lab's reader's, and the one-record lying states break one record
 * only. Synthetic recordings (a BlockLog built here), so each check runs in milliseconds. Then, where
 * the lab can run, a replay interrupted (SIGINT) mid-way leaves no mount, loop device or recording.
 */
import t from 'tap'
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type BlockLog, type CrashState, oneRecordState, stateProblem } from '../fixtures/lab/crash-states.js'
import { exitedWithOutput } from '../fixtures/cli.js'
import { labUnavailableReason } from '../fixtures/lab/harness.js'
import { Replayer, runDiffers } from '../fixtures/lab/replay.js'
import { replayPlanned } from '../fixtures/lab/replay-campaign.js'
import type { Recording } from '../fixtures/lab/record.js'
import { fillRecord, runKey } from '../../src/record/records.js'
import { seededRandom } from '../fixtures/lab/seeded.js'

const campaignPath = fileURLToPath(new URL('../fixtures/lab/campaign.ts', import.meta.url))

/** A sector stamped as record sector `index` of seq (PCS1, index, a run id of zeros, seq), the rest zeros. */
function stamped(index: number, seq: number): Buffer {
  const sector = Buffer.alloc(512)
  sector.write('PCS1', 0, 'latin1')
  sector.writeUInt32LE(index, 4)
  sector.writeBigUInt64LE(BigInt(seq), 16)
  return sector
}

/** A record of `sectors` sectors, or the file system's block of zeros. */
const recordWrite = (sectors: number, seq: number): Buffer => Buffer.concat(Array.from({ length: sectors }, (_, k) => stamped(k, seq)))

// Writes 0-2 before flush 1, 3-4 before flush 2, 5 after it: window 2 holds write 5. Seqs 1 to 5.
const log: BlockLog = {
  writes: [
    { op: 0, offsetBytes: 0, data: Buffer.alloc(4096) },
    { op: 1, offsetBytes: 4096, data: recordWrite(8, 1) },
    { op: 2, offsetBytes: 8192, data: Buffer.concat([recordWrite(8, 2), recordWrite(8, 3)]) },
    { op: 4, offsetBytes: 16384, data: recordWrite(8, 4) },
    { op: 5, offsetBytes: 65536, data: Buffer.alloc(4096) },
    { op: 7, offsetBytes: 20480, data: recordWrite(8, 5) },
  ],
  flushes: [
    { writesBefore: 3, repliedNs: 10n },
    { writesBefore: 5, repliedNs: 20n },
  ],
}

t.test('a state of the recording passes; one that is not is said why', async (t) => {
  const fine: CrashState[] = [
    { kind: 'consistent', window: 2, keep: [5], drop: [], torn: { write: 5, bytes: 512 } },
    { kind: 'lying', window: 2, keep: [], drop: [1, 2], torn: { write: 2, bytes: 4096 } },
    { kind: 'lying', window: 1, keep: [4], drop: [], moved: [{ write: 1, toBytes: 4608 }] },
  ]
  for (const state of fine) t.equal(stateProblem(log, state), null, JSON.stringify(state))
  const bad: Array<[CrashState, RegExp]> = [
    [{ kind: 'consistent', window: 3, keep: [], drop: [] }, /window 3: the recording has 2 flushes/],
    [{ kind: 'consistent', window: 1, keep: [5], drop: [] }, /kept write 5 is not of window 1 \(writes 3\.\.4\)/],
    [{ kind: 'lying', window: 1, keep: [], drop: [3] }, /write 3 is not covered by a flush before window 1/],
    [{ kind: 'lying', window: 2, keep: [], drop: [99] }, /write 99 is not covered/],
    [{ kind: 'consistent', window: 2, keep: [], drop: [1] }, /a consistent state drops or moves no covered write/],
    [{ kind: 'consistent', window: 2, keep: [5], drop: [], torn: { write: 5, bytes: 4096 } }, /not a prefix shorter than its 4096/],
    [
      { kind: 'lying', window: 2, keep: [], drop: [1], torn: { write: 3, bytes: 512 } },
      /torn write 3 is not one of the state's dropped writes/,
    ],
    [
      { kind: 'lying', window: 2, keep: [], drop: [], moved: [{ write: 1, toBytes: 66048 }] },
      /moved write 1 at 66048 would end past the recorded device \(69632 bytes\)/,
    ],
  ]
  for (const [state, why] of bad) t.match(stateProblem(log, state), why, JSON.stringify(state))
})

t.test('a one-record lying state drops or tears one covered write holding exactly one record', async (t) => {
  const random = seededRandom(19)
  const seen = new Set<string>()
  for (let i = 0; i < 40; i++) {
    const state = oneRecordState(log, 2, random)
    if (state === null) {
      t.fail('window 2 has covered writes holding one record')
      return
    }
    t.equal(state.kind, 'lying')
    t.same(state.keep, [])
    t.equal(state.drop.length, 1)
    // Write 2 holds two records, write 0 and 4 none: only 1 and 3 break one record alone.
    t.ok([1, 3].includes(state.drop[0]!), `dropped write ${state.drop[0]}`)
    t.equal(stateProblem(log, state), null)
    seen.add(state.torn === undefined ? `drop ${state.drop[0]}` : `tear ${state.drop[0]}`)
  }
  t.ok(seen.size >= 3, `several kinds drawn: ${[...seen].join(', ')}`)
  t.equal(oneRecordState(log, 0, random), null, 'nothing is covered before the first flush')

  // A covered record not yet acknowledged at the cut (a files run acks after a second sync) is never the one broken.
  const seqOf = (sector: Buffer): number => Number(sector.readBigUInt64LE(16))
  for (let i = 0; i < 20; i++)
    t.same(oneRecordState(log, 2, random, (sector) => seqOf(sector) <= 3)?.drop, [1], 'seq 4 not acked yet: write 1')
  t.equal(
    oneRecordState(log, 2, random, () => false),
    null,
    'no acked record covered: no state',
  )
})

t.test("verify's count of a tested run's lost records must be the reader's", async (t) => {
  const reading = (over: Partial<{ method: string; pattern: string; superblockValid: boolean; lost: number; acked: number }> = {}) => ({
    meta: { runId: 'aa11', method: over.method ?? 'fdatasync', pattern: over.pattern ?? 'append' },
    acked: over.acked ?? 40,
    superblockValid: over.superblockValid ?? true,
    lost: over.lost ?? 2,
  })
  const report = (lost: number, torn: number, corrupt: number, verdict = lost + torn + corrupt > 0 ? 'fail' : 'pass'): string =>
    JSON.stringify({ runs: [{ runId: 'aa11', lost, torn, corrupt, verdict }] })
  t.equal(runDiffers([reading()], report(1, 1, 0)), null, 'lost + torn is the reader count')
  t.equal(runDiffers([reading()], report(0, 0, 2)), null, 'corrupt counts too')
  t.match(runDiffers([reading()], report(1, 0, 0)), /run aa11: verify counts 1 acked records lost, torn or corrupt, the reader 2/)
  t.match(runDiffers([reading({ lost: 0 })], report(0, 0, 1)), /verify counts 1 .* the reader 0/)
  t.match(runDiffers([reading({ pattern: 'overwrite' })], report(3, 0, 0)), /verify counts 3/)
  t.match(runDiffers([reading()], report(2, 0, 0, 'pass')), /run aa11: verify's verdict on the run is pass, its 2 lost records owe fail/)
  t.match(runDiffers([reading({ lost: 0 })], report(0, 0, 0, 'fail')), /verdict on the run is fail, its 0 lost records owe pass/)
  t.equal(runDiffers([reading({ method: 'none' })], report(0, 0, 0)), null, "the control's count decides nothing")
  t.equal(runDiffers([reading({ pattern: 'files' })], report(0, 0, 0)), null, 'a files run is judged by other rules')
  t.equal(runDiffers([reading({ superblockValid: false })], report(0, 0, 0)), null, 'a lost file is judged by its superblock')
  t.equal(runDiffers([reading({ acked: 0, lost: 0 })], report(0, 0, 1)), null, 'a run that acked nothing')
  t.equal(runDiffers([reading()], 'not json'), null, 'no report: the exit code decides')
  t.equal(runDiffers([reading()], JSON.stringify({ runs: [{ runId: 'other', lost: 0 }] })), null, 'a run verify does not name')
})

t.test('--replay-from with a state line that is not one, or no recording, exits 2 and says why', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'plugcheck-replay-checks-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const lab = (args: string[]) => {
    const result = spawnSync(process.execPath, ['--import', 'tsx', campaignPath, ...args], { encoding: 'utf8', timeout: 60_000 })
    return { code: result.status, stderr: result.stderr }
  }
  const bogus = lab(['--replay-from', dir, '--state', 'lying/w=x/keep='])
  t.equal(bogus.code, 2)
  t.match(bogus.stderr, /^lab: --state lying\/w=x\/keep=: not a crash state line\nhint: /)
  t.notMatch(bogus.stderr, /at .*\.ts:\d+/, 'no stack trace')
  const none = lab(['--replay-from', dir, '--state', 'lying/w=3/keep=/drop=1/torn='])
  t.equal(none.code, 2)
  t.match(none.stderr, /no recording the lab kept reads back there/)
  // A recording whose log is the synthetic one above, and a state past its flushes.
  const logPath = join(dir, 'blocks.log')
  writeFileSync(logPath, encodeLog(log))
  writeFileSync(join(dir, 'recording.json'), JSON.stringify({ logPath }))
  const past = lab(['--replay-from', dir, '--state', 'consistent/w=7/keep=/drop=/torn='])
  t.equal(past.code, 2)
  t.match(past.stderr, /--state consistent\/w=7\/keep=\/drop=\/torn=: window 7: the recording has 2 flushes/)
})

/** The recorder's log format (nbd-recorder.ts): u32 kind, u32 length, u64 offset, u64 time, data. */
function encodeLog(blocks: BlockLog): Buffer {
  const parts: Buffer[] = []
  let flush = 0
  blocks.writes.forEach((write, i) => {
    while (flush < blocks.flushes.length && blocks.flushes[flush]!.writesBefore === i) parts.push(entry(3, 0n, Buffer.alloc(0), flush++))
    parts.push(entry(1, BigInt(write.offsetBytes), write.data, 0))
  })
  while (flush < blocks.flushes.length) parts.push(entry(3, 0n, Buffer.alloc(0), flush++))
  return Buffer.concat(parts)
}

function entry(kind: number, offsetBytes: bigint, data: Buffer, at: number): Buffer {
  const header = Buffer.alloc(24)
  header.writeUInt32LE(kind, 0)
  header.writeUInt32LE(data.length, 4)
  header.writeBigUInt64LE(offsetBytes, 8)
  header.writeBigUInt64LE(BigInt(at), 16)
  return Buffer.concat([header, data])
}

t.test(
  'a recording of a tested run and its control (--jobs 2, fdatasync,none): a one-record state breaks only a record its cut acked',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'plugcheck-replay-acked-'))
    t.teardown(() => rmSync(dir, { recursive: true, force: true }))
    const tested = 'a1b2c3d4e5f60718'
    const control = '0f1e2d3c4b5a6978'
    const recordBytes = 4096
    const records = 12
    // Real records (src/record/records.ts), so the stamp ackedAt decodes is the one the writer writes.
    const record = (runId: string, seq: number): Buffer => {
      const out = Buffer.alloc(recordBytes)
      fillRecord(out, runKey(runId), seq, seq - 1, 1_700_000_000_000_000 + seq)
      return out
    }
    // Per seq: both runs' records, a flush covering them, the directory's block, a second flush. The
    // control's sync returns with its write; the tested run's after the second flush (as a files run's
    // ack waits for its directory sync), so in the window between the two flushes its record is covered
    // by a flush and not yet acked.
    const parts: Buffer[] = []
    const traces: Record<string, Buffer[]> = { [tested]: [], [control]: [] }
    let now = 1000n
    const traced = (runId: string, seq: number, ns: bigint): void => {
      const e = Buffer.alloc(24)
      Buffer.from(runId, 'hex').copy(e, 0)
      e.writeDoubleLE(seq, 8)
      e.writeDoubleLE(Number(ns), 16)
      traces[runId]!.push(e)
    }
    for (let seq = 1; seq <= records; seq++) {
      parts.push(entry(1, BigInt(recordBytes * seq), record(tested, seq), Number(now++)))
      parts.push(entry(1, BigInt(recordBytes * (100 + seq)), record(control, seq), Number(now++)))
      traced(control, seq, now++)
      parts.push(entry(3, 0n, Buffer.alloc(0), Number(now++)))
      parts.push(entry(1, 0n, Buffer.alloc(recordBytes, seq), Number(now++)))
      parts.push(entry(3, 0n, Buffer.alloc(0), Number(now++)))
      traced(tested, seq, now++)
    }
    const logPath = join(dir, 'blocks.log')
    writeFileSync(logPath, Buffer.concat(parts))
    const basePath = join(dir, 'base.img')
    writeFileSync(basePath, Buffer.alloc(recordBytes * 128))
    const tracePaths = [tested, control].map((runId, k) => {
      const path = join(dir, `trace.job${k + 1}`)
      writeFileSync(path, Buffer.concat(traces[runId]!))
      return path
    })
    const meta = (runId: string, method: string) => ({ runId, method, pattern: 'append', recordSizeBytes: recordBytes, slotCount: 64 })
    // The control listed first: the replayer puts tested runs first, and ackedAt must follow it.
    const recording = {
      dir,
      basePath,
      logPath,
      tracePaths,
      mountPoint: join(dir, 'mnt'),
      file: join(dir, 'mnt', 'data'),
      runs: [{ meta: meta(control, 'none') }, { meta: meta(tested, 'fdatasync') }],
    } as unknown as Recording
    const replayer = new Replayer(recording, join(dir, 'scratch'))
    const { writes, flushes } = replayer.log
    t.equal(flushes.length, 2 * records)

    // The acks of a cut in window w, from the trace written above, not from the replayer.
    const ackedIn = (runId: string, w: number): number => {
      const next = flushes[w]
      return traces[runId]!.map((e) => ({ seq: e.readDoubleLE(8), ns: BigInt(e.readDoubleLE(16)) }))
        .filter((e) => next === undefined || e.ns < next.repliedNs)
        .reduce((max, e) => Math.max(max, e.seq), 0)
    }
    const stampOf = (write: number) => {
      const data = writes[write]!.data
      return { sector: data.subarray(0, 512), runId: data.subarray(8, 16).toString('hex'), seq: Number(data.readBigUInt64LE(16)) }
    }
    const recordWrites = writes.flatMap((w, i) => (w.data.subarray(0, 4).toString('latin1') === 'PCS1' ? [i] : []))
    t.equal(recordWrites.length, 2 * records)
    let mismatches = 0
    let unackedCovered = 0
    for (let w = 0; w <= flushes.length; w++) {
      const acked = replayer.ackedAt(w)
      for (const i of recordWrites) {
        const { sector, runId, seq } = stampOf(i)
        const expected = seq <= ackedIn(runId, w)
        if (acked(sector) !== expected) mismatches++
        if (w > 0 && i < flushes[w - 1]!.writesBefore && !expected) unackedCovered++
      }
      const foreign = Buffer.from(stampOf(recordWrites[0]!).sector)
      Buffer.from('ffffffffffffffff', 'hex').copy(foreign, 8)
      if (acked(foreign)) mismatches++
    }
    t.equal(mismatches, 0, "ackedAt says acked exactly for the records whose run's acks at the cut hold their seq")
    t.ok(unackedCovered > 0, `records covered by a flush but not acked at the cut: ${unackedCovered}`)

    // The campaign's plan (replayPlanned), every state recorded instead of mounted.
    const planned: Array<{ kind: string; states: CrashState[] }> = []
    let current: CrashState[] = []
    replayer.replay = async (state: CrashState) => {
      current.push(state)
      return { state, acked: 0, verifyCode: 0, reallyLost: 0, controlLost: 0, lostSeqs: [], wrong: null, detail: '' }
    }
    await replayPlanned(
      replayer,
      { states: 240, seed: 3, label: 'synthetic', pattern: 'append', dir },
      seededRandom(3),
      (line) => {
        const kind = /^replay: synthetic append (.*): \d+ states checked/.exec(line)?.[1]
        if (kind === undefined) return
        planned.push({ kind, states: current })
        current = []
      },
      () => {},
    )
    const single = planned.find((p) => p.kind === 'lying one record')?.states ?? []
    t.ok(single.length >= 40, `${single.length} one-record states planned`)
    const broken = single.map((state) => ({ state, ...stampOf(state.drop[0]!) }))
    const unacked = broken.filter(({ state, runId, seq }) => seq > ackedIn(runId, state.window))
    t.same(
      unacked.map(({ state, runId, seq }) => `${runId} seq ${seq} in window ${state.window}`),
      [],
      'every one-record state breaks a record its cut acked',
    )
    t.ok(
      broken.some(({ runId }) => runId === tested),
      "the tested run's records are among those broken",
    )
  },
)

t.test('a replay interrupted by SIGINT leaves no mount, loop device, recording server or recording', { timeout: 180_000 }, async (t) => {
  const reason = labUnavailableReason()
  if (reason !== null) {
    t.fail(`the lab cannot run here: ${reason}`)
    return
  }
  const tmp = mkdtempSync(join(tmpdir(), 'plugcheck-replay-sigint-'))
  t.teardown(() => rmSync(tmp, { recursive: true, force: true }))
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', campaignPath, '--replay', '6', '--fs', 'ext4', '--records', '120', '--seed', '7'],
    {
      env: { ...process.env, TMPDIR: tmp },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  )
  // Once its last stderr lines are read: a replay that ended before it began is reported with them.
  const ended = exitedWithOutput(child)
  // Interrupted once it replays: a state mounted or about to be, the recording on disk.
  let stderr = ''
  const replaying = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), 120_000)
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString()
      if (/states checked/.test(stderr)) {
        clearTimeout(timer)
        resolve(true)
      }
    })
    void ended.then(() => resolve(false))
  })
  t.ok(replaying, `the replay began: ${stderr.slice(-300)}`)
  child.kill('SIGINT')
  const { code, signal } = await ended
  t.ok(signal === 'SIGINT' || code === 130, `died of the signal (code ${code}, signal ${signal})`)
  t.same(
    readdirSync(tmp).filter((name) => name.startsWith('plugcheck-')),
    [],
    'its recording (base image, block log) is removed',
  )
  const loops = spawnSync('losetup', ['-a'], { encoding: 'utf8', timeout: 10_000 }).stdout
  t.notOk(loops.includes(tmp), 'no loop device over its files')
  t.notOk(readFileSync('/proc/mounts', 'utf8').includes(tmp), 'nothing mounted under it')
  const servers = spawnSync('ps', ['-eo', 'args'], { encoding: 'utf8', timeout: 10_000 }).stdout
  const left = servers.split('\n').filter((line) => line.includes(tmp) && /nbd-recorder|nbdfuse|nbdkit/.test(line))
  t.same(left, [], 'no recording server or nbdfuse of its own left')
})
