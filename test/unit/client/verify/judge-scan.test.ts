/**
 * judgeRun streams the file in large chunks with reads in flight and a fast path for whole records,
 * checked on worker threads or on the main thread; its report must be what classifying every slot on
 * its own, the slow way, gives. Real files of 12 KiB records (no read size is a multiple of them: a
 * read is cut to whole records), ending mid-record, with seeded random damage
 * (PLUGCHECK_JUDGE_SEED replays a run): flipped bytes, zeroed sectors, torn and stale records,
 * misdirected writes. Each file is judged by the main thread alone, by the default threads with
 * 16 MiB reads (two chunks), and by three threads with ~1 MiB reads (19 chunks, dealt round robin).
 * A thread that fails to start or throws mid-file makes judgeRun fail (exit 3), never pass.
 */
import { closeSync, openSync, statSync, truncateSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { judgeRun } from '../../../../src/client/verify/judge.js'
import type { RunReport } from '../../../../src/client/verify/run-report.js'
import { threadsEnv } from '../../../../src/client/verify/scan-threads.js'
import { PlugcheckError } from '../../../../src/base/errors.js'
import type { RunMeta } from '../../../../src/record/format.js'
import { fillRecord, runKey, sectorBytes, slotOf, slotOffsetBytes } from '../../../../src/record/records.js'
import type { Pattern } from '../../../../src/record/patterns.js'
import { craftMeta, craftRun, writeDataFile, range } from '../../../fixtures/crafted-run.js'
import { compareWithReference, reference, setEnv, type Reference } from '../../../fixtures/judge-oracle.js'
import { seededRandom } from '../../../fixtures/lab/seeded.js'

const recordSize = 12 * 1024
const slotCount = 1600 // 18.75 MiB of records: more than one 16 MiB read
const damagedSlots = 80
const smallReadBytes = 1024 * 1024 + 5000

/** How judgeRun checks records: threads (env; unset: the default for this machine) and read size. */
const ways = [
  { name: 'main thread only', threads: '0', readChunkBytes: undefined },
  { name: 'default threads', threads: undefined, readChunkBytes: undefined },
  { name: '3 threads, small reads', threads: '3', readChunkBytes: smallReadBytes },
] as const

function damage(meta: RunMeta, acked: number, random: () => number): void {
  const key = runKey(meta.runId)
  const pick = (n: number): number => Math.floor(random() * n)
  const fd = openSync(meta.path, 'r+')
  try {
    const record = Buffer.alloc(recordSize)
    for (let i = 0; i < damagedSlots; i++) {
      const slot = pick(meta.slotCount)
      const at = slotOffsetBytes(recordSize, slot)
      const kind = pick(5)
      if (kind === 0) {
        writeSync(fd, Buffer.from([pick(256)]), 0, 1, at + pick(recordSize)) // a flipped (or rewritten) byte anywhere: payload, header, checksum
      } else if (kind === 1) {
        const from = pick(recordSize / sectorBytes)
        writeSync(fd, Buffer.alloc((1 + pick(3)) * sectorBytes), 0, undefined, at + from * sectorBytes) // zeroed blocks
      } else {
        // A record of another seq: an older one at this slot (stale, or torn when only part of it lands), or one of another slot (misdirected).
        const seq = 1 + pick(acked)
        fillRecord(record, key, seq, slotOf(key, meta.pattern, seq, meta.slotCount), (meta.createdMs + 1000) * 1000 + seq)
        const sectors = kind === 2 ? recordSize / sectorBytes : 1 + pick(recordSize / sectorBytes - 1)
        writeSync(fd, record, 0, sectors * sectorBytes, at)
      }
    }
  } finally {
    closeSync(fd)
  }
  // The file ends inside the third slot from the end, not on a sector boundary.
  truncateSync(meta.path, slotOffsetBytes(recordSize, meta.slotCount - 3) + 5000)
}

function compare(t: Test, report: RunReport, expected: Reference): void {
  compareWithReference(t, report, expected)
  t.ok(report.lost + report.torn + report.corrupt > 0, 'the damage was found')
  t.ok(report.lostRangeCount <= report.lostRanges.length, 'every lost range listed')
}

for (const pattern of ['append', 'overwrite'] as const satisfies readonly Pattern[]) {
  t.test(`${pattern}: streamed judging equals the slot-by-slot slow path`, async (t) => {
    const seed =
      process.env.PLUGCHECK_JUDGE_SEED === undefined
        ? (Date.now() ^ (process.pid << 8)) >>> 0
        : Number(process.env.PLUGCHECK_JUDGE_SEED) >>> 0
    t.comment(`PLUGCHECK_JUDGE_SEED=${seed}`)
    const random = seededRandom(seed)
    const dir = t.testdir()
    const meta = craftMeta('00112233445566aa', join(dir, 'data'), { pattern, recordSizeBytes: recordSize, slotCount })
    const acked = pattern === 'append' ? slotCount + 700 : slotCount * 3
    writeDataFile(meta, range(1, acked), { sizeSlots: slotCount + 1 })
    const nowMs = Date.now()
    for (const way of ways) {
      setEnv(t, threadsEnv, way.threads)
      const clean = await judgeRun(craftRun(meta, acked), {
        nowMs,
        ...(way.readChunkBytes === undefined ? {} : { readChunkBytes: way.readChunkBytes }),
      })
      t.equal(clean.intact, clean.acked - clean.superseded, `an undamaged file: every judged record intact (${way.name})`)
    }

    damage(meta, acked, random)
    t.not(statSync(meta.path).size % recordSize, 0, 'the file ends mid-record')
    const expected = reference(meta, acked, nowMs)
    for (const way of ways) {
      await t.test(way.name, async (t) => {
        setEnv(t, threadsEnv, way.threads)
        compare(
          t,
          await judgeRun(craftRun(meta, acked), {
            nowMs,
            ...(way.readChunkBytes === undefined ? {} : { readChunkBytes: way.readChunkBytes }),
          }),
          expected,
        )
      })
    }
  })
}

t.test('a verify thread that fails: judgeRun fails with exit 3, never a partial verdict', async (t) => {
  const dir = t.testdir()
  const meta = craftMeta('00112233445566bb', join(dir, 'data'), { pattern: 'append', recordSizeBytes: recordSize, slotCount })
  writeDataFile(meta, range(1, slotCount), { sizeSlots: slotCount + 1 })
  setEnv(t, threadsEnv, '2')
  for (const fault of ['start', '1', '3']) {
    await t.test(`PLUGCHECK_SCAN_THREAD_FAULT=${fault}`, async (t) => {
      setEnv(t, 'PLUGCHECK_SCAN_THREAD_FAULT', fault)
      const error = await judgeRun(craftRun(meta, slotCount), { readChunkBytes: smallReadBytes }).then(
        () => null,
        (e: unknown) => e,
      )
      t.ok(error instanceof PlugcheckError, 'a plugcheck error')
      t.equal((error as PlugcheckError).exitCode, 3)
      t.match((error as PlugcheckError).message, /^a verify thread failed: .*PLUGCHECK_SCAN_THREAD_FAULT.*; the file was not judged$/)
    })
  }
})
