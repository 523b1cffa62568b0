/**
 * A status line on a terminal's stderr, redrawn in place as write's is (`\r`, the text, erase to the
 * end of the line: client/write/write-status.ts): one line that shows what is going on now, never a
 * scroll of them. Results on stdout may share the terminal: they pass through out(), which writes
 * whole lines only, each after the status line is erased and before it is drawn again, so neither is
 * written over the other. Only for a terminal (Io.statusTty): without one, print plain lines instead.
 */
import type { Io } from './io.js'

export const eraseToEndOfLine = '\x1b[K'

/**
 * text cut to fit a terminal columns wide, leaving the last column free: a line that reaches it
 * wraps (or leaves the cursor pending there), and a wrapped line cannot be redrawn in place by \r.
 * Unknown or absurd widths leave it whole.
 */
export function fitToColumns(text: string, columns: number | undefined): string {
  return columns !== undefined && columns > 1 && text.length >= columns ? text.slice(0, columns - 1) : text
}

export class StatusLine {
  private text: string | null = null
  /** What out() was given after its last newline: written with the rest of its line. */
  private pendingOut = ''

  /** columns: the terminal's width, when known; a longer text is cut to fit (a wrapped line cannot be redrawn in place). */
  constructor(
    private readonly io: Io,
    private readonly columns?: number,
  ) {}

  /** Draws text in place of the status line. */
  draw(text: string): void {
    const fitted = fitToColumns(text, this.columns)
    this.text = fitted
    this.io.err(`\r${fitted}${eraseToEndOfLine}`)
  }

  /** Results for stdout: whole lines, written with the status line out of the way. */
  out(text: string): void {
    const all = this.pendingOut + text
    const end = all.lastIndexOf('\n') + 1
    this.pendingOut = all.slice(end)
    if (end === 0) return
    const shown = this.text
    this.erase()
    this.io.out(all.slice(0, end))
    if (shown !== null) this.draw(shown)
  }

  /** The status line erased for good, and what out() held of a last line written. */
  end(): void {
    this.erase()
    if (this.pendingOut !== '') this.io.out(this.pendingOut)
    this.pendingOut = ''
  }

  private erase(): void {
    if (this.text !== null) this.io.err(`\r${eraseToEndOfLine}`)
    this.text = null
  }
}
