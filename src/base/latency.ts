/** A fixed-size log-bucket latency histogram (about 4% resolution), cheap enough for the write loop. */
const bucketsPerDoubling = 16
const bucketCount = 40 * bucketsPerDoubling

export class LatencyHistogram {
  private readonly counts = new Uint32Array(bucketCount)
  count = 0
  maxUs = 0

  record(us: number): void {
    const index = Math.min(bucketCount - 1, Math.max(0, Math.round(Math.log2(us + 1) * bucketsPerDoubling)))
    this.counts[index]!++
    this.count++
    if (us > this.maxUs) this.maxUs = us
  }

  /** The q-quantile (0..1) in microseconds, NaN when empty. */
  quantileUs(q: number): number {
    if (this.count === 0) return Number.NaN
    // Nearest rank, at least the first sample: q = 0 is the least sample, not an empty bucket below it.
    const rank = Math.max(1, Math.ceil(q * this.count))
    let seen = 0
    for (let i = 0; i < bucketCount; i++) {
      seen += this.counts[i]!
      if (seen >= rank) return Math.min(this.maxUs, 2 ** (i / bucketsPerDoubling) - 1)
    }
    return this.maxUs
  }
}
