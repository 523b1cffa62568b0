/**
 * Classifies what a slot holds against the last seq acknowledged for it. Never throws: damage is a
 * finding, not an error.
 *
 * Each 512-byte sector k is first read on its own:
 *   absent      past the end of the file
 *   zero        all zero bytes
 *   foreign     a stamp of another run
 *   match s     stamped with seq s of this run, slotOf(s) is this slot, bytes equal to sector k of the
 *               regenerated record s (see "header fields" below for the two underivable fields)
 *   misdirected stamped with seq s of this run, bytes equal to sector k of record s, but record s
 *               belongs to another slot: a write landed at the wrong address
 *   garbage     anything else, including a header field that fails its check
 *
 * Header fields. Two fields of a record cannot be regenerated: the write time (sector 0, offset 48)
 * and the checksum (the last 8 bytes, an xxh64 over everything before it, write time included).
 *   - The whole record holds one seq: the checksum is verified over the bytes as they are, so both
 *     fields are checked exactly.
 *   - Sector 0 and the last sector hold the same seq s but other sectors differ: record s is rebuilt
 *     from its regenerated payload with the write time read from sector 0, and its checksum must equal
 *     the last 8 bytes. Otherwise both sectors are garbage. Both fields are checked exactly.
 *   - Sector 0 holds seq a, the last sector another seq b: a's write time must be plausible (between
 *     the run's creation and its last ack at the listener, a day of slack either side; see runLayout)
 *     or sector 0 is garbage. b's checksum hashes b's write time, which the other write destroyed, so
 *     those 8 bytes cannot be recomputed; they are the only bytes left unverified, and only in this
 *     mixed state, which no single write produces (it needs at least two writes to the slot, cut
 *     mid-way).
 *
 * Decision table, E = last acknowledged seq for the slot, first matching row wins:
 *   whole record of seq s, checksum valid, slotOf(s) = slot, s >= E   intact  (s > E: a newer, never
 *                                                                             acknowledged write landed)
 *   whole record of seq s, checksum valid, slotOf(s) = slot, s <  E   lost    (an older record: the write vanished)
 *   whole record of seq s, checksum invalid                           corrupt (header fields damaged)
 *   any sector garbage                                                corrupt (bytes no write of ours produced)
 *   any sector misdirected                                            corrupt (another slot's record: a misdirected write)
 *   no sector match >= E                                              lost    (zeros, older seqs, other run, past EOF)
 *   every sector match >= E, several seqs                             interrupted: newer writes to this slot were cut
 *                                                                     mid-way after E was whole. Not a failure.
 *   otherwise (some sectors match >= E, others older/zero/foreign/absent)  torn (part of an acknowledged write is gone)
 *
 * A seq s > E with slotOf(s) = slot is never acknowledged (E is the last acknowledged seq of the
 * slot), so "interrupted" and "newer" never describe an acknowledged write.
 */
import {
  checksumBytes,
  fillRecord,
  isZero,
  readStamp,
  readU64,
  recordChecksumValid,
  sectorBytes,
  slotOf,
  writeTimeOffset,
  type RunKey,
} from './records.js'
import type { Pattern } from './patterns.js'
import { WholeRecordCheck } from './scan.js'

export type SectorReading =
  | { readonly kind: 'absent' | 'zero' | 'foreign' }
  | { readonly kind: 'garbage'; readonly why?: string }
  | { readonly kind: 'match'; readonly seq: number }
  | { readonly kind: 'misdirected'; readonly seq: number; readonly homeSlot: number }

export type SlotClass = 'intact' | 'interrupted' | 'torn' | 'lost' | 'corrupt'

export interface SlotVerdict {
  readonly kind: SlotClass
  /** The seq the slot holds as a whole (intact or lost to an older record), when there is one. */
  readonly foundSeq?: number
  /** Plain words: why this class. */
  readonly detail: string
  /** Per sector, for torn, interrupted and corrupt slots. */
  readonly sectors?: readonly SectorReading[]
}

/** Where this run's records go and when they can have been written. */
export interface RunLayout {
  readonly pattern: Pattern
  readonly slotCount: number
  /** Plausible write times of this run's records, microseconds since the epoch. */
  readonly writeTimeUsMin: number
  readonly maxWriteTimeUs: number
}

/** Clock slack for the write-time plausibility check: older writers' clocks stepped, and records outlive their last ack. */
export const writeTimeSlackUs = 24 * 3600 * 1_000_000

/**
 * A writer derives its run's creation time and every record's write time from one base plus
 * monotonic time (client/run-clock.ts): every write time lies from createdMs to createdMs plus how
 * long the run went on, which the listener measured (runMs: from the announcement to its last ack
 * or end). Verify's own clock (nowMs) may be anywhere after a reboot (a clock at 1970, a VM resumed):
 * it only ever widens the bound, for runs of older writers whose two times came from two clock reads.
 */
export function runLayout(meta: { pattern: Pattern; slotCount: number; createdMs: number }, nowMs: number, runMs = 0): RunLayout {
  return {
    pattern: meta.pattern,
    slotCount: meta.slotCount,
    writeTimeUsMin: meta.createdMs * 1000 - writeTimeSlackUs,
    maxWriteTimeUs: Math.max(nowMs, meta.createdMs + Math.max(0, runMs)) * 1000 + writeTimeSlackUs,
  }
}

/**
 * Reusable buffers so classifying millions of slots does not allocate per slot. A slot holding one
 * whole record of ours is recognised first by WholeRecordCheck (no regeneration); everything else
 * takes the path described above. `fastPath: false` skips the first step (the reference in tests).
 */
export class Classifier {
  private readonly expected: Buffer
  private readonly sectorCount: number
  private regeneratedSeq = -1
  private readonly whole: WholeRecordCheck | null

  constructor(
    private readonly key: RunKey,
    private readonly recordSizeBytes: number,
    private readonly layout: RunLayout,
    options: { readonly fastPath?: boolean } = {},
  ) {
    this.expected = Buffer.alloc(recordSizeBytes)
    this.sectorCount = recordSizeBytes / sectorBytes
    this.whole = options.fastPath === false ? null : new WholeRecordCheck(key, recordSizeBytes, layout.pattern, layout.slotCount)
  }

  /** The slot record seq is written to. */
  homeSlot(seq: number): number {
    return slotOf(this.key, this.layout.pattern, seq, this.layout.slotCount)
  }

  /** bytes: what the file holds at the slot (shorter than a record when the file ends inside it). */
  classify(bytes: Buffer, slot: number, ackedSeq: number): SlotVerdict {
    const checked = this.whole?.seqOf(bytes, slot) ?? null
    if (checked !== null) return wholeVerdict(checked, ackedSeq)
    const whole = this.wholeRecordSeq(bytes, slot)
    if (whole !== null) {
      if (!recordChecksumValid(bytes)) {
        return {
          kind: 'corrupt',
          foundSeq: whole,
          detail: `record ${whole}: payload intact but write time or checksum field damaged (checksum mismatch)`,
        }
      }
      return wholeVerdict(whole, ackedSeq)
    }
    const sectors = this.readSectors(bytes, slot)
    const garbage = sectors.findIndex((s) => s.kind === 'garbage')
    if (garbage >= 0) {
      const reading = sectors[garbage] as { why?: string }
      if (reading.why !== undefined) return { kind: 'corrupt', detail: `sector ${garbage}: ${reading.why}`, sectors }
      const stamp = bytes.length >= (garbage + 1) * sectorBytes ? readStamp(bytes, garbage * sectorBytes) : null
      const stampText = stamp === null ? 'no sector stamp' : `stamp says seq ${stamp.seq}, sector ${stamp.sectorIndex}`
      return { kind: 'corrupt', detail: `sector ${garbage} holds bytes no write produced (${stampText})`, sectors }
    }
    const misdirected = sectors.findIndex((s) => s.kind === 'misdirected')
    if (misdirected >= 0) {
      const m = sectors[misdirected] as { seq: number; homeSlot: number }
      const count = sectors.filter((s) => s.kind === 'misdirected').length
      return {
        kind: 'corrupt',
        detail: `${count} of ${sectors.length} sectors hold record ${m.seq}, which belongs to slot ${m.homeSlot}: a misdirected write (${describeSeqs(sectors)})`,
        sectors,
      }
    }
    const high = sectors.filter((s) => s.kind === 'match' && s.seq >= ackedSeq).length
    if (high === 0) return { kind: 'lost', detail: describeLoss(sectors), sectors }
    if (high === sectors.length) {
      return {
        kind: 'interrupted',
        detail: `newer, never acknowledged writes were cut mid-way over acknowledged seq ${ackedSeq}: ${describeSeqs(sectors)}`,
        sectors,
      }
    }
    return {
      kind: 'torn',
      detail: `${sectors.length - high} of ${sectors.length} sectors lack the acknowledged write: ${describeSeqs(sectors)}`,
      sectors,
    }
  }

  /** Fast path: the seq when the bytes are exactly one of our records for this slot (write time and checksum aside). */
  private wholeRecordSeq(bytes: Buffer, slot: number): number | null {
    if (bytes.length !== this.recordSizeBytes) return null
    const stamp = readStamp(bytes, 0)
    if (stamp === null || stamp.runLo !== this.key.lo || stamp.runHi !== this.key.hi || stamp.seq === 0) return null
    if (this.homeSlot(stamp.seq) !== slot) return null
    this.regenerate(stamp.seq, slot, bytes)
    return this.expected.equals(bytes) ? stamp.seq : null
  }

  /** Regenerates record seq (written to slot) into this.expected, copying the two underivable fields from actual. */
  private regenerate(seq: number, slot: number, actual: Buffer): void {
    fillRecord(this.expected, this.key, seq, slot, 0)
    this.regeneratedSeq = seq
    if (actual.length >= writeTimeOffset + 8) actual.copy(this.expected, writeTimeOffset, writeTimeOffset, writeTimeOffset + 8)
    const end = this.recordSizeBytes - checksumBytes
    if (actual.length >= this.recordSizeBytes) actual.copy(this.expected, end, end, this.recordSizeBytes)
  }

  private readSectors(bytes: Buffer, slot: number): SectorReading[] {
    const readings: SectorReading[] = []
    this.regeneratedSeq = -1
    for (let k = 0; k < this.sectorCount; k++) {
      const start = k * sectorBytes
      if (bytes.length < start + sectorBytes) {
        readings.push({ kind: 'absent' })
        continue
      }
      const sector = bytes.subarray(start, start + sectorBytes)
      if (isZero(sector)) {
        readings.push({ kind: 'zero' })
        continue
      }
      const stamp = readStamp(bytes, start)
      if (stamp === null || stamp.sectorIndex !== k || stamp.seq === 0) {
        readings.push({ kind: 'garbage' })
        continue
      }
      if (stamp.runLo !== this.key.lo || stamp.runHi !== this.key.hi) {
        readings.push({ kind: 'foreign' })
        continue
      }
      const home = this.homeSlot(stamp.seq)
      if (this.regeneratedSeq !== stamp.seq) this.regenerate(stamp.seq, home, bytes)
      if (!this.expected.subarray(start, start + sectorBytes).equals(sector)) readings.push({ kind: 'garbage' })
      else if (home === slot) readings.push({ kind: 'match', seq: stamp.seq })
      else readings.push({ kind: 'misdirected', seq: stamp.seq, homeSlot: home })
    }
    this.checkHeaderFields(bytes, readings)
    return readings
  }

  /** The write time and checksum fields, as the legend at the top says. Turns failing sectors into garbage. */
  private checkHeaderFields(bytes: Buffer, readings: SectorReading[]): void {
    const last = this.sectorCount - 1
    const first = readings[0]!
    const final = readings[last]!
    const seqOf = (r: SectorReading): number | null => (r.kind === 'match' || r.kind === 'misdirected' ? r.seq : null)
    const a = seqOf(first)
    const b = seqOf(final)
    if (a !== null && a === b) {
      // Rebuild record a with sector 0's write time and the last sector's checksum, and check the one against the other.
      this.regenerate(a, first.kind === 'misdirected' ? first.homeSlot : this.homeSlot(a), bytes)
      if (!recordChecksumValid(this.expected)) {
        const why = `the write time or checksum of record ${a} is damaged (the checksum does not match record ${a} rebuilt with its write time)`
        readings[0] = { kind: 'garbage', why }
        readings[last] = { kind: 'garbage', why }
      }
      return
    }
    if (a !== null) {
      const writeTimeUs = readU64(bytes, writeTimeOffset)
      if (writeTimeUs < this.layout.writeTimeUsMin || writeTimeUs > this.layout.maxWriteTimeUs) {
        readings[0] = {
          kind: 'garbage',
          why: `the write time of record ${a} (${writeTimeUs} us since the epoch) is not a time this run wrote at`,
        }
      }
    }
  }
}

/** A whole record of seq found with a valid checksum, judged against the acknowledged seq. */
/** The verdict on a slot holding one whole, checksum-valid record of seq found (the first row of the table above). */
export function wholeVerdict(found: number, ackedSeq: number): SlotVerdict {
  if (found === ackedSeq) return { kind: 'intact', foundSeq: found, detail: 'intact' }
  return found > ackedSeq
    ? { kind: 'intact', foundSeq: found, detail: `holds newer, never acknowledged record ${found}` }
    : { kind: 'lost', foundSeq: found, detail: `holds older record ${found}` }
}

function describeLoss(sectors: readonly SectorReading[]): string {
  if (sectors.every((s) => s.kind === 'absent')) return 'past the end of the file'
  if (sectors.every((s) => s.kind === 'zero' || s.kind === 'absent')) return 'zeros: the write never reached the disk'
  if (sectors.every((s) => s.kind === 'foreign' || s.kind === 'zero' || s.kind === 'absent')) return "another run's data"
  return `older data: ${describeSeqs(sectors)}`
}

/** "sectors 0-7 seq 12, 8-15 zero" */
export function describeSeqs(sectors: readonly SectorReading[]): string {
  const label = (s: SectorReading): string =>
    s.kind === 'match' ? `seq ${s.seq}` : s.kind === 'misdirected' ? `seq ${s.seq} of slot ${s.homeSlot}` : s.kind
  const parts: string[] = []
  let start = 0
  for (let k = 1; k <= sectors.length; k++) {
    if (k === sectors.length || label(sectors[k]!) !== label(sectors[start]!)) {
      parts.push(`sector${k - 1 > start ? `s ${start}-${k - 1}` : ` ${start}`} ${label(sectors[start]!)}`)
      start = k
    }
  }
  return parts.join(', ')
}
