/** Durations as users write them: 30d, 12h, 90m, 45s (one number, one unit). */
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
