/**
 * The fast path (WholeRecordCheck, compare first) must never change a verdict: every slot image below
 * is classified with and without it, and the two verdicts must be identical, detail and sectors
 * included. Named damage first (each must also be caught: not intact), then seeded random images
 * (PLUGCHECK_SCAN_SEED replays a run).
 */
import t, { type Test } from 'tap'
import { Classifier, runLayout, type RunLayout } from '../../../src/record/classify.js'
import { fillRecord, runKey, sectorBytes, slotOf, writeTimeOffset, type RunKey } from '../../../src/record/records.js'
import type { Pattern } from '../../../src/record/patterns.js'
import { seededRandom } from '../../fixtures/lab/seeded.js'

const key = runKey('0123456789abcdef')
const otherKey = runKey('fedcba9876543210')
const createdMs = 1_700_000_000_000

interface Setup {
  readonly recordSize: number
  readonly pattern: Pattern
  readonly slotCount: number
  readonly layout: RunLayout
}

function setup(recordSize: number, pattern: Pattern, slotCount: number): Setup {
  return { recordSize, pattern, slotCount, layout: runLayout({ pattern, slotCount, createdMs }, createdMs + 100_000) }
}

function record(s: Setup, seq: number, k: RunKey = key, slot = slotOf(k, s.pattern, seq, s.slotCount)): Buffer {
  const b = Buffer.alloc(s.recordSize)
  fillRecord(b, k, seq, slot, createdMs * 1000 + 5_000_000 + seq)
  return b
}

/** Seqs of this run that land on slot, in increasing order, from seq 1. */
function seqsOfSlot(s: Setup, slot: number, count: number): number[] {
  const found: number[] = []
  for (let seq = 1; found.length < count && seq < 10_000_000; seq++) if (slotOf(key, s.pattern, seq, s.slotCount) === slot) found.push(seq)
  return found
}

/** Both classifiers on the same bytes: identical verdicts; returns the verdict. */
function same(t: Test, s: Setup, bytes: Buffer, slot: number, acked: number, what: string): string {
  const fast = new Classifier(key, s.recordSize, s.layout).classify(bytes, slot, acked)
  const slow = new Classifier(key, s.recordSize, s.layout, { fastPath: false }).classify(bytes, slot, acked)
  t.same(fast, slow, what)
  return fast.kind
}

function flip(bytes: Buffer, offset: number): Buffer {
  const out = Buffer.from(bytes)
  out[offset]! ^= 0x10
  return out
}

/** The slot image with sectors [from, to) taken from other. */
function splice(bytes: Buffer, other: Buffer | null, from: number, to: number): Buffer {
  const out = Buffer.from(bytes)
  if (other === null) out.fill(0, from * sectorBytes, to * sectorBytes)
  else other.copy(out, from * sectorBytes, from * sectorBytes, to * sectorBytes)
  return out
}

const setups = [setup(8192, 'append', 1000), setup(12288, 'overwrite', 97), setup(512, 'append', 7), setup(4096, 'overwrite', 3)]

t.test('named damage is caught, with the verdict of the slow path', async (t) => {
  for (const s of setups) {
    const sectors = s.recordSize / sectorBytes
    const slot = 5 % s.slotCount
    const [older, acked, newer] = seqsOfSlot(s, slot, 3) as [number, number, number]
    const E = record(s, acked)
    const O = record(s, older)
    const N = record(s, newer)
    const label = `${s.recordSize / 1024} KiB ${s.pattern}`
    t.equal(same(t, s, E, slot, acked, `${label}: the acknowledged record`), 'intact')
    t.equal(same(t, s, N, slot, acked, `${label}: a newer record`), 'intact')
    const notIntact: Array<[string, Buffer]> = [
      ['a flipped payload byte', flip(E, s.recordSize - sectorBytes / 2)],
      ['a flipped payload byte in sector 0', flip(E, 100)],
      ['a flipped header byte (record size)', flip(E, 33)],
      ['a flipped header byte (slot)', flip(E, 40)],
      ['a flipped reserved byte', flip(E, 30)],
      ['a flipped write time byte', flip(E, writeTimeOffset + 1)],
      ['a flipped checksum byte', flip(E, s.recordSize - 3)],
      ['a flipped stamp byte (seq) in the last sector', flip(E, s.recordSize - sectorBytes + 16)],
      ['a flipped stamp byte (sector index)', flip(E, (sectors - 1) * sectorBytes + 4)],
      ['a stale record (an older generation)', O],
      ["a misdirected write (another slot's record)", record(s, acked, key, (slot + 1) % s.slotCount)],
      ["another slot's record, header rewritten for this one", record(s, seqsOfSlot(s, (slot + 1) % s.slotCount, 1)[0]!, key, slot)],
      ["another run's record", record(s, acked, otherKey, slot)],
      ['zeros', Buffer.alloc(s.recordSize)],
      ['the record cut short by the end of the file', E.subarray(0, s.recordSize - sectorBytes)],
    ]
    if (sectors > 1) {
      const half = Math.floor(sectors / 2)
      notIntact.push(
        ['torn: first half new, second half old', splice(E, O, half, sectors)],
        ['torn: first half old, second half new', splice(E, O, 0, half)],
        ['a zeroed block in the middle', splice(E, null, half, half + 1)],
        ['the last sector zeroed', splice(E, null, sectors - 1, sectors)],
      )
    }
    for (const [what, bytes] of notIntact)
      t.not(same(t, s, bytes, slot, acked, `${label}: ${what}`), 'intact', `${label}: ${what} is caught`)
  }
})

t.test('seeded random damage: the fast path never changes a verdict', async (t) => {
  const seed =
    process.env.PLUGCHECK_SCAN_SEED === undefined ? (Date.now() ^ (process.pid << 8)) >>> 0 : Number(process.env.PLUGCHECK_SCAN_SEED) >>> 0
  t.comment(`PLUGCHECK_SCAN_SEED=${seed}`)
  const random = seededRandom(seed)
  const pick = (n: number): number => Math.floor(random() * n)
  const imagesPerSetup = 300
  for (const s of setups) {
    const sectors = s.recordSize / sectorBytes
    let mismatches = 0
    for (let i = 0; i < imagesPerSetup; i++) {
      const slot = pick(Math.min(s.slotCount, 50))
      const gens = seqsOfSlot(s, slot, 4)
      const acked = gens[1 + pick(2)]!
      const sources = [
        ...gens.map((q) => record(s, q)),
        record(s, acked, otherKey, slot),
        record(s, gens[0]!, key, (slot + 1) % s.slotCount),
        null,
      ]
      let image: Buffer = Buffer.from(sources[pick(gens.length)]!)
      const damages = pick(3)
      for (let d = 0; d < damages; d++) {
        const kind = pick(4)
        if (kind === 0) image = flip(image, pick(s.recordSize))
        else if (kind === 1) image = flip(image, [24 + pick(32), s.recordSize - 1 - pick(8), pick(24)][pick(3)]!)
        else {
          const from = pick(sectors)
          image = splice(image, sources[pick(sources.length)]!, from, from + 1 + pick(sectors - from))
        }
      }
      if (pick(20) === 0) image = image.subarray(0, pick(sectors) * sectorBytes)
      const fast = new Classifier(key, s.recordSize, s.layout).classify(image, slot, acked)
      const slow = new Classifier(key, s.recordSize, s.layout, { fastPath: false }).classify(image, slot, acked)
      if (JSON.stringify(fast) !== JSON.stringify(slow)) {
        mismatches++
        t.same(fast, slow, `image ${i}`)
      }
    }
    t.equal(mismatches, 0, `${s.recordSize / 1024} KiB ${s.pattern}: ${imagesPerSetup} random images, same verdicts`)
  }
})
