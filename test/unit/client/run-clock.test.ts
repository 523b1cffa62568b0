/**
 * A run's time base: the listener's clock from its welcome when it is a real time (2000 to 2200),
 * else none; every later time is the base plus monotonic time since. runTimeBase prefers the
 * listener's clock (a note when this machine's is more than 5 minutes off), falls back to this
 * machine's with a warning, and refuses when that is not a real time either: checked with a child
 * whose clock libfaketime sets to 1970.
 */
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import t from 'tap'
import { describeDuration, epochAt, listenerClockOf, runTimeBase } from '../../../src/client/run-clock.js'

const minuteMs = 60_000
const dayMs = 86_400_000
/** 2000-01-01T00:00:00Z and 2200-01-01T00:00:00Z, the bounds of a real time. */
const year2000Ms = Date.UTC(2000, 0, 1)
const year2200Ms = Date.UTC(2200, 0, 1)

t.test('listenerClockOf: a real time is a base at the moment it arrived; anything else is none', async (t) => {
  t.same(listenerClockOf(1_760_000_000_000, 123.5), { epochMs: 1_760_000_000_000, perfMs: 123.5 })
  t.same(listenerClockOf(year2000Ms, 0), { epochMs: year2000Ms, perfMs: 0 }, 'the first ms of 2000')
  t.same(listenerClockOf(year2200Ms, 0), { epochMs: year2200Ms, perfMs: 0 }, 'the first ms of 2200')
  for (const nowMs of [
    undefined,
    0,
    86_400_000,
    year2000Ms - 1,
    year2200Ms + 1,
    1_760_000_000_000.5,
    Number.NaN,
    -1,
    Number.POSITIVE_INFINITY,
  ]) {
    t.equal(listenerClockOf(nowMs, 5), undefined, String(nowMs))
  }
})

t.test('epochAt: the base plus the monotonic time since it', async (t) => {
  const base = { epochMs: 1_760_000_000_000, perfMs: 1000 }
  t.equal(epochAt(base, 1000), 1_760_000_000_000)
  t.equal(epochAt(base, 3500.25), 1_760_000_002_500.25)
  t.equal(epochAt(base, 999), 1_759_999_999_999)
  const now = { epochMs: 1_760_000_000_000, perfMs: performance.now() }
  const later = epochAt(now)
  t.ok(later >= now.epochMs && later < now.epochMs + 60_000, 'without a time: now, a moment after the base')
})

t.test('a listener clock close to this machine’s is the base, without a word', async (t) => {
  const said: string[] = []
  const listener = { epochMs: Date.now() - 4 * minuteMs, perfMs: performance.now() }
  t.equal(
    runTimeBase(listener, 'L:5400', (s) => said.push(s)),
    listener,
  )
  t.same(said, [], '4 minutes apart is not worth a note')
})

t.test('a listener clock far from this machine’s is the base, with one note that says how far and which way', async (t) => {
  const said: string[] = []
  const behind = { epochMs: Date.now() - 3 * dayMs, perfMs: performance.now() }
  t.equal(
    runTimeBase(behind, 'L:5400', (s) => said.push(s)),
    behind,
  )
  t.same(said, [
    "plugcheck: note: this machine's clock is 3 days ahead of the listener's; the run's times come from the listener's clock (L:5400), so verify is not misled by it\n",
  ])
  said.length = 0
  runTimeBase({ epochMs: Date.now() + 2 * 3_600_000, perfMs: performance.now() }, 'L:5400', (s) => said.push(s))
  t.equal(said.length, 1)
  t.match(said[0], /this machine's clock is 2 hours behind the listener's/)
})

t.test('an older listener without a clock: this machine’s clock, with a warning', async (t) => {
  const said: string[] = []
  const before = Date.now()
  const perfBefore = performance.now()
  const base = runTimeBase(undefined, 'L:5400', (s) => said.push(s))
  t.ok(base.epochMs >= before && base.epochMs <= Date.now(), 'now on this machine')
  t.ok(base.perfMs >= perfBefore && base.perfMs <= performance.now())
  t.same(said, [
    "plugcheck: warning: the listener at L:5400 (an older plugcheck) does not send its clock: the run's times come from this machine's clock\n",
  ])
})

const fakeTimeLibrary = '/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1'

/** runTimeBase in a child whose wall clock says `fakeTime` (libfaketime's absolute form). */
function underFakeTime(
  fakeTime: string,
  listener: string,
): { localMs: number; said: string[]; base?: unknown; error?: { message: string; hint: string; exitCode: number } } {
  if (!existsSync(fakeTimeLibrary)) throw new Error(`libfaketime is missing (${fakeTimeLibrary}): install the Debian package faketime`)
  const out = execFileSync(
    process.execPath,
    ['--import', 'tsx', new URL('../../fixtures/run-clock-child.ts', import.meta.url).pathname, listener],
    {
      env: {
        ...process.env,
        LD_PRELOAD: fakeTimeLibrary,
        FAKETIME: `@${fakeTime}`,
        FAKETIME_DONT_FAKE_MONOTONIC: '1',
        FAKETIME_NO_CACHE: '1',
      },
      encoding: 'utf8',
      timeout: 60_000,
    },
  )
  return JSON.parse(out)
}

t.test('a machine at 1970 with an older listener is refused: exit 2, with what to do', async (t) => {
  const child = underFakeTime('1970-01-02 00:00:00', 'none')
  t.ok(child.localMs < year2000Ms, `the child's clock is fake: ${new Date(child.localMs).toISOString()}`)
  t.equal(child.error?.exitCode, 2)
  t.equal(
    child.error?.message,
    "this machine's clock says 1970-01-02, not a real time (no battery-backed clock, or not set yet), and the listener at L:5400 is an older plugcheck that does not send its own",
  )
  t.equal(child.error?.hint, "set this machine's clock (wait for NTP, or date -s), or update plugcheck on the listener")
  t.same(child.said, [])
})

t.test('a machine at 1970 with a listener that sends its clock: the listener’s base, and a note naming the clock', async (t) => {
  const listenerMs = 1_760_000_000_000
  const child = underFakeTime('1970-01-02 00:00:00', String(listenerMs))
  t.equal((child.base as { epochMs: number }).epochMs, listenerMs)
  t.same(child.said, [
    "plugcheck: note: this machine's clock says 1970-01-02, not a real time (no battery-backed clock, or not set yet); the run's times come from the listener's clock (L:5400), so verify is not misled by it\n",
  ])
})

t.test('describeDuration: whole units, the largest that fits, plural unless one', async (t) => {
  t.equal(describeDuration(0), '0 seconds')
  t.equal(describeDuration(59_000), '59 seconds')
  t.equal(describeDuration(45_000), '45 seconds')
  t.equal(describeDuration(minuteMs), '1 minute')
  t.equal(describeDuration(12 * minuteMs), '12 minutes')
  t.equal(describeDuration(89 * minuteMs), '1 hour', '1.48 hours rounds to 1')
  t.equal(describeDuration(5 * 3_600_000), '5 hours')
  t.equal(describeDuration(3 * dayMs), '3 days')
  t.equal(describeDuration(364 * dayMs), '364 days')
  t.equal(describeDuration(365 * dayMs), '1 year')
  t.equal(describeDuration(20_000 * 365 * dayMs), '20,000 years', 'thousands separated')
})
