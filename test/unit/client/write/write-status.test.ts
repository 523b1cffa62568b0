/**
 * The views of a write's progress, from progress as data: a terminal's status line never wider than
 * the terminal and its steady line once; without a terminal plain lines on stderr, steady once and
 * progress every 5 s, never an escape sequence; --json the same events as JSON lines on stdout.
 */
import t from 'tap'
import type { Io } from '../../../../src/base/io.js'
import { progressView, statusLine, type ShownProgress } from '../../../../src/client/write/write-status.js'

function recorder(statusTty: boolean): { io: Io; out: string[]; err: string[] } {
  const out: string[] = []
  const err: string[] = []
  return { io: { out: (s) => void out.push(s), err: (s) => void err.push(s), statusTty }, out, err }
}

/** A run's progress reported every 250 ms for 12 s, steady from 3 s on. */
function reports(extra: Partial<ShownProgress> = {}): ShownProgress[] {
  return Array.from({ length: 48 }, (_, i) => {
    const elapsedS = (i + 1) * 0.25
    return {
      elapsedS,
      written: (i + 1) * 100,
      recorded: i * 100,
      syncP50Us: 400,
      syncP99Us: 12_000,
      waitingUnrecorded: undefined,
      steady: elapsedS >= 3,
      ...extra,
    }
  })
}

t.test('without a terminal: steady once when it is, progress every 5 s, plain lines on stderr only', async (t) => {
  const { io, out, err } = recorder(false)
  const view = progressView(io, 'lines', () => 20)
  for (const p of reports()) view.report(p)
  t.same(out, [], 'stdout untouched')
  t.same(err, [
    'steady: records are being acknowledged and recorded by the listener; cut the power now (pull the plug, not a clean shutdown)\n',
    'progress: 5 s: 2,000 records written and acked, 1,900 recorded by the listener, 400/s, sync p50 400 us p99 12 ms\n',
    'progress: 10 s: 4,000 records written and acked, 3,900 recorded by the listener, 400/s, sync p50 400 us p99 12 ms\n',
  ])
  t.notOk(view.shown(), 'no status line to step over')
})

t.test('without a terminal, write --jobs: the group named in steady and progress', async (t) => {
  const { io, err } = recorder(false)
  const view = progressView(io, 'lines')
  for (const p of reports({ jobs: { count: 3, waiting: 1 }, waitingUnrecorded: 120_000 })) view.report(p)
  t.match(err[0], /^steady: the records of all 3 jobs are being acknowledged and recorded by the listener; cut the power now /)
  t.match(err[1], /^progress: 5 s: 3 jobs, 2,000 records written and acked, .*, 1 waiting for the listener \(120,000 acks unrecorded\)\n$/)
})

t.test('--json: the events as JSON lines on stdout; with a terminal on stderr, its status line there too', async (t) => {
  const piped = recorder(false)
  const view = progressView(piped.io, 'json')
  for (const p of reports()) view.report(p)
  t.same(piped.err, [], 'nothing on stderr')
  const events = piped.out.map((line) => JSON.parse(line) as { event: string; elapsedS: number })
  t.same(
    events.map((e) => [e.event, e.elapsedS]),
    [
      ['steady', 3],
      ['progress', 5],
      ['progress', 10],
    ],
  )
  const onTty = recorder(true)
  const both = progressView(onTty.io, 'json', () => 80)
  for (const p of reports()) both.report(p)
  t.equal(onTty.out.length, 3, 'the same events')
  t.ok(onTty.err.length > 40 && both.shown(), 'and the status line drawn')
})

t.test("on a terminal: the status line cut to the terminal's width, one column spare, read at each draw", async (t) => {
  const { io, out, err } = recorder(true)
  let columns: number | undefined = 40
  const view = progressView(io, 'terminal', () => columns)
  const all = reports()
  for (const p of all.slice(0, 20)) view.report(p)
  columns = undefined
  view.report(all[20]!)
  columns = 60
  view.report(all[21]!)
  t.same(out, [])
  const steady = '\nsteady: the listener is recording acks. Now is the moment to cut the power (pull the plug, not a clean shutdown).\n'
  t.equal(err.filter((s) => s === steady).length, 1, 'steady once, whole: a line of its own is never redrawn')
  const drawn = err.filter((s) => s !== steady)
  t.ok(
    drawn.every((s) => s.startsWith('\r') && s.endsWith('\x1b[K')),
    'each drawn in place',
  )
  const text = drawn.map((s) => s.slice(1, -3))
  t.ok(
    text.slice(0, 20).every((s) => s.length === 39),
    '40 columns: 39 characters',
  )
  t.equal(text[0], statusLine(all[0]!).slice(0, 39), 'the start of the line kept')
  t.equal(text[20], statusLine(all[20]!), 'width unknown: whole')
  t.equal(text[21]!.length, 59, 'resized to 60: 59 characters')
  t.ok(view.shown())
})

t.test('the status in words', async (t) => {
  const [p] = reports()
  t.equal(statusLine(p!), '0 s: 100 records written and acked, 0 recorded by the listener, 400/s, sync p50 400 us p99 12 ms')
  t.equal(statusLine({ ...p!, waitingUnrecorded: 100_001 }), '0 s: waiting for the listener: 100,001 acks unrecorded')
  t.equal(statusLine({ ...p!, elapsedS: 0 }).includes(', 0/s,'), true, 'no division by zero at the start')
})
