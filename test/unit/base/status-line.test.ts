/**
 * The status line: drawn in place (\r, text, erase to the end of the line), cut to the terminal's
 * width; results given to out() reach stdout byte for byte, whole lines at a time, each written with
 * the status line erased first and drawn again after.
 */
import t from 'tap'
import type { Io } from '../../../src/base/io.js'
import { StatusLine } from '../../../src/base/status-line.js'

function recorder(): { io: Io; writes: Array<['out' | 'err', string]> } {
  const writes: Array<['out' | 'err', string]> = []
  return { io: { out: (s) => void writes.push(['out', s]), err: (s) => void writes.push(['err', s]), statusTty: true }, writes }
}

t.test('drawn in place, erased for each whole line of results, drawn again after', async (t) => {
  const { io, writes } = recorder()
  const line = new StatusLine(io)
  line.draw('bench: 10 s left')
  line.out('        fdatasync    ')
  t.same(writes, [['err', '\rbench: 10 s left\x1b[K']], 'half a line is held back')
  line.out('   123.000 ops/sec\nnext')
  t.same(writes.slice(1), [
    ['err', '\r\x1b[K'],
    ['out', '        fdatasync       123.000 ops/sec\n'],
    ['err', '\rbench: 10 s left\x1b[K'],
  ])
  line.end()
  t.same(
    writes.slice(4),
    [
      ['err', '\r\x1b[K'],
      ['out', 'next'],
    ],
    'the end erases the status line and writes what was held',
  )
  line.end()
  t.equal(writes.length, 6, 'a second end writes nothing')
})

t.test('results pass byte for byte, however they are cut', async (t) => {
  const { io, writes } = recorder()
  const line = new StatusLine(io)
  const pieces = ['head\n', '\nsection:\n', '  label   ', '  1.0\n', '  other', '', '  n/a  why\n', 'tail without newline']
  for (const piece of pieces) {
    line.draw('status')
    line.out(piece)
  }
  line.end()
  const out = writes.filter(([to]) => to === 'out').map(([, s]) => s)
  t.equal(out.join(''), pieces.join(''))
  t.ok(
    out.slice(0, -1).every((s) => s.endsWith('\n')),
    'whole lines, but for the last',
  )
})

t.test('without a status line drawn, results go straight out', async (t) => {
  const { io, writes } = recorder()
  const line = new StatusLine(io)
  line.out('a\nb\n')
  line.end()
  t.same(writes, [['out', 'a\nb\n']])
})

t.test('cut to the width of the terminal, one column spare', async (t) => {
  const { io, writes } = recorder()
  new StatusLine(io, 10).draw('0123456789abc')
  new StatusLine(io, 10).draw('012345678')
  new StatusLine(io).draw('0123456789abc')
  t.same(
    writes.map(([, s]) => s),
    ['\r012345678\x1b[K', '\r012345678\x1b[K', '\r0123456789abc\x1b[K'],
  )
})
