/**
 * Durations as users write them (--keep 30d, --cut-after 45s): one number, one unit among s, m, h, d,
 * in milliseconds; anything else, zero or what rounds to zero is not a duration. formatDurationFlag
 * writes the largest unit that divides it, and parses back to the same value. parseSecondsFlag reads
 * a flag that counts seconds: a plain number of seconds, or a number and one of those units.
 */
import t from 'tap'
import { formatDurationFlag, parseDuration, parseSecondsFlag } from '../../../src/base/durations.js'

const secondMs = 1000
const minuteMs = 60 * secondMs
const hourMs = 60 * minuteMs
const dayMs = 24 * hourMs

t.test('each unit, in milliseconds', async (t) => {
  t.equal(parseDuration('45s'), 45 * secondMs)
  t.equal(parseDuration('90m'), 90 * minuteMs)
  t.equal(parseDuration('12h'), 12 * hourMs)
  t.equal(parseDuration('30d'), 30 * dayMs)
  t.equal(parseDuration('1s'), 1000)
})

t.test('upper case units, spaces around and between, and a fraction', async (t) => {
  t.equal(parseDuration('5M'), 5 * minuteMs)
  t.equal(parseDuration(' 2 H '), 2 * hourMs)
  t.equal(parseDuration('1.5s'), 1500)
  t.equal(parseDuration('0.5d'), 12 * hourMs)
  t.equal(parseDuration('0.0005s'), 1, 'half a millisecond rounds to one')
})

t.test('zero, or what rounds to zero, is not a duration', async (t) => {
  t.equal(parseDuration('0s'), null)
  t.equal(parseDuration('0d'), null)
  t.equal(parseDuration('0.0004s'), null)
})

t.test('text that is not one number and one unit is refused', async (t) => {
  const refused = [
    '',
    ' ',
    's',
    '5',
    '5ms',
    '5w',
    '5y',
    '-5s',
    '+5s',
    '5 s s',
    '5s5m',
    '1h30m',
    '1e3s',
    '.5s',
    '5.s',
    'Infinitys',
    'NaNs',
    '0x10s',
    '\u0665s', // an Arabic-Indic five
    '5\u00a0s\u0000',
    '5s\nrm -rf /',
  ]
  for (const text of refused) t.equal(parseDuration(text), null, JSON.stringify(text))
})

t.test('a duration beyond a safe integer of milliseconds is refused', async (t) => {
  // 2^53 ms is about 104 million days.
  t.equal(parseDuration('104249991d'), 104_249_991 * dayMs, 'just under 2^53 ms')
  t.equal(parseDuration('104249992d'), null, 'just over 2^53 ms')
  t.equal(parseDuration(`${'9'.repeat(400)}d`), null)
})

t.test('formatDurationFlag: the largest unit that divides it', async (t) => {
  t.equal(formatDurationFlag(30 * dayMs), '30d')
  t.equal(formatDurationFlag(12 * hourMs), '12h')
  t.equal(formatDurationFlag(90 * minuteMs), '90m', 'not 1.5h')
  t.equal(formatDurationFlag(36 * hourMs), '36h', 'not 1.5d')
  t.equal(formatDurationFlag(45 * secondMs), '45s')
  t.equal(formatDurationFlag(61 * secondMs), '61s')
  t.equal(formatDurationFlag(1500), '1.5s')
})

t.test('formatDurationFlag parses back to the same duration', async (t) => {
  const values = [1, 999, 1000, 1500, 59_999, minuteMs, 61 * secondMs, hourMs + minuteMs, dayMs, 7 * dayMs + hourMs, 365 * dayMs]
  for (const ms of values) t.equal(parseDuration(formatDurationFlag(ms)), ms, `${ms} ms as ${formatDurationFlag(ms)}`)
})

t.test('parseSecondsFlag: plain seconds as yargs read them, with decimals', async (t) => {
  t.equal(parseSecondsFlag('10'), 10)
  t.equal(parseSecondsFlag('0.5'), 0.5)
  t.equal(parseSecondsFlag('.25'), 0.25)
  t.equal(parseSecondsFlag('5.'), 5)
  t.equal(parseSecondsFlag('1e3'), 1000)
  t.equal(parseSecondsFlag(' 7 '), 7)
  t.equal(parseSecondsFlag(10), 10, 'a default given as a number')
  t.equal(parseSecondsFlag('0'), 0, 'zero is a number: the flag says it must be positive')
  t.equal(parseSecondsFlag('-1'), -1, 'the sign is kept for the same reason')
})

t.test('parseSecondsFlag: a number and a unit, in seconds', async (t) => {
  t.equal(parseSecondsFlag('2s'), 2)
  t.equal(parseSecondsFlag('5m'), 300)
  t.equal(parseSecondsFlag('1h'), 3600)
  t.equal(parseSecondsFlag('1d'), 86_400)
  t.equal(parseSecondsFlag('1.5m'), 90)
  t.equal(parseSecondsFlag('0.1s'), 0.1)
  t.equal(parseSecondsFlag('2 H'), 7200)
  t.equal(parseSecondsFlag('-2s'), -2)
  t.equal(parseSecondsFlag('0s'), 0)
})

t.test('parseSecondsFlag: anything else is not a duration', async (t) => {
  const refused = ['', ' ', 's', '2x', '2ms', '5w', '1h30m', '1e3s', '+5s', '.5s', '0x10', 'Infinity', '1e400', 'NaN', '\u0665', '5s\n1']
  for (const text of refused) t.equal(parseSecondsFlag(text), null, JSON.stringify(text))
  t.equal(parseSecondsFlag(Number.NaN), null)
  t.equal(parseSecondsFlag(Number.POSITIVE_INFINITY), null)
})
