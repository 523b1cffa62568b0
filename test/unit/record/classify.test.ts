/**
 * The record format and the slot classifier: hand-made cases for each row of the decision table,
 * then seeded, replayable crash states (PLUGCHECK_CLASSIFY_SEED) where each sector of a slot comes
 * from a different write, checked against the table.
 */
import t from 'tap'
import { Classifier, runLayout } from '../../../src/record/classify.js'
import { decodeSuperblock, encodeSuperblock, type RunMeta } from '../../../src/record/format.js'
import { fillRecord, runKey, sectorBytes, slotOf, writeTimeOffset } from '../../../src/record/records.js'
import { seededRandom } from '../../fixtures/lab/seeded.js'

const recordSize = 8192
const sectors = recordSize / sectorBytes
const key = runKey('0123456789abcdef')
const otherKey = runKey('fedcba9876543210')
// append over 1000 slots: seq q lives at slot (q - 1) % 1000, so seq 2100's slot 99 also held 100 and 1100, and will hold 3100.
const slotCount = 1000
const acked = 2100
const slot = 99
const layout = runLayout({ pattern: 'append', slotCount, createdMs: 1_700_000_000_000 }, 1_700_000_100_000)
const classifier = (): Classifier => new Classifier(key, recordSize, layout)

function record(seq: number, k = key, s = slotOf(k, 'append', seq, slotCount)): Buffer {
  const b = Buffer.alloc(recordSize)
  fillRecord(b, k, seq, s, 1_700_000_000_000_000 + seq)
  return b
}

/** A slot image assembled sector by sector from the given sources. */
function mix(sources: Array<Buffer | null>): Buffer {
  const out = Buffer.alloc(recordSize)
  sources.forEach((src, i) => {
    src?.copy(out, i * sectorBytes, i * sectorBytes, (i + 1) * sectorBytes)
  })
  return out
}

t.test('superblock round trip and damage', async (t) => {
  const meta: RunMeta = {
    runId: key.runId,
    groupId: key.runId,
    method: 'fdatasync',
    direct: false,
    pattern: 'overwrite',
    recordSizeBytes: recordSize,
    slotCount: 100,
    host: 'h',
    path: '/p',
    requestedPath: '/p',
    createdMs: 1_700_000_000_000,
  }
  const block = encodeSuperblock(meta)
  t.same(decodeSuperblock(block), { kind: 'valid', meta })
  const flipped = Buffer.from(block)
  flipped[30]! ^= 1
  t.match(decodeSuperblock(flipped), { kind: 'damaged', detail: /checksum/ })
  t.match(decodeSuperblock(Buffer.alloc(recordSize)), { kind: 'zero' })
  t.match(decodeSuperblock(Buffer.from('hello world, this is a text file')), { kind: 'foreign' })
  t.match(decodeSuperblock(Buffer.alloc(3)), { kind: 'absent' })
})

t.test('records are deterministic per (run, seq) and differ otherwise', async (t) => {
  const a = record(5)
  const b = record(5)
  a.fill(0, writeTimeOffset, writeTimeOffset + 8)
  b.fill(0, writeTimeOffset, writeTimeOffset + 8)
  t.ok(a.subarray(0, recordSize - 8).equals(b.subarray(0, recordSize - 8)), 'same seq, same bytes (write time aside)')
  t.notOk(record(5).subarray(1024, 2048).equals(record(6).subarray(1024, 2048)), 'another seq, other payload')
  t.notOk(record(5).subarray(1024, 2048).equals(record(5, otherKey).subarray(1024, 2048)), 'another run, other payload')
  const counts = new Set(slotOf.length ? Array.from({ length: 1000 }, (_, i) => slotOf(key, 'overwrite', i + 1, 64)) : [])
  t.equal(counts.size, 64, 'overwrite visits every slot')
  t.equal(slotOf(key, 'append', 1, 64), 0)
  t.equal(slotOf(key, 'append', 65, 64), 0, 'append wraps')
  t.equal(slotOf(key, 'append', acked, slotCount), slot)
})

t.test('decision table, row by row', async (t) => {
  const c = classifier()
  const E = record(acked)
  const N = record(acked + slotCount) // the next write to this slot, never acknowledged
  const O = record(acked - slotCount) // the previous write to this slot
  const half = sectors / 2
  const cases: Array<[string, Buffer, string, RegExp?]> = [
    ['the acknowledged record', E, 'intact'],
    ['a newer record landed whole', N, 'intact', /newer, never acknowledged record 3100/],
    ['an older record', O, 'lost', /older record 1100/],
    ['zeros', Buffer.alloc(recordSize), 'lost', /zeros/],
    ["another run's record", record(acked, otherKey), 'lost', /another run/],
    ['past the end of the file', Buffer.alloc(0), 'lost', /past the end/],
    ['first half acknowledged, second half zeros', mix([...Array(half).fill(E), ...Array(half).fill(null)]), 'torn', /8 of 16 sectors/],
    ['second half an older record', mix([...Array(half).fill(E), ...Array(half).fill(O)]), 'torn'],
    ['the file ends inside the record', E.subarray(0, 4096), 'torn', /sectors 8-15 absent/],
    ['acknowledged and newer sectors mixed', mix([...Array(half).fill(N), ...Array(half).fill(E)]), 'interrupted'],
    ['newer and older sectors mixed', mix([...Array(half).fill(N), ...Array(half).fill(O)]), 'torn'],
    ['older and zero sectors mixed', mix([...Array(half).fill(O), ...Array(half).fill(null)]), 'lost', /older data/],
    ['a record whose header names another slot', record(acked, key, slot + 1), 'corrupt'],
  ]
  for (const [name, bytes, kind, detail] of cases) {
    const verdict = c.classify(bytes, slot, acked)
    t.equal(verdict.kind, kind, name)
    if (detail) t.match(verdict.detail, detail, `${name}: detail`)
  }
  for (const [name, offset] of [
    ['payload', 3000],
    ['write time', writeTimeOffset + 2],
    ['checksum', recordSize - 3],
    ['sector stamp seq', 512 * 3 + 16],
  ] as const) {
    const damaged = Buffer.from(E)
    damaged[offset]! ^= 0x10
    t.equal(c.classify(damaged, slot, acked).kind, 'corrupt', `a flipped bit in the ${name}`)
  }
})

t.test('seeded crash states against the decision table', async (t) => {
  const seed = Number(process.env.PLUGCHECK_CLASSIFY_SEED ?? 20261130)
  const random = seededRandom(seed)
  t.comment(`seed ${seed}`)
  const c = classifier()
  const sources = {
    E: record(acked),
    N: record(acked + slotCount),
    N2: record(acked + 2 * slotCount),
    O: record(acked - slotCount),
    Z: null,
    F: record(acked, otherKey),
    M: record(acked + 1), // a newer seq of another slot: misdirected
    A: record(acked - 1), // an acknowledged seq of another slot: misdirected
  }
  type Source = keyof typeof sources
  const names = Object.keys(sources) as Source[]
  const expected = (picks: Source[]): string => {
    const high = picks.filter((p) => p === 'E' || p === 'N' || p === 'N2').length
    const same = picks.every((p) => p === picks[0])
    if (picks.some((p) => p === 'M' || p === 'A')) return 'corrupt'
    if (same && high === sectors) return 'intact'
    if (high === 0) return 'lost'
    if (high === sectors) return 'interrupted'
    return 'torn'
  }
  let checked = 0
  for (let i = 0; i < 2000; i++) {
    // Bias towards few distinct sources per record, as real tears have.
    const pool = [names[Math.floor(random() * names.length)]!, names[Math.floor(random() * names.length)]!]
    const boundary = Math.floor(random() * (sectors + 1))
    const picks = Array.from({ length: sectors }, (_, k) => (k < boundary ? pool[0]! : pool[1]!))
    const image = mix(picks.map((p) => sources[p]))
    const flip = random() < 0.1
    if (flip) {
      const at = 24 + Math.floor(random() * (recordSize - 24))
      // Another run's sectors are recognised by their stamp alone (its payload is not ours to check), and
      // a flipped bit in zeros is garbage too: keep the oracle to bits flipped in this run's sectors.
      const flippedIn = picks[Math.floor(at / sectorBytes)]
      if (flippedIn === 'Z' || flippedIn === 'F') continue
      // When sector 0 and the last sector come from different writes, the checksum bytes cannot be recomputed and the
      // write time is only checked for plausibility (the legend in classify.ts): the oracle skips flips there.
      const inHeaderField = (at >= writeTimeOffset && at < writeTimeOffset + 8) || at >= recordSize - 8
      if (inHeaderField && picks[0] !== picks[sectors - 1]) continue
      image[at]! ^= 1 << Math.floor(random() * 8)
    }
    const got = c.classify(image, slot, acked).kind
    const want = flip ? 'corrupt' : expected(picks)
    if (got !== want) {
      t.fail(`state ${i} (seed ${seed}): sectors ${picks.join('')}${flip ? ' with a flipped bit' : ''}: got ${got}, want ${want}`)
      return
    }
    checked++
  }
  t.ok(checked > 1500, `${checked} crash states classified as the table says`)
})

t.test("misdirected sectors: another slot's record is never ours", async (t) => {
  const c = classifier()
  const E = record(acked)
  const newerElsewhere = record(acked + 1) // seq 2101 belongs to slot 100
  const ackedElsewhere = record(acked - 1) // seq 2099, acknowledged, belongs to slot 98
  const cases: Array<[string, Buffer]> = [
    ['sectors 1-15 of seq E+1 (slot 100) over E', mix([E, ...Array(sectors - 1).fill(newerElsewhere)])],
    ['sectors 8-15 of seq E+1 over E', mix([...Array(8).fill(E), ...Array(8).fill(newerElsewhere)])],
    ["the whole record E+1 in E's slot", newerElsewhere],
    ['sectors 1-15 of acknowledged seq E-1 (slot 98) over E', mix([E, ...Array(sectors - 1).fill(ackedElsewhere)])],
    ['sectors of seq E+1 over zeros', mix([null, ...Array(sectors - 1).fill(newerElsewhere)])],
  ]
  for (const [name, bytes] of cases) {
    const verdict = c.classify(bytes, slot, acked)
    t.equal(verdict.kind, 'corrupt', name)
    t.notMatch(verdict.detail, /unacknowledged/, `${name}: never called unacknowledged`)
  }
  t.match(c.classify(cases[0]![1], slot, acked).detail, /record 2101, which belongs to slot 100: a misdirected write/)
  t.match(c.classify(cases[3]![1], slot, acked).detail, /record 2099, which belongs to slot 98/)
})

t.test('write time and checksum fields are checked in mixed sector states', async (t) => {
  const c = classifier()
  const E = record(acked)
  const N = record(acked + slotCount)
  const end = recordSize - 8
  const tamper = (bytes: Buffer, offsets: number[]): Buffer => {
    const out = Buffer.from(bytes)
    for (const at of offsets) for (let i = 0; i < 8; i++) out[at + i]! ^= 0x5a
    return out
  }
  // E at sector 0 and the last sector, one newer sector in the middle: a real interrupted state.
  const interrupted = mix([E, E, E, N, ...Array(sectors - 4).fill(E)])
  t.equal(c.classify(interrupted, slot, acked).kind, 'interrupted', 'an honest interrupted overwrite passes')
  t.equal(
    c.classify(tamper(interrupted, [writeTimeOffset, end]), slot, acked).kind,
    'corrupt',
    'plus 16 changed bytes at 48 and recordSize-8: corrupt',
  )
  t.equal(c.classify(tamper(interrupted, [writeTimeOffset]), slot, acked).kind, 'corrupt', 'write time alone changed: corrupt')
  t.equal(c.classify(tamper(interrupted, [end]), slot, acked).kind, 'corrupt', 'checksum alone changed: corrupt')
  t.match(c.classify(tamper(interrupted, [end]), slot, acked).detail, /write time or checksum of record 2100/)
  // E at both ends, zeros in the middle: torn, and its header fields check out.
  const torn = mix([E, ...Array(sectors - 2).fill(null), E])
  t.equal(c.classify(torn, slot, acked).kind, 'torn')
  t.equal(c.classify(tamper(torn, [end]), slot, acked).kind, 'corrupt', 'torn with a changed checksum: corrupt')
  // Sector 0 from the newer write, the rest E: E's checksum is unverifiable (its write time is gone), N's write time must be plausible.
  const newerHead = mix([N, ...Array(sectors - 1).fill(E)])
  t.equal(c.classify(newerHead, slot, acked).kind, 'interrupted')
  const badTime = Buffer.from(newerHead)
  badTime.writeBigUInt64LE(0xdead_beef_0000_0000n, writeTimeOffset)
  const verdict = c.classify(badTime, slot, acked)
  t.equal(verdict.kind, 'corrupt', 'an implausible write time in sector 0: corrupt')
  t.match(verdict.detail, /write time of record 3100/)
})
