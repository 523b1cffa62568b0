/**
 * Durations as users write them: 30d, 12h, 90m, 45s (one number, one unit). A flag that counts in
 * seconds (--duration, --listener-timeout, --secs, ...) also takes a plain number of seconds.
 */
const unitMs: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }

/** The duration in milliseconds, or null when the text is not one (or not positive). */
export function parseDuration(text: string): number | null {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$/i.exec(text)
  if (!match) return null
  const ms = Math.round(Number(match[1]) * unitMs[match[2]!.toLowerCase()]!)
  return Number.isSafeInteger(ms) && ms > 0 ? ms : null
}

/** "30d", "12h", "90m", "45s": the largest unit that divides it, as the user would write it. */
export function formatDurationFlag(ms: number): string {
  for (const [unit, size] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
  ] as const)
    if (ms % size === 0) return `${ms / size}${unit}`
  return `${ms / 1000}s`
}

/** A plain number of seconds: 10, 0.5, .25, 1e3 (what yargs read as a number before units were taken). */
const plainSeconds = /^\s*-?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?\s*$/i
/** A number and a unit: 2s, 1.5m, 1h, 1d (a sign kept, so a flag's own check can say it must be positive). */
const secondsWithUnit = /^\s*(-?\d+(?:\.\d+)?)\s*([smhd])\s*$/i

/** What a seconds flag accepts, for its message: `--secs soon is not a duration: give ...`. */
export const secondsFlagForms = 'seconds (10, 0.5) or a number and a unit (2s, 5m, 1h, 1d)'

/**
 * A flag's value in seconds, from a plain number of seconds or a number and a unit; null when the
 * text is neither or not finite. The sign is kept: each flag bounds its own value.
 */
export function parseSecondsFlag(value: string | number): number | null {
  if (typeof value === 'number') return Number.isFinite(value) ? value : null
  let seconds: number
  if (plainSeconds.test(value)) seconds = Number(value)
  else {
    const match = secondsWithUnit.exec(value)
    if (match === null) return null
    seconds = (Number(match[1]) * unitMs[match[2]!.toLowerCase()]!) / 1000
  }
  return Number.isFinite(seconds) ? seconds : null
}
