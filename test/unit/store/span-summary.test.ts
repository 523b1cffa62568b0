/**
 * SpanSummary, what a run keeps of its spans once they left memory, against the SpanTable it stands
 * for: the same seeded random stream of logged items (windows that merge, straddle and stand apart;
 * small caps so that coarsening happens again and again, odd and even) fed to both, compared after
 * every item.
 */
import t from 'tap'
import { SpanSummary, SpanTable, spanWindowMs } from '../../../src/store/span-table.js'
import { seededRandom } from '../../fixtures/lab/seeded.js'

t.test('the summary answers length, throughSeq and lastAckMs as the table does, after every item', async (t) => {
  for (const maxSpans of [2, 3, 4, 5, 7, 8, 16, 33]) {
    const random = seededRandom(40 + maxSpans)
    const table = new SpanTable()
    const summary = new SpanSummary()
    let seq = 0
    let atMs = 1_700_000_000_000
    let mismatches = 0
    for (let item = 0; item < 5000; item++) {
      // Gaps under, around and well past the window; items spread over up to two windows (coalesced acks).
      atMs += Math.floor(random() * 3 * spanWindowMs)
      const spreadMs = Math.floor(random() * 2 * spanWindowMs)
      const count = 1 + Math.floor(random() * 5)
      table.add(seq + 1, seq + count, atMs, atMs + spreadMs, maxSpans)
      summary.add(seq + 1, seq + count, atMs, atMs + spreadMs, maxSpans)
      seq += count
      atMs += spreadMs
      if (summary.length !== table.length || summary.throughSeq !== table.throughSeq || summary.lastAckMs !== table.lastAckMs) mismatches++
    }
    t.equal(
      mismatches,
      0,
      `cap ${maxSpans}: length, throughSeq and lastAckMs the same after each of 5000 items (${table.length} spans at the end)`,
    )
  }
})

t.test('a summary taken of a table goes on exactly as the table does', async (t) => {
  const random = seededRandom(7)
  const maxSpans = 9
  const table = new SpanTable()
  let seq = 0
  let atMs = 1_700_000_000_000
  const next = (): [number, number, number, number] => {
    atMs += Math.floor(random() * 3 * spanWindowMs)
    const from = seq + 1
    seq += 1 + Math.floor(random() * 3)
    return [from, seq, atMs, atMs]
  }
  for (let i = 0; i < 777; i++) table.add(...next(), maxSpans)
  const summary = SpanSummary.of(table)
  let mismatches = 0
  for (let i = 0; i < 3000; i++) {
    const item = next()
    table.add(...item, maxSpans)
    summary.add(...item, maxSpans)
    if (summary.length !== table.length || summary.throughSeq !== table.throughSeq || summary.lastAckMs !== table.lastAckMs) mismatches++
  }
  t.equal(mismatches, 0, 'the same after each of 3000 more items')
  t.throws(() => summary.add(seq + 2, seq + 2, atMs, atMs, maxSpans), /does not follow/, 'a gap is refused, as by the table')
})
