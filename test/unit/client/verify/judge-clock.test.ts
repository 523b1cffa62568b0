/**
 * Verify's own clock may be anywhere after the reboot (a clock at 1970 without an RTC battery, a VM
 * resumed days later): it must not bound the write times of a run's records. The bound comes from
 * the run itself: its creation time plus how long the listener saw it go on. An interrupted record
 * (a newer, never acknowledged overwrite cut mid-record) whose write time lies 2.5 days into a run
 * the listener saw go on for 3 days is judged interrupted, never corrupt, whatever verify's clock
 * says; one 5 days in is still caught (the check is not switched off). The same when the listener left
 * a long run's spans out of its reply (read page by page): its lastAckMs bounds the run instead.
 */
import { closeSync, openSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { judgeRun } from '../../../../src/client/verify/judge.js'
import { encodeSuperblock } from '../../../../src/record/format.js'
import { fillRecord, runKey, slotOf, slotOffsetBytes } from '../../../../src/record/records.js'
import { timelineOfSpans } from '../../../../src/client/verify/ack-timeline.js'
import type { AckSpan } from '../../../../src/protocol/messages.js'
import { craftMeta, craftRun } from '../../../fixtures/crafted-run.js'

const dayMs = 86_400_000
const recordSize = 8192
const slotCount = 16

/** Verify's clock readings: at 1970 (no RTC), and the creation time itself (the run's first minute). */
const verifyClocks = { 'at 1970': dayMs, 'the run was created just now': 0 }

for (const [clockName, clockAtMs] of Object.entries(verifyClocks))
  for (const spansInline of [true, false]) {
    for (const [intoRunDays, expected] of [
      [2.5, 'interrupted'],
      [5, 'corrupt'],
    ] as const) {
      t.test(
        `verify's clock ${clockName}; a run of 3 days${spansInline ? '' : ', its spans read page by page'}; an interrupted record written ${intoRunDays} days in: ${expected}`,
        async (t) => {
          const path = join(t.testdir(), 'data')
          const meta = craftMeta('0123456789abcdef', path, { pattern: 'overwrite', recordSizeBytes: recordSize, slotCount })
          const key = runKey(meta.runId)
          const acked = 40
          // The listener received the acks over 3 days.
          const spans: AckSpan[] = [[1, acked, meta.createdMs + 1000, meta.createdMs + 3 * dayMs]]
          const inline = craftRun(meta, acked, { spans })
          // A long run as the listener answers it: no spans, how far its acks go and when the last one came.
          const run = spansInline ? inline : { ...inline, spans: [], ackedThroughSeq: acked, lastAckMs: meta.createdMs + 3 * dayMs }
          const lastSlot = slotOf(key, 'overwrite', acked, slotCount)
          let newer = acked + 1
          while (slotOf(key, 'overwrite', newer, slotCount) !== lastSlot) newer++

          const fd = openSync(path, 'w')
          writeSync(fd, Buffer.alloc(slotOffsetBytes(recordSize, slotCount)), 0, slotOffsetBytes(recordSize, slotCount), 0)
          writeSync(fd, encodeSuperblock(meta), 0, recordSize, 0)
          const record = Buffer.alloc(recordSize)
          const writtenUs = (seq: number): number => Math.round((meta.createdMs + (seq / acked) * 2 * dayMs) * 1000)
          for (let seq = 1; seq <= acked; seq++) {
            const slot = slotOf(key, 'overwrite', seq, slotCount)
            fillRecord(record, key, seq, slot, writtenUs(seq))
            writeSync(fd, record, 0, recordSize, slotOffsetBytes(recordSize, slot))
          }
          // The next write to the last slot, cut after its first half: sector 0 (with its write time) is the newer record's.
          fillRecord(record, key, newer, lastSlot, Math.round((meta.createdMs + intoRunDays * dayMs) * 1000))
          writeSync(fd, record, 0, recordSize / 2, slotOffsetBytes(recordSize, lastSlot))
          closeSync(fd)

          const nowMs = clockAtMs === 0 ? meta.createdMs : clockAtMs
          const report = await judgeRun(run, { nowMs, ...(spansInline ? {} : { acks: timelineOfSpans(meta.runId, spans) }) })
          if (expected === 'interrupted') {
            t.equal(report.interrupted, 1, `the cut overwrite is interrupted: ${JSON.stringify(report.corruptRecords)}`)
            t.equal(report.corrupt, 0)
            t.equal(report.verdict, 'pass')
          } else {
            t.equal(report.corrupt, 1, 'a write time past the run and its slack is still bytes no write produced')
            t.match(report.corruptRecords[0]?.detail, /sector 0: the write time of record \d+ .* is not a time this run wrote at/)
            t.equal(report.verdict, 'fail')
          }
        },
      )
    }
  }
