import { performance } from 'node:perf_hooks'

/**
 * A log that a flood cannot drown: at most linesPerWindow lines per windowMs, then, when the next
 * window opens, one line saying how many were dropped (summary(n, windowS) words it).
 */
export class RateLimitedLog {
  /** performance.now() when the window opened: a step of the wall clock neither floods nor mutes the log. */
  private windowStartMs = -Infinity
  private lines = 0
  private suppressed = 0
  constructor(
    private readonly log: ((line: string) => void) | undefined,
    private readonly linesPerWindow: number,
    private readonly windowMs: number,
    private readonly summary: (dropped: number, windowS: number) => string,
  ) {}

  line(text: string): void {
    if (this.log === undefined) return
    const now = performance.now()
    if (now - this.windowStartMs >= this.windowMs) {
      if (this.suppressed > 0) this.log(this.summary(this.suppressed, this.windowMs / 1000))
      this.windowStartMs = now
      this.lines = 0
      this.suppressed = 0
    }
    if (this.lines < this.linesPerWindow) {
      this.lines++
      this.log(text)
    } else {
      this.suppressed++
    }
  }
}
