/** A stored verdict as an agent reports it, for tests of the listener's verdicts. */
import type { StoredVerdict } from '../../src/protocol/messages.js'

export function verdictOf(over: Partial<StoredVerdict> = {}): StoredVerdict {
  return {
    verdict: 'fail',
    acked: 5,
    intact: 3,
    lost: 2,
    torn: 0,
    corrupt: 0,
    lossWindowMs: 12,
    reordered: false,
    lostRanges: [[4, 5]],
    rebootedSinceWrite: true,
    summary: 'FAIL: fdatasync lost acknowledged data (1 of 1 tested methods).',
    bootId: 'after-boot',
    fingerprint: null,
    atMs: Date.now(),
    ...over,
  }
}
