/**
 * The events file on a disk that fills up: a batch of lines that does not fit is written in part
 * (a short write), and that part stays in the file, cut in the middle of a line. When the disk has room
 * again the next lines are appended right after it, so the file holds a line that is half of one event
 * glued to the next: a JSON-lines reader fails on it. The contract: every event "as one JSON line ...
 * each written whole in append mode", "a reader never sees a torn line"; a line that cannot be
 * written whole is dropped (and counted), never left in part.
 */
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { mkdirSync, readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { EventsFile } from '../../src/server/listen/events-file.js'
import type { ListenerEvent } from '../../src/server/listen/events.js'
import { fileSize, tempDir, waitFor } from '../fixtures/cli.js'

const warning = (n: number): ListenerEvent => ({ kind: 'warning', message: `event ${n} ${'x'.repeat(900)}`, atMs: 1_700_000_000_000 + n })

t.test('an events file whose disk fills and frees again holds only whole JSON lines', async (t) => {
  const mnt = join(tempDir(t), 'mnt')
  mkdirSync(mnt)
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', mnt])
  t.teardown(() => execFileSync('umount', [mnt]))
  const path = join(mnt, 'events.jsonl')
  let stderr = ''
  const events = new EventsFile(path, { out: () => undefined, err: (s) => void (stderr += s), statusTty: false })
  events.append(warning(0))
  // Event 0 on disk before the disk fills (a loaded machine can take longer than 200 ms to write it).
  await waitFor('event 0 in the events file', () => fileSize(path) > 0 && readFileSync(path, 'utf8').endsWith('\n'), 20_000)
  // The disk fills: ~6 KiB left.
  execFileSync('dd', ['if=/dev/zero', `of=${join(mnt, 'filler')}`, 'bs=1k', 'count=1018'], { stdio: 'ignore' })
  for (let n = 1; n <= 20; n++) events.append(warning(n)) // ~18 KiB: does not fit
  // The warning once the failed append is seen (its write runs in the background: late on a loaded machine).
  await waitFor('the warning', () => /could not append to the events file/.test(stderr), 20_000).catch(() => undefined)
  t.match(stderr, /could not append to the events file/, 'the failure is a warning')
  // Room again: later events are appended.
  rmSync(join(mnt, 'filler'))
  for (let n = 21; n <= 22; n++) events.append(warning(n))
  await events.close()
  const text = readFileSync(path, 'utf8')
  t.ok(text.endsWith('\n'), 'the file ends with a whole line')
  const bad = text
    .split('\n')
    .filter(Boolean)
    .filter((line) => {
      try {
        JSON.parse(line)
        return false
      } catch {
        return true
      }
    })
  t.same(
    bad.map((l) => `${l.slice(0, 60)}...${l.slice(-60)}`),
    [],
    'every line is one whole JSON event',
  )
  const seen = text
    .split('\n')
    .filter(Boolean)
    .flatMap((l) => {
      try {
        return [(JSON.parse(l) as { message: string }).message.split(' ').slice(0, 2).join(' ')]
      } catch {
        return []
      }
    })
  t.ok(seen.includes('event 0') && seen.includes('event 22'), `the events before and after are there (${seen.join(', ')})`)
})
