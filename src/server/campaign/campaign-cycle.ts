/**
 * A cycle of a campaign (campaign.ts): its record before anything happened, and the moment of its cut,
 * drawn from the campaign's seed and the cycle's number alone so that the cut moments replay.
 */
import type { CycleRecord } from '../../store/campaign-file.js'

/**
 * The delay between steady and the cut of a cycle: uniform in [min, max] seconds, drawn from a PRNG
 * seeded with (seed, cycle) alone, so a campaign's cut moments replay from its seed, resumed or not.
 */
export function cutDelayMs(seed: number, cycle: number, cutAfterS: readonly [number, number]): number {
  // splitmix32 over the seed and the cycle: every cycle's draw is independent of the others.
  let state = (seed ^ Math.imul(cycle, 0x9e3779b9)) >>> 0
  const next = (): number => {
    state = (state + 0x9e3779b9) >>> 0
    let z = state
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0
    return (z ^ (z >>> 16)) >>> 0
  }
  next()
  const unit = next() / 2 ** 32
  const [minS, maxS] = cutAfterS
  return Math.round((minS + unit * (maxS - minS)) * 1000)
}

/** The record of a cycle that has not started: nothing known of it yet. */
export const newCycle = (cycle: number): CycleRecord => ({
  cycle,
  groupId: null,
  runIds: [],
  host: null,
  path: null,
  steadyMs: null,
  plannedCutMs: null,
  cutMs: null,
  cutExitCode: null,
  cutOutput: '',
  cameBackMs: null,
  outcome: 'pending',
})
