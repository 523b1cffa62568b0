/**
 * A campaign's name: 1-64 letters, digits, dots, dashes or underscores, starting with a letter or
 * digit. It names a file in the listener's directory (campaigns/<name>.json), so a path, a hidden
 * name, "..", a separator, a space or a control character must never pass.
 */
import t from 'tap'
import { campaignNameSchema } from '../../../src/protocol/names.js'

t.test('names that pass, unchanged', async (t) => {
  for (const name of ['a', 'Z', '7', 'ssd-a', 'hdd_b', 'nvme.2026-01', 'A1._-', 'x'.repeat(64)]) {
    const parsed = campaignNameSchema.safeParse(name)
    t.ok(parsed.success, name)
    t.equal(parsed.data, name)
  }
})

t.test('names that do not, with the rule in the message', async (t) => {
  const refused: unknown[] = [
    '',
    'x'.repeat(65),
    '.',
    '..',
    '.hidden',
    '-flag',
    '_x',
    '../etc',
    'a/b',
    'a\\b',
    'a b',
    'a\nb',
    'a\n',
    'a\u0000',
    'a:b',
    'a*',
    'café',
    'ssd–a', // an en dash
    7,
    null,
  ]
  for (const name of refused) {
    t.notOk(campaignNameSchema.safeParse(name).success, typeof name === 'string' ? JSON.stringify(name) : String(name))
  }
  t.equal(
    campaignNameSchema.safeParse('..').error?.issues[0]?.message,
    'a campaign name is 1-64 letters, digits, dots, dashes or underscores',
  )
})
