/**
 * The events file and the listener's new flags: rotation at a size (events, events.1, events.2, whole
 * lines, the newest kept), a bounded queue that drops and counts what a slow disk cannot take, a
 * listener whose --events file blocks (a FIFO nobody reads) still answering hellos, the writer's
 * message when a bound refuses its run, and bad values of the new flags as usage errors.
 */
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { closeSync, constants, existsSync, openSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { EventsFile } from '../../../../src/server/listen/events-file.js'
import type { ListenerEvent } from '../../../../src/server/listen/events.js'
import { runCli, runInProcess, startListener, tempDir, waitFor } from '../../../fixtures/cli.js'
import { Peer, runIdOf, runMeta } from '../../../fixtures/peer.js'

const quietIo = { out: () => undefined, err: () => undefined, statusTty: false }

function linesOf(path: string): ListenerEvent[] {
  if (!existsSync(path)) return []
  const text = readFileSync(path, 'utf8')
  if (text !== '' && !text.endsWith('\n')) throw new Error(`${path} ends in the middle of a line`)
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as ListenerEvent)
}

const warning = (n: number): ListenerEvent => ({ kind: 'warning', message: `event ${n}`, atMs: 1_700_000_000_000 + n })

t.test('the events file rotates at its size: events, events.1, events.2 hold the newest whole lines; nothing older is kept', async (t) => {
  const path = join(tempDir(t), 'events.jsonl')
  const file = new EventsFile(path, quietIo, 4096)
  // Appended in several turns, so that writes (and rotations) happen between them.
  for (let n = 0; n < 400; n++) {
    file.append(warning(n))
    if (n % 10 === 9) await new Promise((resolve) => setImmediate(resolve))
  }
  await file.close()
  for (const p of [path, `${path}.1`, `${path}.2`]) t.ok(statSync(p).size <= 4096, `${p} is ${statSync(p).size} bytes, within the size`)
  t.notOk(existsSync(`${path}.3`), 'two rotated files kept, no more')
  const kept = [...linesOf(`${path}.2`), ...linesOf(`${path}.1`), ...linesOf(path)].map((e) => (e as { message: string }).message)
  const first = Number(kept[0]!.split(' ')[1])
  t.same(
    kept,
    Array.from({ length: 400 - first }, (_, i) => `event ${first + i}`),
    'the newest events, in order, none missing between',
  )
  t.ok(first > 0 && kept.length >= 3 * 30, `${kept.length} events kept across the three files`)
})

t.test('a disk that does not keep up: the queue is bounded, what does not fit is dropped and counted in the file', async (t) => {
  const path = join(tempDir(t), 'events.jsonl')
  const file = new EventsFile(path, quietIo, 64 * 1024 * 1024, 1000)
  for (let n = 0; n < 100; n++) file.append(warning(n)) // one turn: the disk gets none of them before the queue fills
  t.ok(file.droppedCount() > 0, `${file.droppedCount()} dropped`)
  await file.close()
  const lines = linesOf(path).map((e) => (e as { message: string }).message)
  const summary = lines.find((l) => /events were not written/.test(l))
  t.match(
    summary,
    new RegExp(`^\\d+ events were not written to ${path.replace(/[.]/g, '\\.')}: its disk did not keep up, was full or failed$`),
  )
  const counted = Number(summary!.split(' ')[0])
  t.equal(lines.length - 1 + counted, 100, 'every event is either in the file or counted as dropped')
})

t.test('an --events file that blocks (a FIFO nobody reads) never stops the listener answering hellos', async (t) => {
  const dir = tempDir(t)
  const fifo = join(dir, 'events.fifo')
  execFileSync('mkfifo', [fifo])
  const listener = await startListener(join(dir, 'acks'), ['--events', fifo])
  t.teardown(async () => {
    // Unblock the open() waiting in the listener's threadpool, then stop it.
    const reader = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK)
    await listener.kill()
    closeSync(reader)
  })
  for (let i = 0; i < 5; i++) {
    const peer = await Peer.open(listener.port)
    peer.send({ type: 'hello', protocol: 3, role: 'verifier' })
    t.match(await peer.next('welcome', 5000), { type: 'welcome' }, `hello ${i + 1} answered`)
    peer.close()
  }
  const writer = await Peer.writer(listener.port, runMeta(runIdOf(1)))
  writer.send({ type: 'ack', runId: runIdOf(1), fromSeq: 1, toSeq: 5 })
  t.match(await writer.next('recorded'), { throughSeq: 5 }, 'acks are recorded meanwhile')
  writer.close()
})

t.test('a writer refused by a bound says which bound and flag, and exits 3', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'acks'), ['--max-runs-per-peer', '1'])
  t.teardown(() => listener.kill())
  const first = await Peer.writer(listener.port, runMeta(runIdOf(1)))
  t.teardown(() => first.close())
  const write = await runCli(['write', '--server', listener.server, '--file', join(dir, 'data'), '--size', '1MiB', '--duration', '1'])
  t.equal(write.code, 3, write.stderr)
  t.match(
    write.stderr,
    /^plugcheck: the listener at 127\.0\.0\.1:\d+ refused the run: the listener takes no new runs: it holds 1 runs from 127\.0\.0\.1, its bound per peer is 1 \(--max-runs-per-peer\); live runs keep recording/m,
  )
  await waitFor('the refusal in the listener log', () => /refused a run from 127\.0\.0\.1: .*--max-runs-per-peer/.test(listener.stderr()))
})

t.test('bad values of the quota and retention flags are usage errors naming the flag', async (t) => {
  const dir = tempDir(t)
  for (const [flags, message] of [
    [['--max-runs', '0'], /--max-runs must be at least 1/],
    [['--max-runs-per-peer', '1.5'], /--max-runs-per-peer must be a whole number/],
    [['--max-store-bytes', '10 parsecs'], /--max-store-bytes 10 parsecs is not a size/],
    [['--max-store-bytes-per-peer', '-1'], /--max-store-bytes-per-peer -1 is not a size/],
    [['--reserve', 'lots'], /--reserve lots is not a size or a percentage/],
    [['--reserve', '150%'], /--reserve 150% is over 100%: give a size or a percentage from 0 to 100%/],
    [['--retain', 'forever'], /--retain forever is not a duration/],
  ] as const) {
    const r = await runInProcess(['listen', '--port', '0', '--host', '127.0.0.1', '--dir', dir, ...flags])
    t.equal(r.code, 2, flags.join(' '))
    t.match(r.stderr, message)
  }
})
