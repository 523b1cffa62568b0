/**
 * One time base per write: every time of a run (its creation time, each record's write time) is that
 * base plus monotonic time since it was taken, so a step of the wall clock (NTP correcting a clock at
 * boot, a VM resumed, a clock at 1970 without an RTC battery) never moves one time of a run against
 * another, and never turns an ordinary record into "corrupt" for verify's write-time check.
 *
 * The base is the listener's clock, sent in its welcome: the machine that keeps power keeps time,
 * while the machine under test has just been cut and may not have its clock yet. A listener too old
 * to send it leaves this machine's clock as the base, with a warning (and a clock that is not a real
 * time, before 2000, is refused then: the listener would refuse the run).
 */
import { performance } from 'node:perf_hooks'
import { epochMsSchema } from '../protocol/messages.js'
import { usageError } from '../base/errors.js'

/** A wall-clock reading (ms since the epoch) and the monotonic time, performance.now(), at which it held. */
export interface TimeBase {
  readonly epochMs: number
  readonly perfMs: number
}

/** The listener's clock from its welcome, received at perfMs; undefined when absent or not a real time. */
export function listenerClockOf(nowMs: number | undefined, perfMs: number): TimeBase | undefined {
  if (nowMs === undefined || !epochMsSchema.safeParse(nowMs).success) return undefined
  return { epochMs: nowMs, perfMs }
}

/** The base's wall-clock time at monotonic time perfMs (ms since the epoch, fractional). */
export function epochAt(base: TimeBase, perfMs = performance.now()): number {
  return base.epochMs + (perfMs - base.perfMs)
}

/** A difference between this machine's clock and the listener's beyond this is said (once, at the start). */
const skewNoteMs = 5 * 60_000

/**
 * The write's time base: the listener's clock when it sent one (a note when this machine's differs
 * by more than a few minutes), else this machine's clock with a warning. `where` names the listener.
 */
export function runTimeBase(listenerClock: TimeBase | undefined, where: string, err: (text: string) => void): TimeBase {
  const perfMs = performance.now()
  const localMs = Date.now()
  const local = describeLocalClock(localMs)
  if (listenerClock !== undefined) {
    const skewMs = localMs - epochAt(listenerClock, perfMs)
    if (Math.abs(skewMs) > skewNoteMs) {
      const off =
        local ?? `this machine's clock is ${describeDuration(Math.abs(skewMs))} ${skewMs > 0 ? 'ahead of' : 'behind'} the listener's`
      err(`plugcheck: note: ${off}; the run's times come from the listener's clock (${where}), so verify is not misled by it\n`)
    }
    return listenerClock
  }
  if (local !== undefined) {
    throw usageError(
      `${local}, and the listener at ${where} is an older plugcheck that does not send its own`,
      "set this machine's clock (wait for NTP, or date -s), or update plugcheck on the listener",
    )
  }
  err(
    `plugcheck: warning: the listener at ${where} (an older plugcheck) does not send its clock: the run's times come from this machine's clock\n`,
  )
  return { epochMs: localMs, perfMs }
}

/** Said of a clock that is not a real time; undefined for a real one. */
function describeLocalClock(localMs: number): string | undefined {
  if (epochMsSchema.safeParse(Math.round(localMs)).success) return undefined
  return `this machine's clock says ${new Date(localMs).toISOString().slice(0, 10)}, not a real time (no battery-backed clock, or not set yet)`
}

/** "3 days", "5 hours", "12 minutes": rounded to whole units, so the jobs of one write say it in the same words. */
export function describeDuration(ms: number): string {
  const units: ReadonlyArray<[string, number]> = [
    ['year', 365 * 86_400_000],
    ['day', 86_400_000],
    ['hour', 3_600_000],
    ['minute', 60_000],
  ]
  for (const [name, unitMs] of units) {
    if (ms < unitMs) continue
    const count = Math.round(ms / unitMs)
    return `${count.toLocaleString('en-US')} ${name}${count === 1 ? '' : 's'}`
  }
  return `${Math.round(ms / 1000)} seconds`
}
