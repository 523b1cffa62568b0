/**
 * The last ~26 KB of a run's acks.log read back as zeros, the file's size unchanged (a disk that lost
 * or zeroed the log's last blocks): hundreds of commits that were fdatasynced and reported as
 * recorded. The listener writes the next commit only after the previous one's fdatasync returned,
 * so a crash can leave zeros only where the one entry in flight was going (at most one entry,
 * logEntryHeaderBytes + maxEntryBodyBytes); a longer zero region after the last whole entry is damage.
 * Today any zero region is taken for a torn tail: the acks of the lost records are dropped and a
 * --jobs group that lost 30 acknowledged records turns from FAIL into PASS.
 */
import t, { type Test } from 'tap'
import { closeSync, cpSync, openSync, readFileSync, rmSync, statSync, truncateSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { AckStore } from '../../src/store/ack-store.js'
import { runCli, runInProcess, startListener, tempDir } from '../fixtures/cli.js'

function zero(path: string, from: number, bytes: number): void {
  const fd = openSync(path, 'r+')
  writeSync(fd, Buffer.alloc(bytes), 0, bytes, from)
  closeSync(fd)
}

/** Byte offsets of the log's entries (length-prefixed). */
function entryOffsets(log: Buffer): number[] {
  const offsets: number[] = []
  for (let at = 0; at + 12 <= log.length; at += 12 + log.readUInt32LE(at)) offsets.push(at)
  return offsets
}

/**
 * A --jobs 2 run (fdatasync and none) of durationS seconds against a fresh listener in a fresh
 * directory, the listener then stopped cleanly: every run folded from the journal into runs/ (a
 * SIGKILL would leave its last seconds in journal/).
 */
async function stoppedRun(t: Test, durationS: number) {
  const dir = tempDir(t)
  const listenerDir = join(dir, 'listener')
  const listener = await startListener(listenerDir)
  t.teardown(() => listener.kill())
  const file = join(dir, 'data')
  const method = ['--method', 'fdatasync,none', '--jobs', '2', '--size', '32MiB', '--record-size', '4096']
  const written = await runCli(['write', '--server', listener.server, '--file', file, ...method, '--duration', String(durationS)])
  t.equal(written.code, 0, written.stderr)
  await listener.kill('SIGTERM')
  const job2 = new RegExp(`^run ([0-9a-f]{16}): fdatasync, append, 4 KiB records, ${file}\\.fdatasync\\.job2$`, 'm').exec(
    written.stdout,
  )![1]!
  return { dir, listenerDir, file, job2, logBytes: statSync(join(listenerDir, 'runs', job2, 'acks.log')).size }
}

t.test("zeros over the last ~26 KB of a run's ack log (commits recorded) are damage, never a torn tail", async (t) => {
  // The log grows with the acks: a loaded machine may ack too few in 2 s for a log of more than two
  // commits' worth (asserted below); then a fresh run, twice as long, until it does.
  let run = await stoppedRun(t, 2)
  for (const durationS of [4, 8, 16]) {
    if (Math.floor((run.logBytes * 3) / 4) > 2 * 4096) break
    run = await stoppedRun(t, durationS)
  }
  const { dir, listenerDir, file, job2 } = run
  const copy = join(dir, 'zeroed')
  cpSync(listenerDir, copy, { recursive: true })
  const log = join(copy, 'runs', job2, 'acks.log')
  const size = statSync(log).size
  // ~26 KB, or half the log when group commit across runs made it shorter: either way far more than
  // the largest commit (4 KiB), the most a crash can tear.
  const zeroedBytes = Math.min(26 * 1024, Math.floor((size * 3) / 4))
  t.ok(zeroedBytes > 2 * 4096, `${zeroedBytes} bytes of a ${size}-byte log zeroed, more than two commits' worth`)
  const from = entryOffsets(readFileSync(log))
    .filter((o) => o <= size - zeroedBytes)
    .at(-1)!
  zero(log, from, size - from)
  const full = (await AckStore.load(listenerDir)).lastAckedSeq(job2)
  // The acks of the whole entries before the zeros (the zeroed copy itself is refused).
  const prefix = join(dir, 'prefix')
  cpSync(listenerDir, prefix, { recursive: true })
  truncateSync(join(prefix, 'runs', job2, 'acks.log'), from)
  // Its catalog holds the whole log: without it, the cut log is read as it is (a measure, not a verdict).
  rmSync(join(prefix, 'catalog.msgpack'))
  const kept = (await AckStore.load(prefix)).lastAckedSeq(job2)
  t.ok(full - kept > 100, `the zeroed region held acks ${kept + 1}-${full}, all recorded`)
  t.ok(full < 8000, `no wrap: ${full} seqs in 8,191 slots`)
  // Job 2 lost the records of 20 acknowledged seqs whose acks sit in the zeroed region; the control lost records (the cut was real).
  for (let seq = kept + 1; seq <= kept + 20; seq++) zero(`${file}.fdatasync.job2`, 4096 * seq, 4096)
  zero(`${file}.none.job1`, 4096 * 201, 50 * 4096)

  const intact = await runInProcess(['verify', '--acks', listenerDir, '--file', file])
  t.equal(intact.code, 1, `the intact directory: FAIL (${intact.stdout.split('\n')[0]})`)

  const offline = await runInProcess(['verify', '--acks', copy, '--file', file])
  t.equal(offline.code, 3, `verify --acks exits 3 (${offline.stdout.split('\n')[0]} / ${offline.stderr.split('\n')[0]})`)
  t.equal(offline.stdout, '', 'no verdict')
  t.match(offline.stderr, new RegExp(`could not read ${log}: damaged at byte ${from}`), 'the log and the byte named')
})
