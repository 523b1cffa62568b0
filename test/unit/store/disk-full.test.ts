/**
 * The listener's disk fills up (a 1 MiB tmpfs): the writer is told (error frame 'storage'), and after
 * the listener is SIGKILLed and restarted every ack it had reported as recorded is still there. A
 * short write must never be reported as recorded.
 */
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { startListener, tempDir } from '../../fixtures/cli.js'
import { Peer, runMeta } from '../../fixtures/peer.js'

t.test('a full disk stops the run, and no ack reported as recorded is lost', async (t) => {
  // A real full file system needs a mount: run the suite as root, as CI does (never skipped).
  if (process.getuid?.() !== 0) {
    t.fail('needs root to mount a 1 MiB tmpfs: run npm test as root')
    return
  }
  const mountPoint = tempDir(t, 'plugcheck-full-')
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'plugcheck-full', mountPoint])
  t.teardown(() => execFileSync('umount', ['-l', mountPoint]))
  const dir = join(mountPoint, 'listener')
  mkdirSync(dir)
  // Most of the 1 MiB is taken up front, so the ack log fills the rest within seconds.
  writeFileSync(join(mountPoint, 'filler'), Buffer.alloc(800 * 1024, 1))

  const first = await startListener(dir)
  t.teardown(() => first.kill())
  const runId = '0000000000000f01'
  const peer = await Peer.writer(first.port, runMeta(runId))
  let recordedThrough = 0
  let error: { code: string; message: string } | undefined
  let seq = 0
  // Each batch waits for its 'recorded', so each is one log entry (~50 bytes): 55 free pages fill within
  // a few thousand batches, whatever the machine's load. Bounded far beyond that.
  for (let batch = 0; batch < 50_000 && error === undefined && !peer.closed; batch++) {
    for (let i = 0; i < 20; i++, seq++) peer.send({ type: 'ack', runId, fromSeq: seq + 1, toSeq: seq + 1 })
    const deadline = Date.now() + 10_000
    while (recordedThrough < seq && error === undefined && !peer.closed && Date.now() < deadline) {
      await new Promise((resolve) => setImmediate(resolve))
      for (const m of peer.messages.splice(0)) {
        if (m.type === 'recorded') recordedThrough = Math.max(recordedThrough, m.throughSeq)
        if (m.type === 'error') error = m
      }
    }
  }
  if (error === undefined) error = (await peer.next('error')) as unknown as { code: string; message: string }
  t.match(
    error,
    { code: 'storage', message: /could not record acks of run 0000000000000f01: .*(ENOSPC|short write)/ },
    'the writer is told why',
  )
  for (const m of peer.messages) if (m.type === 'recorded') recordedThrough = Math.max(recordedThrough, m.throughSeq)
  t.ok(await peer.waitClosed(), 'and its connection is closed')
  t.ok(recordedThrough > 0, `acks 1-${recordedThrough} were reported as recorded before the disk filled (${seq} sent)`)
  t.match(first.stderr(), /could not record acks of run 0000000000000f01/)
  await first.kill('SIGKILL')

  const second = await startListener(dir)
  t.teardown(() => second.kill())
  const verifier = await Peer.open(second.port)
  verifier.send({ type: 'hello', protocol: 2, role: 'verifier' })
  verifier.send({ type: 'query', host: 'testhost', requestedPath: `/data/${runId}` })
  const reply = await verifier.next('runs')
  verifier.close()
  const spans = reply.type === 'runs' ? reply.runs[0]!.spans : []
  t.equal(spans[0]?.[0], 1, 'acks start at seq 1')
  t.ok(
    spans.every((s, i) => i === 0 || s[0] === spans[i - 1]![1] + 1),
    'contiguous',
  )
  const storedThrough = spans.at(-1)?.[1] ?? 0
  t.ok(
    storedThrough >= recordedThrough,
    `every ack reported as recorded survived the restart (recorded through ${recordedThrough}, stored through ${storedThrough})`,
  )
})
