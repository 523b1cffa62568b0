/**
 * Sizes as users write them (--record-size 8k, --file-size 256MiB): a number of bytes or a binary
 * multiple (k, KiB, KB all 1024), in whole bytes; anything else is not a size. formatSize says a size
 * in the largest binary unit that divides it.
 */
import t from 'tap'
import { formatSize, parseSize } from '../../../src/base/sizes.js'

const KiB = 1024
const MiB = 1024 * KiB
const GiB = 1024 * MiB
const TiB = 1024 * GiB

t.test('plain bytes and every spelling of each binary unit', async (t) => {
  t.equal(parseSize('8192'), 8192)
  t.equal(parseSize('8192b'), 8192)
  t.equal(parseSize('0'), 0)
  for (const [spellings, unit] of [
    [['k', 'K', 'kb', 'KB', 'kib', 'KiB', 'KIB'], KiB],
    [['m', 'M', 'mb', 'MB', 'mib', 'MiB'], MiB],
    [['g', 'G', 'gb', 'GB', 'gib', 'GiB'], GiB],
    [['t', 'T', 'tb', 'TB', 'tib', 'TiB'], TiB],
  ] as const) {
    for (const spelling of spellings) t.equal(parseSize(`3${spelling}`), 3 * unit, `3${spelling}`)
  }
})

t.test('the README examples', async (t) => {
  t.equal(parseSize('8k'), 8192)
  t.equal(parseSize('8KiB'), 8192)
  t.equal(parseSize('256MiB'), 268_435_456)
  t.equal(parseSize('1G'), 1_073_741_824)
})

t.test('spaces, and fractions that come to whole bytes', async (t) => {
  t.equal(parseSize(' 8 k '), 8192)
  t.equal(parseSize('1.5k'), 1536)
  t.equal(parseSize('0.5MiB'), 512 * KiB)
})

t.test('fractions of a byte are not sizes', async (t) => {
  t.equal(parseSize('0.5'), null)
  t.equal(parseSize('0.3k'), null, '307.2 bytes')
  t.equal(parseSize('1.0001k'), null)
})

t.test('other text is refused', async (t) => {
  const refused = [
    '',
    ' ',
    'k',
    '-1',
    '-8k',
    '+8k',
    '8x',
    '8kk',
    '8iB',
    '8 bytes',
    '8e3',
    '0x10',
    '.5k',
    '8.k',
    '1,024',
    '8 k b',
    'Infinity',
    'NaN',
    '\u0668k', // an Arabic-Indic eight
    '8k\u0000',
    '8k\n9',
  ]
  for (const text of refused) t.equal(parseSize(text), null, JSON.stringify(text))
})

t.test('a size beyond a safe integer of bytes is refused', async (t) => {
  // 2^53 bytes is 8192 TiB.
  t.equal(parseSize('8191T'), 8191 * TiB)
  t.equal(parseSize('8192T'), null)
  t.equal(parseSize('9007199254740991'), Number.MAX_SAFE_INTEGER)
  t.equal(parseSize('9007199254740993'), null)
  t.equal(parseSize('9'.repeat(400)), null)
})

t.test('formatSize: the largest binary unit that divides it, else bytes', async (t) => {
  t.equal(formatSize(8192), '8 KiB')
  t.equal(formatSize(KiB), '1 KiB')
  t.equal(formatSize(1536), '1536 bytes', 'not 1.5 KiB')
  t.equal(formatSize(1023), '1023 bytes')
  t.equal(formatSize(0), '0 bytes')
  t.equal(formatSize(256 * MiB), '256 MiB')
  t.equal(formatSize(MiB + KiB), '1025 KiB')
  t.equal(formatSize(3 * GiB), '3 GiB')
  t.equal(formatSize(TiB), '1024 GiB', 'GiB is the largest unit said')
})

t.test('formatSize in units parses back to the same size', async (t) => {
  for (const bytes of [KiB, 8 * KiB, 1025 * KiB, 4 * MiB, 5 * GiB, 2 * TiB]) {
    t.equal(parseSize(formatSize(bytes)), bytes, formatSize(bytes))
  }
})
