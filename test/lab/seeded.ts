/** A seeded PRNG (mulberry32) so lab runs are replayable: PLUGCHECK_LAB_SEED=<n> repeats the timings. */
export function labSeed(): number {
  const fromEnv = process.env.PLUGCHECK_LAB_SEED
  return fromEnv === undefined ? (Date.now() ^ (process.pid << 16)) >>> 0 : Number(fromEnv) >>> 0
}

export function seededRandom(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
