/**
 * What a long bench tells while it runs (28 rows of --secs each: about 2 minutes at the default), on
 * stderr, never in its results: on a terminal, a status line redrawn in place (base/status-line.ts)
 * naming the test being measured and about how long is left; without one, a plain line per test as
 * it starts. stdout gets the same bytes either way; on a terminal they go out a whole line at a time,
 * so a row's line appears once it is measured and the status line is never drawn over half of it.
 * The time left counts the tests still to measure at --secs each: rows of a method this platform
 * lacks take no time and are not counted; the settling between tests is not either ("about").
 */
import type { Io } from '../base/io.js'
import { StatusLine } from '../base/status-line.js'
import type { RowSpec, SectionSpec } from './sections/plan.js'

/** How often a terminal's status line is redrawn with the time left. */
export const progressRedrawMs = 1000

export interface BenchProgress {
  /** A row begins; a row whose method is missing here is measured at once and shows nothing. */
  rowStarted(section: SectionSpec, row: RowSpec): void
  /** The bench's results, for stdout. */
  out(text: string): void
  /** Measuring is over (or failed): the status line erased, its redraws stopped; out() writes directly. */
  end(): void
}

/** On a terminal the status line is cut to its width (a wrapped line cannot be redrawn in place): the time left comes first. */
export function benchProgress(
  io: Io,
  plan: readonly SectionSpec[],
  secsPerTest: number,
  measured: (row: RowSpec) => boolean,
  nowMs: () => number = () => performance.now(),
): BenchProgress {
  const total = plan.reduce((n, section) => n + section.rows.filter(measured).length, 0)
  let started = 0
  let current: { section: SectionSpec; row: RowSpec; startedMs: number } | null = null
  const describe = (): string => {
    const { section, row, startedMs } = current!
    const leftS = (total - started) * secsPerTest + Math.max(0, secsPerTest - (nowMs() - startedMs) / 1000)
    const label = row.label.trim().replace(/\s+/g, ' ')
    return `bench: about ${formatTimeLeft(leftS)} left, test ${started} of ${total}: ${section.brief}, ${label}`
  }
  const start = (section: SectionSpec, row: RowSpec): boolean => {
    if (!measured(row)) return false
    started++
    current = { section, row, startedMs: nowMs() }
    return true
  }
  if (!io.statusTty)
    return {
      rowStarted: (section, row) => void (start(section, row) && io.err(`${describe()}\n`)),
      out: (text) => io.out(text),
      end: () => {},
    }
  const line = new StatusLine(io, process.stderr.columns)
  let timer: NodeJS.Timeout | undefined
  let ended = false
  return {
    rowStarted(section, row) {
      if (ended || !start(section, row)) return
      line.draw(describe())
      timer ??= setInterval(() => line.draw(describe()), progressRedrawMs)
    },
    out: (text) => (ended ? io.out(text) : line.out(text)),
    end() {
      clearInterval(timer)
      if (!ended) line.end()
      ended = true
    },
  }
}

/** "45 s", "1 min 52 s", "2 h 20 min": rounded up, as a countdown. */
export function formatTimeLeft(seconds: number): string {
  const s = Math.ceil(seconds)
  if (s < 60) return `${s} s`
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`
}
