/**
 * Classifies what a slot holds against the last seq acknowledged for it. Never throws: damage is a
 * finding, not an error.
 *
 * Each sector is first read on its own:
 *   absent   past the end of the file
 *   zero     all zero bytes
 *   foreign  a stamp of another run
 *   match s  stamped with seq s of this run, bytes equal to the regenerated record s
 *            (write time and checksum fields excepted, they are checked by the checksum)
 *   garbage  anything else
 *
 * Decision table, E = last acknowledged seq for the slot, in order:
 *   every sector match s (one s), checksum valid, s >= E   intact  (s > E: a newer unacked write landed)
 *   every sector match s (one s), checksum valid, s <  E   lost    (an older record: the write vanished)
 *   every sector match s (one s), checksum invalid         corrupt (header fields damaged)
 *   any sector garbage                                     corrupt (bytes no write of ours produced)
 *   no sector match >= E                                   lost    (zeros, older seqs, other run, past EOF)
 *   sectors match >= E only, several seqs                  interrupted overwrite: a newer unacked write
 *                                                          was cut mid-way; E itself was whole. Not a failure.
 *   otherwise (some sectors >= E, some older/zero/absent)  torn    (part of an acknowledged write is gone)
 */
import {
  checksumBytes,
  fillRecord,
  isZero,
  readStamp,
  recordChecksumValid,
  sectorBytes,
  writeTimeOffset,
  type RunKey,
} from './format.js'

export type SectorReading =
  | { readonly kind: 'absent' | 'zero' | 'foreign' | 'garbage' }
  | { readonly kind: 'match'; readonly seq: number }

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

/** Reusable buffers so classifying millions of slots does not allocate per slot. */
export class Classifier {
  private readonly expected: Buffer
  private readonly sectorCount: number

  constructor(
    private readonly key: RunKey,
    private readonly recordSizeBytes: number,
  ) {
    this.expected = Buffer.alloc(recordSizeBytes)
    this.sectorCount = recordSizeBytes / sectorBytes
  }

  /** bytes: what the file holds at the slot (shorter than a record when the file ends inside it). */
  classify(bytes: Buffer, slot: number, ackedSeq: number): SlotVerdict {
    const whole = this.wholeRecordSeq(bytes, slot)
    if (whole !== null) {
      if (!recordChecksumValid(bytes)) {
        return { kind: 'corrupt', foundSeq: whole, detail: `record ${whole}: payload intact but header or checksum field damaged (checksum mismatch)` }
      }
      return whole >= ackedSeq
        ? { kind: 'intact', foundSeq: whole, detail: whole === ackedSeq ? 'intact' : `holds newer record ${whole}` }
        : { kind: 'lost', foundSeq: whole, detail: `holds older record ${whole}` }
    }
    const sectors = this.readSectors(bytes, slot)
    const garbage = sectors.findIndex((s) => s.kind === 'garbage')
    if (garbage >= 0) {
      const stamp = bytes.length >= (garbage + 1) * sectorBytes ? readStamp(bytes, garbage * sectorBytes) : null
      const stampText = stamp === null ? 'no sector stamp' : `stamp says seq ${stamp.seq}, sector ${stamp.sectorIndex}`
      return { kind: 'corrupt', detail: `sector ${garbage} holds bytes no write produced (${stampText})`, sectors }
    }
    const high = sectors.filter((s) => s.kind === 'match' && s.seq >= ackedSeq).length
    if (high === 0) return { kind: 'lost', detail: describeLoss(sectors), sectors }
    if (high === sectors.length) {
      return { kind: 'interrupted', detail: `a newer unacknowledged write was cut mid-way: ${describeSeqs(sectors)}`, sectors }
    }
    return { kind: 'torn', detail: `${sectors.length - high} of ${sectors.length} sectors lack the acknowledged write: ${describeSeqs(sectors)}`, sectors }
  }

  /** Fast path: the seq when the bytes are exactly one of our records for this slot (write time and checksum aside). */
  private wholeRecordSeq(bytes: Buffer, slot: number): number | null {
    if (bytes.length !== this.recordSizeBytes) return null
    const stamp = readStamp(bytes, 0)
    if (stamp === null || stamp.runLo !== this.key.lo || stamp.runHi !== this.key.hi || stamp.seq === 0) return null
    this.regenerate(stamp.seq, slot, bytes)
    return this.expected.equals(bytes) ? stamp.seq : null
  }

  /** Regenerates record seq into this.expected, copying the two underivable fields from actual. */
  private regenerate(seq: number, slot: number, actual: Buffer): void {
    fillRecord(this.expected, this.key, seq, slot, 0)
    actual.copy(this.expected, writeTimeOffset, writeTimeOffset, writeTimeOffset + 8)
    const end = this.recordSizeBytes - checksumBytes
    if (actual.length >= this.recordSizeBytes) actual.copy(this.expected, end, end, this.recordSizeBytes)
  }

  private readSectors(bytes: Buffer, slot: number): SectorReading[] {
    const readings: SectorReading[] = []
    let regeneratedSeq = -1
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
      if (regeneratedSeq !== stamp.seq) {
        this.regenerate(stamp.seq, slot, bytes)
        regeneratedSeq = stamp.seq
      }
      const same = this.expected.subarray(start, start + sectorBytes).equals(sector)
      readings.push(same ? { kind: 'match', seq: stamp.seq } : { kind: 'garbage' })
    }
    return readings
  }
}

function describeLoss(sectors: readonly SectorReading[]): string {
  if (sectors.every((s) => s.kind === 'absent')) return 'past the end of the file'
  if (sectors.every((s) => s.kind === 'zero' || s.kind === 'absent')) return 'zeros: the write never reached the disk'
  if (sectors.every((s) => s.kind === 'foreign' || s.kind === 'zero' || s.kind === 'absent')) return "another run's data"
  return `older data: ${describeSeqs(sectors)}`
}

/** "sectors 0-7 seq 12, 8-15 zero" */
export function describeSeqs(sectors: readonly SectorReading[]): string {
  const label = (s: SectorReading): string => (s.kind === 'match' ? `seq ${s.seq}` : s.kind)
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
