/**
 * The record format and the slot classifier: hand-made cases for each row of the decision table,
 * then seeded, replayable crash states (PLUGCHECK_CLASSIFY_SEED) where each sector of a slot comes
 * from a different write, checked against the table.
 */
import t from 'tap'
import { Classifier } from '../../src/record/classify.js'
import { decodeSuperblock, encodeSuperblock, fillRecord, runKey, sectorBytes, slotOf, writeTimeOffset, type RunMeta } from '../../src/record/format.js'
import { seededRandom } from '../lab/seeded.js'

const recordSize = 8192
const sectors = recordSize / sectorBytes
const key = runKey('0123456789abcdef')
const otherKey = runKey('fedcba9876543210')
const slot = 7
const acked = 100

function record(seq: number, k = key, s = slot): Buffer {
  const b = Buffer.alloc(recordSize)
  fillRecord(b, k, seq, s, 1_700_000_000_000_000 + seq)
  return b
}

/** A slot image assembled sector by sector from the given sources. */
function mix(sources: Array<Buffer | null>): Buffer {
  const out = Buffer.alloc(recordSize)
  sources.forEach((src, i) => src?.copy(out, i * sectorBytes, i * sectorBytes, (i + 1) * sectorBytes))
  return out
}

t.test('superblock round trip and damage', async (t) => {
  const meta: RunMeta = {
    runId: key.runId, groupId: key.runId, method: 'fdatasync', direct: false, pattern: 'overwrite', recordSizeBytes: recordSize,
    slotCount: 100, host: 'h', path: '/p', requestedPath: '/p', createdMs: 1,
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
})

t.test('decision table, row by row', async (t) => {
  const c = new Classifier(key, recordSize)
  const E = record(acked)
  const N = record(acked + 5)
  const O = record(acked - 5)
  const half = sectors / 2
  const cases: Array<[string, Buffer, string, RegExp?]> = [
    ['the acknowledged record', E, 'intact'],
    ['a newer record landed whole', N, 'intact', /newer record 105/],
    ['an older record', O, 'lost', /older record 95/],
    ['zeros', Buffer.alloc(recordSize), 'lost', /zeros/],
    ["another run's record", record(acked, otherKey), 'lost', /another run/],
    ['past the end of the file', Buffer.alloc(0), 'lost', /past the end/],
    ['first half acknowledged, second half zeros', mix([...Array(half).fill(E), ...Array(half).fill(null)]), 'torn', /8 of 16 sectors/],
    ['second half an older record', mix([...Array(half).fill(E), ...Array(half).fill(O)]), 'torn'],
    ['the file ends inside the record', E.subarray(0, 4096), 'torn', /sectors 8-15 absent/],
    ['acknowledged and newer sectors mixed', mix([...Array(half).fill(N), ...Array(half).fill(E)]), 'interrupted'],
    ['newer and older sectors mixed', mix([...Array(half).fill(N), ...Array(half).fill(O)]), 'torn'],
    ['older and zero sectors mixed', mix([...Array(half).fill(O), ...Array(half).fill(null)]), 'lost', /older data/],
    ['the record of another slot', record(acked, key, slot + 1), 'corrupt'],
  ]
  for (const [name, bytes, kind, detail] of cases) {
    const verdict = c.classify(bytes, slot, acked)
    t.equal(verdict.kind, kind, name)
    if (detail) t.match(verdict.detail, detail, `${name}: detail`)
  }
  for (const [name, offset] of [['payload', 3000], ['write time', writeTimeOffset + 2], ['checksum', recordSize - 3], ['sector stamp seq', 512 * 3 + 16]] as const) {
    const damaged = Buffer.from(E)
    damaged[offset]! ^= 0x10
    t.equal(c.classify(damaged, slot, acked).kind, 'corrupt', `a flipped bit in the ${name}`)
  }
})

t.test('seeded crash states against the decision table', async (t) => {
  const seed = Number(process.env.PLUGCHECK_CLASSIFY_SEED ?? 20261130)
  const random = seededRandom(seed)
  t.comment(`seed ${seed}`)
  const c = new Classifier(key, recordSize)
  const sources = { E: record(acked), N: record(acked + 1), N2: record(acked + 7), O: record(acked - 1), Z: null, F: record(acked, otherKey) }
  type Source = keyof typeof sources
  const names = Object.keys(sources) as Source[]
  const expected = (picks: Source[]): string => {
    const high = picks.filter((p) => p === 'E' || p === 'N' || p === 'N2').length
    const same = picks.every((p) => p === picks[0])
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
