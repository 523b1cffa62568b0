/**
 * 10,000 unknown flags (a script's loop gone wrong, a glob expanded into flags): every one is named
 * in one message of a quarter megabyte, and the process exits before a pipe on stderr takes it, so a
 * reader (`2>&1 | less`, a CI log) gets the first 64 KiB cut in the middle of a flag, without the
 * hint line. Must: exit 2 and a whole message through a pipe, ending with its hint; the first unknown
 * flags named, the rest counted rather than listed (bounded, under 64 KiB).
 */
import t from 'tap'
import { runCli } from '../fixtures/cli.js'

t.test('ten thousand unknown flags', async (t) => {
  const args = Array.from({ length: 10_000 }, (_, i) => `--sever${i}`)
  const r = await runCli(['write', ...args], 30_000)
  t.equal(r.code, 2)
  t.match(r.stderr, /^plugcheck: unknown flag --sever0 /, 'the first unknown flag named first')
  t.match(r.stderr, /hint: plugcheck write --help lists the flags of write\n$/, 'the message arrives whole, with its hint')
  t.ok(Buffer.byteLength(r.stderr) < 65_536, `a bounded message (${Buffer.byteLength(r.stderr)} bytes)`)
})
