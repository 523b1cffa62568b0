/**
 * The journal's last segment after a SIGKILL holds hundreds of recorded rounds. A lost page zeroes
 * the length field of one of them, 100 KiB before the end (or one bit of it flips, so it reads 2 MiB
 * more, past the end of the file); every round after it is whole and checks
 * out. No crash leaves that: a round is written only after the previous one's fdatasync returned, so
 * whole rounds after a bad one prove it was recorded. Today the reader takes the zero length for a
 * torn last round ("cut short by a crash, never reported as recorded") and drops everything from
 * there: hundreds of recorded rounds, thousands of acks, and a FAIL becomes a PASS. It must be a
 * refusal (exit 3) naming the segment, offline and through a listener started on the directory.
 */
import t from 'tap'
import { closeSync, cpSync, openSync, readFileSync, readdirSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { fileSize, runCli, runInProcess, spawnCli, startListener, tempDir, waitFor } from '../fixtures/cli.js'

t.test('a zeroed round length inside the last segment: refused, never a torn tail', async (t) => {
  const dir = tempDir(t)
  const listenerDir = join(dir, 'listener')
  const listener = await startListener(listenerDir)
  t.teardown(() => listener.kill())
  const file = join(dir, 'data')
  const writer = spawnCli([
    'write',
    '--server',
    listener.server,
    '--file',
    file,
    '--method',
    'fdatasync',
    '--jobs',
    '2',
    '--size',
    '2MiB',
    '--record-size',
    '4096',
    '--duration',
    '300',
  ])
  let out = ''
  writer.stdout!.on('data', (c: Buffer) => (out += c.toString()))
  const closed = new Promise<number>((resolve) => writer.on('close', (c) => resolve(c ?? -1)))
  const journal = join(listenerDir, 'journal')
  const big = (): string | undefined =>
    // fileSize: a segment listed may be folded away before its stat (size 0).
    readdirSync(journal).find((name) => name.endsWith('.wal') && fileSize(join(journal, name)) > 150_000)
  // A few seconds on a quiet machine; minutes when the disk and both cores are busy with other work.
  await waitFor('a journal segment of 150 KB', () => big() !== undefined, 240_000, 5)
  await listener.kill('SIGKILL')
  await closed
  const segments = readdirSync(journal).filter((name) => name.endsWith('.wal'))
  const segment = join(journal, segments.at(-1)!)

  // Entry offsets of the last segment: the round that starts about 100 KB before its end.
  const bytes = readFileSync(segment)
  const offsets: number[] = []
  for (let at = 0; at + 12 <= bytes.length; at += 12 + bytes.readUInt32LE(at)) offsets.push(at)
  const target = offsets.filter((at) => at > 43 && at <= bytes.length - 100_000).at(-1)
  t.ok(target !== undefined, `a round 100 KB before the end of ${segment} (${bytes.length} bytes)`)

  // The truth: the last 20 records each job was told recorded are lost.
  const recorded = [
    // The listener is gone when the summary is printed: the count is what it confirmed before (the summary's
    // "unknown ... (it had confirmed N)"), or what it said when asked again.
    ...out.matchAll(
      /^run [0-9a-f]{16}: .*?, (\S+)\n {2}[\d,]+ records synced and acknowledged.*?(?:it had confirmed ([\d,]+)|([\d,]+) recorded by the listener)/gm,
    ),
  ].map(([all, path, confirmed, listed]) => [all, path!, Number((confirmed ?? listed)!.replace(/,/g, ''))] as const)
  t.equal(recorded.length, 2, out)
  // An append run writes seq s to slot (s - 1) mod the file's slots, slot k at (1 + k) records (the
  // header first). 2 MiB is 511 slots: runs wrap before the segment reaches 150 KB (~900 records each
  // on a loaded machine, tens of thousands on a fast one), so the records broken are found the way
  // verify finds them; the writer's few records after the listener's kill stay clear of them.
  const slots = (2 * 1024 * 1024) / 4096 - 1
  for (const [, path, n] of recorded) {
    t.ok(n > slots, `${path}: ${n} records recorded, the file's ${slots} slots wrapped`)
    const fd = openSync(path, 'r+')
    for (let seq = n - 19; seq <= n; seq++) writeSync(fd, Buffer.alloc(4096), 0, 4096, (1 + ((seq - 1) % slots)) * 4096)
    closeSync(fd)
  }
  const intact = await runInProcess(['verify', '--acks', listenerDir, '--file', file])
  t.equal(intact.code, 1, `the intact directory: FAIL (${intact.stdout.split('\n')[0]})`)
  // FAIL alone holds for any acknowledged record zeroed: each run's lost records must be exactly the 20 broken.
  for (const [, , n] of recorded) {
    t.match(intact.stdout, `lost seqs ${n - 19}-${n} (20):`, `verify finds seqs ${n - 19}-${n} lost, the records broken`)
  }

  for (const [name, damage] of [
    ['zeroed', (fd: number) => writeSync(fd, Buffer.alloc(12), 0, 12, target!)], // a lost page: length and checksum read as zeros
    [
      'one bit flipped',
      (fd: number) => {
        const length = Buffer.alloc(4)
        length.writeUInt32LE(bytes.readUInt32LE(target!) | 0x200000) // bit 21 of the length: 2 MiB more, past the end of the file
        writeSync(fd, length, 0, 4, target!)
      },
    ],
  ] as const) {
    await t.test(name, async (t) => {
      const copy = join(dir, name.replace(/ /g, '-'))
      cpSync(listenerDir, copy, { recursive: true })
      const damaged = join(copy, 'journal', segments.at(-1)!)
      const fd = openSync(damaged, 'r+')
      damage(fd)
      closeSync(fd)

      const offline = await runInProcess(['verify', '--acks', copy, '--file', file])
      t.equal(offline.code, 3, `verify --acks exits 3 (${offline.stdout.split('\n')[0]})`)
      t.notMatch(offline.stdout, /PASS/, 'never a PASS')
      t.match(offline.stderr, damaged, 'the segment is named')

      const again = await startListener(copy).catch((error: Error) => error)
      if (again instanceof Error) {
        t.match(again.message, damaged, 'the listener refuses its directory, naming the segment')
      } else {
        t.teardown(() => again.kill())
        const online = await runCli(['verify', '--server', again.server, '--file', file])
        t.equal(online.code, 3, `verify through the listener exits 3 (${online.stdout.split('\n')[0]})`)
        t.notMatch(online.stdout, /PASS/, 'never a PASS')
      }
    })
  }
})
