/**
 * LatencyHistogram: log buckets, 16 per doubling, so a quantile is the true sample's value within
 * 2^(1/32) - 1 (about 2.2%) of (value + 1), never above the largest sample; NaN when nothing was
 * recorded. Expected quantiles here are computed from the sorted samples (nearest rank).
 */
import t, { type Test } from 'tap'
import { LatencyHistogram } from '../../../src/base/latency.js'

/** Half a bucket, relative: a bucket's value is within this of (value + 1). */
const halfBucket = 2 ** (1 / 32) - 1

/** The nearest-rank q-quantile of the samples. */
function nearestRank(samples: readonly number[], q: number): number {
  const sorted = [...samples].sort((a, b) => a - b)
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)]!
}

function near(t: Test, got: number, want: number, what: string): void {
  t.ok(Math.abs(got - want) <= halfBucket * (want + 1) + 1e-9, `${what}: ${got} within 2.2% of ${want}`)
}

/** Seeded xorshift32 in [0, 1). */
function seeded(seed: number): () => number {
  let state = seed >>> 0 || 1
  return () => {
    state ^= state << 13
    state ^= state >>> 17
    state ^= state << 5
    state >>>= 0
    return state / 2 ** 32
  }
}

t.test('empty: no quantile, no count', async (t) => {
  const h = new LatencyHistogram()
  t.ok(Number.isNaN(h.quantileUs(0.5)))
  t.ok(Number.isNaN(h.quantileUs(0.99)))
  t.equal(h.count, 0)
  t.equal(h.maxUs, 0)
})

t.test('count and max are exact', async (t) => {
  const h = new LatencyHistogram()
  for (const us of [120, 5, 99_000, 0, 4000]) h.record(us)
  t.equal(h.count, 5)
  t.equal(h.maxUs, 99_000)
})

t.test('one sample: every quantile is it, within a bucket, and never above it', async (t) => {
  for (const us of [0, 1, 7, 100, 1010, 12_345, 2_000_000]) {
    const h = new LatencyHistogram()
    h.record(us)
    for (const q of [0.01, 0.5, 0.99, 1]) {
      const got = h.quantileUs(q)
      near(t, got, us, `${us} us at q ${q}`)
      t.ok(got <= us, `${got} <= ${us}`)
    }
  }
})

t.test('two populations: the quantiles fall on the right side of the step', async (t) => {
  const h = new LatencyHistogram()
  const samples: number[] = []
  for (let i = 0; i < 900; i++) samples.push(50)
  for (let i = 0; i < 100; i++) samples.push(20_000)
  for (const us of samples) h.record(us)
  near(t, h.quantileUs(0.5), 50, 'p50')
  near(t, h.quantileUs(0.9), 50, 'p90: rank 900 is the last fast one')
  near(t, h.quantileUs(0.901), 20_000, 'p90.1: rank 901 is the first slow one')
  near(t, h.quantileUs(0.99), 20_000, 'p99')
  t.equal(h.quantileUs(1), 20_000, 'p100 is the max')
})

t.test('seeded random samples: every quantile within a bucket of the nearest rank', async (t) => {
  for (const seed of [1, 17, 4242]) {
    const random = seeded(seed)
    const h = new LatencyHistogram()
    const samples: number[] = []
    // Log-uniform over 1 us .. 10 s, whole microseconds, as the write loop records them.
    for (let i = 0; i < 5000; i++) samples.push(Math.round(10 ** (random() * 7)))
    for (const us of samples) h.record(us)
    t.equal(h.count, samples.length)
    t.equal(h.maxUs, Math.max(...samples))
    for (const q of [0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 1]) {
      // The bucket of the nearest-rank sample, or of a neighbour in the same bucket: both are within a bucket of it.
      near(t, h.quantileUs(q), nearestRank(samples, q), `seed ${seed} q ${q}`)
    }
  }
})

t.test('quantiles never decrease with q', async (t) => {
  const random = seeded(99)
  const h = new LatencyHistogram()
  for (let i = 0; i < 2000; i++) h.record(Math.round(random() * 100_000))
  let previous = -1
  for (let q = 0.01; q <= 1; q += 0.01) {
    const got = h.quantileUs(q)
    t.ok(got >= previous, `q ${q.toFixed(2)}: ${got} >= ${previous}`)
    previous = got
  }
})

t.test('q 0 is the least sample, as every other q is a sample near its rank', async (t) => {
  const h = new LatencyHistogram()
  for (const us of [1000, 1200, 5000]) h.record(us)
  near(t, h.quantileUs(0), 1000, 'p0')
})
