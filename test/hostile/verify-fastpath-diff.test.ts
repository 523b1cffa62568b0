/**
 * verify's fast path (whole-record check on 0..4 threads, large reads in flight) against the slow
 * classifier slot by slot, on real files whose damage targets what the fast path checks word by word:
 * header fields, stamps, run key, slot, seq, write time and checksum changed with the payload left
 * matching the pool (the checksum recomputed or not), records copied from other slots, stale and newer
 * records, torn records cut at many 512-byte boundaries, damage on the first and last slot of every
 * read chunk, files that end mid-record, holes punched across chunk boundaries and a file cut short
 * then grown sparse. Record sizes 512 B, 4 KiB, 12 KiB and 1 MiB, append and
 * overwrite. Every way of checking must give the slow path's counts, findings, lost seqs and
 * reordering, and the same report as every other way, field for field.
 */
import { execFileSync } from 'node:child_process'
import { closeSync, openSync, truncateSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { judgeRun } from '../../src/client/verify/judge.js'
import type { RunReport } from '../../src/client/verify/run-report.js'
import { threadsEnv } from '../../src/client/verify/scan-threads.js'
import { xxh64 } from '../../src/record/checksum.js'
import type { RunMeta } from '../../src/record/format.js'
import { fillRecord, runKey, sectorBytes, slotOf, slotOffsetBytes, type RunKey } from '../../src/record/records.js'
import type { Pattern } from '../../src/record/patterns.js'
import { craftMeta, craftRun, writeDataFile, range } from '../fixtures/crafted-run.js'
import { compareWithReference, lastAckedBySlot, reference, setEnv } from '../fixtures/judge-oracle.js'

/** A seq of this run written to slot, other than seq: older when older, else newer (past the acked ones). */
function otherSeqFor(key: RunKey, meta: RunMeta, slot: number, seq: number, acked: number, older: boolean): number | null {
  if (older) {
    for (let s = seq - 1; s >= 1 && s > seq - 64 * meta.slotCount; s--) if (slotOf(key, meta.pattern, s, meta.slotCount) === slot) return s
    return null
  }
  for (let s = Math.max(seq, acked) + 1; s < acked + 64 * meta.slotCount; s++)
    if (slotOf(key, meta.pattern, s, meta.slotCount) === slot) return s
  return null
}

const damageKinds = 22
/** Another run's key, for records of a foreign run. */
const foreignKey = runKey('00112233445566ff')

/** Damages slot (judged by seq) in one of damageKinds ways; returns what it did. */
function damageSlot(
  fd: number,
  meta: RunMeta,
  key: RunKey,
  acked: number,
  slot: number,
  seq: number,
  kind: number,
  variant: number,
): string {
  const recordSize = meta.recordSizeBytes
  const sectors = recordSize / sectorBytes
  const at = slotOffsetBytes(recordSize, slot)
  const time = (meta.createdMs + 1000) * 1000 + seq
  const record = Buffer.alloc(recordSize)
  fillRecord(record, key, seq, slot, time)
  const rehash = (): void => {
    record.writeBigUInt64LE(xxh64(record.subarray(0, recordSize - 8)), recordSize - 8)
  }
  const put = (bytes: Buffer = record): void => void writeSync(fd, bytes, 0, bytes.length, at)
  const sector = 1 + (variant % Math.max(1, sectors - 1))
  switch (kind) {
    case 0: // the slot field names another slot, checksum recomputed
      record.writeUInt32LE((slot + 1) % meta.slotCount, 40)
      rehash()
      put()
      return 'slot field'
    case 1: // reserved word at 36
      record.writeUInt32LE(1, 36)
      rehash()
      put()
      return 'reserved 36'
    case 2: // reserved u16 at 30
      record.writeUInt16LE(1, 30)
      rehash()
      put()
      return 'reserved 30'
    case 3: // record size field
      record.writeUInt32LE(recordSize * 2, 32)
      rehash()
      put()
      return 'size field'
    case 4: // a later sector's index
      if (sectors === 1) record.writeUInt32LE(1, 4)
      else record.writeUInt32LE(sector + 1, sector * sectorBytes + 4)
      rehash()
      put()
      return 'sector index'
    case 5: // a later sector's seq stamp (high word)
      record.writeUInt32LE(1, (sectors === 1 ? 0 : sector) * sectorBytes + 20)
      rehash()
      put()
      return 'stamp seq hi'
    case 6: // the write time, checksum recomputed: still whole
      record.writeUInt32LE((record.readUInt32LE(48) ^ 0x55) >>> 0, 48)
      rehash()
      put()
      return 'write time rehashed'
    case 7: // the write time, checksum stale
      record.writeUInt32LE((record.readUInt32LE(48) ^ 0x55) >>> 0, 48)
      put()
      return 'write time'
    case 8: // the checksum
      record[recordSize - 1 - (variant % 8)]! ^= 0x80
      put()
      return 'checksum'
    case 9: // a payload byte, checksum recomputed
      record[(variant % sectors) * sectorBytes + 100 + (variant % 400)]! ^= 1
      rehash()
      put()
      return 'payload rehashed'
    case 10: {
      // another slot's record, as written there (misdirected)
      const other = 1 + ((seq + variant) % acked)
      fillRecord(record, key, other, slotOf(key, meta.pattern, other, meta.slotCount), time)
      put()
      return 'misdirected'
    }
    case 11: {
      // another slot's record with this slot's number in its header, rehashed
      const other = 1 + ((seq + variant + 7) % acked)
      fillRecord(record, key, other, slot, time)
      put()
      return 'foreign seq, this slot'
    }
    case 12: {
      // an older record of this slot (stale)
      const older = otherSeqFor(key, meta, slot, seq, acked, true)
      if (older === null) return 'none'
      fillRecord(record, key, older, slot, time - 1)
      put()
      return 'stale'
    }
    case 13: {
      // torn: the first cut sectors new, the rest older (or zero)
      const older = otherSeqFor(key, meta, slot, seq, acked, true)
      const tail = Buffer.alloc(recordSize)
      if (older !== null) fillRecord(tail, key, older, slot, time - 1)
      const cut = sectors === 1 ? 0 : 1 + (variant % (sectors - 1))
      record.copy(tail, 0, 0, cut * sectorBytes)
      put(tail)
      return `torn head ${cut}`
    }
    case 14: {
      // torn the other way round: older first, new after cut
      const older = otherSeqFor(key, meta, slot, seq, acked, true)
      const head = Buffer.alloc(recordSize)
      if (older !== null) fillRecord(head, key, older, slot, time - 1)
      const cut = sectors === 1 ? 0 : 1 + (variant % (sectors - 1))
      record.copy(head, cut * sectorBytes, cut * sectorBytes)
      put(head)
      return `torn tail ${cut}`
    }
    case 15: {
      // another run's record for this slot
      fillRecord(record, foreignKey, seq, slot, time)
      put()
      return 'foreign run'
    }
    case 16: // zeros
      put(Buffer.alloc(recordSize))
      return 'zeros'
    case 17: {
      // a newer, never acknowledged record of this slot
      const newer = otherSeqFor(key, meta, slot, seq, acked, false)
      if (newer === null) return 'none'
      fillRecord(record, key, newer, slot, time + 1)
      put()
      return 'newer'
    }
    case 18: {
      // the acked seq overwritten mid-way by a newer one (interrupted)
      const newer = otherSeqFor(key, meta, slot, seq, acked, false)
      if (newer === null || sectors === 1) return 'none'
      const mixed = Buffer.alloc(recordSize)
      fillRecord(mixed, key, newer, slot, time + 1)
      const cut = 1 + (variant % (sectors - 1))
      record.copy(mixed, cut * sectorBytes, cut * sectorBytes)
      put(mixed)
      return `interrupted ${cut}`
    }
    case 19: // sector 0's run id low word, rehashed
      record.writeUInt32LE((record.readUInt32LE(8) ^ 1) >>> 0, 8)
      rehash()
      put()
      return 'run lo'
    case 20: // the record magic
      record.writeUInt32LE((record.readUInt32LE(24) ^ 0x100) >>> 0, 24)
      rehash()
      put()
      return 'record magic'
    case 21: // sector 0 stamped as sector 1, rehashed
      record.writeUInt32LE(1, 4)
      rehash()
      put()
      return 'sector 0 index'
  }
  return 'none'
}

interface Case {
  readonly recordSize: number
  readonly slotCount: number
  readonly pattern: Pattern
  /** Small reads so the file spans many chunks (not a multiple of the record size). */
  readonly smallRead: number
  /** Bytes past the last whole record the file keeps (0: ends on a record). */
  readonly tailBytes: number
}

const cases: Case[] = [
  { recordSize: 512, slotCount: 36_000, pattern: 'append', smallRead: 64 * 1024 + 100, tailBytes: 300 },
  { recordSize: 512, slotCount: 3000, pattern: 'overwrite', smallRead: 16 * 1024 + 100, tailBytes: 0 },
  { recordSize: 4096, slotCount: 4200, pattern: 'append', smallRead: 256 * 1024 + 4000, tailBytes: 1536 },
  { recordSize: 4096, slotCount: 1200, pattern: 'overwrite', smallRead: 128 * 1024 + 1, tailBytes: 4095 },
  { recordSize: 12 * 1024, slotCount: 1400, pattern: 'append', smallRead: 1024 * 1024 + 5000, tailBytes: 0 },
  { recordSize: 12 * 1024, slotCount: 700, pattern: 'overwrite', smallRead: 512 * 1024, tailBytes: 512 },
  { recordSize: 1024 * 1024, slotCount: 20, pattern: 'append', smallRead: 3 * 1024 * 1024 + 17, tailBytes: 512 * 1024 + 512 },
  { recordSize: 1024 * 1024, slotCount: 12, pattern: 'overwrite', smallRead: 2 * 1024 * 1024, tailBytes: 0 },
]

const ways = [
  { threads: '0', small: false },
  { threads: '1', small: false },
  { threads: '2', small: false },
  { threads: '4', small: false },
  { threads: '0', small: true },
  { threads: '2', small: true },
  { threads: '4', small: true },
] as const

for (const c of cases) {
  t.test(`${c.pattern}, ${c.recordSize}-byte records, ${c.slotCount} slots`, async (t) => {
    const dir = t.testdir()
    const meta = craftMeta('a1b2c3d4e5f60718', join(dir, 'data'), {
      pattern: c.pattern,
      recordSizeBytes: c.recordSize,
      slotCount: c.slotCount,
    })
    const acked = c.pattern === 'append' ? c.slotCount + Math.floor(c.slotCount / 3) : c.slotCount * 2
    writeDataFile(meta, range(1, acked), { sizeSlots: c.slotCount + 1 })
    const last = lastAckedBySlot(meta, acked)
    // Damaged slots: both sides of every chunk boundary of both read sizes, and a spread of others.
    const slotsPerChunk = (bytes: number): number => Math.max(1, Math.floor(bytes / c.recordSize))
    const targets = new Set<number>()
    for (const per of [slotsPerChunk(16 * 1024 * 1024), slotsPerChunk(c.smallRead)]) {
      for (let b = per; b < c.slotCount; b += per) {
        targets.add(b - 1)
        targets.add(b)
      }
    }
    for (let s = 0; s < c.slotCount; s += Math.max(1, Math.floor(c.slotCount / 600))) targets.add(s)
    targets.add(c.slotCount - 1)
    // The run's key (and its 1 MiB payload pool) once, for every damaged slot.
    const key = runKey(meta.runId)
    const fd = openSync(meta.path, 'r+')
    const done = new Map<string, number>()
    try {
      let i = 0
      for (const slot of [...targets].sort((a, b) => a - b)) {
        const seq = last.get(slot)
        if (seq === undefined) continue
        const what = damageSlot(fd, meta, key, acked, slot, seq, (i * 13 + c.slotCount) % damageKinds, Math.floor(i / damageKinds) * 7 + i)
        done.set(what.split(' ')[0]!, (done.get(what.split(' ')[0]!) ?? 0) + 1)
        i++
      }
    } finally {
      closeSync(fd)
    }
    t.comment(`damage: ${[...done].map(([k, n]) => `${k} ${n}`).join(', ')}`)
    truncateSync(meta.path, slotOffsetBytes(c.recordSize, c.slotCount - 1) + c.tailBytes)
    const nowMs = Date.now()
    const expected = reference(meta, acked, nowMs)
    t.ok(expected.counts.corrupt! > 0 && expected.counts.lost! + expected.counts.torn! > 0, 'the damage is there to find')
    let first: RunReport | null = null
    for (const way of ways) {
      await t.test(`threads ${way.threads}${way.small ? ', small reads' : ''}`, async (t) => {
        setEnv(t, threadsEnv, way.threads)
        const report = await judgeRun(craftRun(meta, acked), { nowMs, ...(way.small ? { readChunkBytes: c.smallRead } : {}) })
        compareWithReference(t, report, expected)
        if (first === null) first = report
        else t.same(report, first, 'the same report as the main thread alone')
      })
    }
  })
}

t.test('holes punched across read-chunk boundaries, and a file cut short then grown sparse', async (t) => {
  const recordSize = 12 * 1024
  const slotCount = 3000 // 35 MiB: three 16 MiB reads
  const dir = t.testdir()
  const meta = craftMeta('a1b2c3d4e5f60719', join(dir, 'data'), { pattern: 'append', recordSizeBytes: recordSize, slotCount })
  const acked = slotCount
  writeDataFile(meta, range(1, acked), { sizeSlots: slotCount + 1 })
  const chunk = 16 * 1024 * 1024 - ((16 * 1024 * 1024) % recordSize)
  const punch = (offset: number, length: number): void => {
    execFileSync('fallocate', ['--punch-hole', '--offset', String(offset), '--length', String(length), meta.path])
  }
  // Chunk k starts at byte recordSize + k * chunk; each hole starts mid-record (on a 512-byte boundary) before it and ends after it.
  for (const k of [1, 2]) punch(recordSize + k * chunk - 3 * 512, 7 * 512)
  punch(recordSize + chunk - 7 * 4096, 4096) // a 4 KiB hole inside the last record before the first boundary
  // The file cut inside the last read, then grown back sparse: the tail is zeros, past it nothing.
  truncateSync(meta.path, slotOffsetBytes(recordSize, slotCount - 40) + 2048)
  truncateSync(meta.path, slotOffsetBytes(recordSize, slotCount - 10) + 1024)
  const nowMs = Date.now()
  const expected = reference(meta, acked, nowMs)
  t.ok(expected.counts.torn! > 0 && expected.counts.lost! > 0, 'holes tear records and lose the cut tail')
  let first: RunReport | null = null
  for (const way of ways) {
    await t.test(`threads ${way.threads}${way.small ? ', small reads' : ''}`, async (t) => {
      setEnv(t, threadsEnv, way.threads)
      const report = await judgeRun(craftRun(meta, acked), { nowMs, ...(way.small ? { readChunkBytes: 1024 * 1024 + 512 } : {}) })
      compareWithReference(t, report, expected)
      if (first === null) first = report
      else t.same(report, first, 'the same report as the main thread alone')
    })
  }
})
