/**
 * The report of an overwrite file's zero fill, over a recording Io and a clock of the test's: nothing
 * for a small file, one plain line without a terminal (two whole lines in a group's job), and on a
 * terminal a status line redrawn at most every status interval, ended by a line that says how it ended.
 */
import t from 'tap'
import { fillReporter, minShownFillBytes } from '../../../../src/client/write/fill-progress.js'
import { statusIntervalMs } from '../../../../src/client/write/write-status.js'
import type { Io } from '../../../../src/base/io.js'

const mib = 1024 * 1024

function recording(statusTty: boolean): { io: Io; err: () => string; out: () => string } {
  let err = ''
  let out = ''
  return { io: { out: (s) => void (out += s), err: (s) => void (err += s), statusTty }, err: () => err, out: () => out }
}

/** A clock the test moves. */
function clock(): { nowMs: () => number; advance: (ms: number) => void } {
  let now = 1000
  return { nowMs: () => now, advance: (ms) => void (now += ms) }
}

t.test('a region under the bound is filled without a word', async (t) => {
  for (const statusTty of [false, true]) {
    const r = recording(statusTty)
    t.equal(fillReporter(r.io, { path: '/d/p.dat', totalBytes: minShownFillBytes - 1, grouped: false }), undefined)
    t.equal(r.err(), '')
  }
})

t.test('without a terminal: one plain line, begun before the fill, ended with the time it took', async (t) => {
  const r = recording(false)
  const c = clock()
  const report = fillReporter(r.io, { path: '/d/p.dat', totalBytes: 2048 * mib, grouped: false, nowMs: c.nowMs })!
  t.equal(r.err(), 'preparing /d/p.dat: 2 GiB, filling it with zeros for the overwrite pattern ...', 'said before the first chunk')
  for (let filled = 4 * mib; filled <= 2048 * mib; filled += 4 * mib) {
    c.advance(15)
    report({ kind: 'filling', filledBytes: filled })
  }
  report({ kind: 'syncing' })
  c.advance(400)
  report({ kind: 'done' })
  t.equal(r.err(), 'preparing /d/p.dat: 2 GiB, filling it with zeros for the overwrite pattern ... done in 8.1 s\n', 'one line')
  t.equal(r.out(), '', 'nothing on stdout')
})

t.test('without a terminal, a failed fill ends the line saying so', async (t) => {
  const r = recording(false)
  const c = clock()
  const report = fillReporter(r.io, { path: '/d/p.dat', totalBytes: 256 * mib, grouped: false, nowMs: c.nowMs })!
  c.advance(1250)
  report({ kind: 'failed' })
  t.equal(r.err(), 'preparing /d/p.dat: 256 MiB, filling it with zeros for the overwrite pattern ... failed after 1.3 s\n')
})

t.test("a group's job says it in whole lines, terminal or not", async (t) => {
  for (const statusTty of [false, true]) {
    const r = recording(statusTty)
    const c = clock()
    const report = fillReporter(r.io, { path: '/d/p.dat.job2', totalBytes: 256 * mib, grouped: true, nowMs: c.nowMs })!
    report({ kind: 'filling', filledBytes: 128 * mib })
    report({ kind: 'syncing' })
    c.advance(2000)
    report({ kind: 'done' })
    t.equal(
      r.err(),
      'preparing /d/p.dat.job2: 256 MiB, filling it with zeros for the overwrite pattern ...\npreparing /d/p.dat.job2: done in 2.0 s\n',
      `statusTty ${statusTty}`,
    )
  }
})

t.test('on a terminal: a status line redrawn in place, at most every status interval, then one line that stays', async (t) => {
  const r = recording(true)
  const c = clock()
  const report = fillReporter(r.io, { path: '/d/p.dat', totalBytes: 256 * mib, grouped: false, nowMs: c.nowMs })!
  t.equal(r.err(), '\rpreparing /d/p.dat: 256 MiB, filling it with zeros for the overwrite pattern\x1b[K', 'drawn before the first chunk')
  // 64 chunks of 4 MiB, 20 ms apart: 1.28 s, so a redraw about every 13 chunks.
  for (let filled = 4 * mib; filled <= 256 * mib; filled += 4 * mib) {
    c.advance(20)
    report({ kind: 'filling', filledBytes: filled })
  }
  report({ kind: 'syncing' })
  c.advance(500)
  report({ kind: 'done' })
  const frames = r
    .err()
    .split('\r')
    .filter((f) => f !== '')
  const filling = frames.filter((f) => f.includes('MiB written'))
  t.ok(
    filling.length >= 4 && filling.length <= 1 + Math.ceil(1280 / statusIntervalMs),
    `redrawn every interval, not every chunk (${filling.length})`,
  )
  const percents = filling.map((f) => Number(/\((\d+)%\)/.exec(f)![1]))
  t.same(
    percents,
    [...percents].sort((a, b) => a - b),
    'the share only grows',
  )
  t.match(filling[0]!, /^preparing \/d\/p\.dat: 256 MiB, filling it with zeros: 4 MiB written \(1%\)\x1b\[K$/)
  t.equal(frames.at(-2), 'preparing /d/p.dat: 256 MiB, filled with zeros, fsync ...\x1b[K')
  t.equal(frames.at(-1), 'preparing /d/p.dat: 256 MiB, filled with zeros, done in 1.8 s\x1b[K\n', 'ends as a line of its own')
})

t.test('on a terminal, a failed fill leaves a line saying so, not a status line for the error to overwrite', async (t) => {
  const r = recording(true)
  const c = clock()
  const report = fillReporter(r.io, { path: '/d/p.dat', totalBytes: 256 * mib, grouped: false, nowMs: c.nowMs })!
  report({ kind: 'filling', filledBytes: 4 * mib })
  c.advance(300)
  report({ kind: 'failed' })
  t.ok(r.err().endsWith('\rpreparing /d/p.dat: 256 MiB, failed after 0.3 s\x1b[K\n'))
})

t.test('a fill a stop signal cut short ends its line saying so, terminal or not', async (t) => {
  const ending = 'stopped after 0.7 s by a stop signal, the rest left unfilled (the run writes no record)'
  const plain = recording(false)
  const c = clock()
  const report = fillReporter(plain.io, { path: '/d/p.dat', totalBytes: 2048 * mib, grouped: false, nowMs: c.nowMs })!
  report({ kind: 'filling', filledBytes: 4 * mib })
  c.advance(700)
  report({ kind: 'stopped' })
  t.equal(plain.err(), `preparing /d/p.dat: 2 GiB, filling it with zeros for the overwrite pattern ... ${ending}\n`, 'one plain line')

  const drawn = recording(true)
  const d = clock()
  const onTty = fillReporter(drawn.io, { path: '/d/p.dat', totalBytes: 2048 * mib, grouped: false, nowMs: d.nowMs })!
  d.advance(700)
  onTty({ kind: 'stopped' })
  t.ok(
    drawn.err().endsWith(`\rpreparing /d/p.dat: 2 GiB, ${ending}\x1b[K\n`),
    `the status line ends as a line that stays (${JSON.stringify(drawn.err())})`,
  )
  t.notMatch(drawn.err(), /done in/, 'never said done')
})
