/**
 * At start the listener compares its descriptor limit with what its bounds let it hold at once
 * (--max-connections + --max-pending-hellos + closing connections + a margin for its store and
 * Node): a soft limit too low is raised where the hard limit allows, and a hard limit too low is a
 * usage error naming both numbers and the flags (Node raises the soft limit to the hard one as it
 * starts, so for `plugcheck listen` the hard limit is what counts). Within a limit that fits, a flood of connections
 * that never say hello makes no commit fail with EMFILE and no honest run fail.
 * Real child listeners under prlimit (util-linux).
 */
import t from 'tap'
import { spawn, type ChildProcess } from 'node:child_process'
import { readdirSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { binPath, exitedWithOutput, runInProcess, tempDir } from '../../../fixtures/cli.js'
import { nativePort } from '../../../../src/native/index.js'
import { Listener } from '../../../../src/server/listen/listener.js'
import { maxLingering } from '../../../../src/server/listen/listener-options.js'
import { Peer, runIdOf, runMeta } from '../../../fixtures/peer.js'

interface Started {
  readonly child: ChildProcess
  readonly port: number | undefined
  readonly code: number | null
  readonly stderr: () => string
}

/** `plugcheck listen` under `prlimit --nofile=SOFT:HARD`: its port once listening, or its exit code. */
async function listenUnder(soft: number, hard: number, dir: string, extra: readonly string[] = []): Promise<Started> {
  const child = spawn(
    'prlimit',
    [`--nofile=${soft}:${hard}`, process.execPath, binPath, 'listen', '--host', '127.0.0.1', '--port', '0', '--dir', dir, ...extra],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  )
  let stdout = ''
  let stderr = ''
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
  return new Promise<Started>((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000)
    child.stdout!.on('data', (c: Buffer) => {
      stdout += c.toString()
      const match = /listening on 127\.0\.0\.1:(\d+)/.exec(stdout)
      if (match !== null) {
        clearTimeout(timer)
        resolve({ child, port: Number(match[1]), code: null, stderr: () => stderr })
      }
    })
    // A refusal once its last stderr lines are read: the tests match them.
    void exitedWithOutput(child).then(({ code }) => {
      clearTimeout(timer)
      resolve({ child, port: undefined, code, stderr: () => stderr })
    })
  })
}

function stop(started: Started): Promise<void> {
  if (started.child.exitCode !== null || started.child.signalCode !== null) return Promise.resolve()
  const exited = new Promise<void>((resolve) => started.child.once('exit', () => resolve()))
  started.child.kill('SIGKILL')
  return exited
}

t.test('a hard limit below the bounds: refused with exit 2, naming both numbers and the flags', async (t) => {
  const started = await listenUnder(1000, 1000, tempDir(t))
  t.teardown(() => stop(started))
  t.equal(started.code, 2)
  t.match(
    started.stderr(),
    /plugcheck: the listener may hold 2368 descriptors at once \(--max-connections 1024 \+ --max-pending-hellos 1024 \+ 256 closing connections \+ 64 for its store and Node\), but this process may open at most 1000 \(its hard limit; soft limit 1000\)\nhint: lower --max-connections or --max-pending-hellos/,
  )
  // Lowered to fit (100 + 100 + 256 + 64 = 520), the same limit is enough.
  const fitting = await listenUnder(1000, 1000, tempDir(t), ['--max-connections', '100', '--max-pending-hellos', '100'])
  t.teardown(() => stop(fitting))
  t.ok(fitting.port !== undefined, `listening once the bounds fit: ${fitting.stderr()}`)
  t.notMatch(fitting.stderr(), /descriptor limit/, 'nothing to raise')
})

t.test('a soft limit below the bounds under a high hard limit is raised, and said so', async (t) => {
  // Node itself raises the soft limit to the hard one as it starts, so a child listener never sees a
  // low soft limit: the soft limit is lowered here, in this process, before a listener starts in it.
  const port = nativePort()
  const own = port.descriptorLimit()!
  t.teardown(() => port.setDescriptorSoftLimit(own.soft))
  const needed = 16 + 16 + maxLingering + 64
  t.ok(own.hard >= needed + 100, 'this process may raise its limit that far')
  const low = Math.max(readdirSync('/proc/self/fd').length + 20, 200)
  t.ok(low < needed, 'a soft limit below the bounds')
  port.setDescriptorSoftLimit(low)
  const lines: string[] = []
  const listener = await Listener.start({
    host: '127.0.0.1',
    port: 0,
    dir: tempDir(t),
    maxConnections: 16,
    maxPendingHandshakes: 16,
    log: (l) => lines.push(l),
  })
  t.teardown(() => listener.close())
  t.match(lines, [
    `plugcheck: raised the descriptor limit from ${low} to ${needed} (hard limit ${own.hard}): the listener may hold ${needed} descriptors at once (--max-connections 16 + --max-pending-hellos 16 + ${maxLingering} closing connections + 64 for its store and Node)`,
  ])
  t.same(port.descriptorLimit(), { soft: needed, hard: own.hard }, 'the soft limit is what the bounds need')
  const peer = await Peer.writer(listener.address().port, runMeta(runIdOf(0x1)))
  peer.send({ type: 'ack', runId: runIdOf(0x1), fromSeq: 1, toSeq: 3 })
  t.match(await peer.next('recorded'), { throughSeq: 3 }, 'and it serves')
  peer.close()
})

t.test('3,000 connections that never say hello against a limit of 1,100: no EMFILE, the honest run records every ack', async (t) => {
  // This process holds the 3,000 sockets of the flood.
  const own = nativePort().descriptorLimit()!
  if (own.soft < 4000) nativePort().setDescriptorSoftLimit(Math.min(own.hard, 4000))
  t.teardown(() => nativePort().setDescriptorSoftLimit(own.soft))
  const started = await listenUnder(1100, 1100, tempDir(t), ['--max-connections', '512', '--max-pending-hellos', '256'])
  t.teardown(() => stop(started))
  t.ok(started.port !== undefined, `listening: ${started.stderr()}`)
  const port = started.port!
  const pid = started.child.pid!

  const writer = await Peer.writer(port, runMeta(runIdOf(0x2)))
  let seq = 0
  const ackOnce = async (): Promise<void> => {
    seq++
    writer.send({ type: 'ack', runId: runIdOf(0x2), fromSeq: seq, toSeq: seq })
    while (((await writer.next('recorded', 10_000)) as { throughSeq: number }).throughSeq < seq);
  }
  const flood: Socket[] = []
  t.teardown(() =>
    flood.forEach((s) => {
      s.destroy()
    }),
  )
  let peakFds = 0
  for (let batch = 0; batch < 30; batch++) {
    const opened = Array.from({ length: 100 }, () => {
      const socket = connect({ host: '127.0.0.1', port })
      socket.on('error', () => undefined) // evicted: reset or closed by the listener
      flood.push(socket)
      return new Promise<void>((resolve) => socket.once('connect', () => resolve()).once('error', () => resolve()))
    })
    await Promise.all(opened)
    await ackOnce()
    peakFds = Math.max(peakFds, readdirSync(`/proc/${pid}/fd`).length)
  }
  for (let i = 0; i < 20; i++) await ackOnce()
  t.equal(seq, 50, 'every ack of the honest run was recorded during the flood')
  t.ok(peakFds < 1100, `the listener held at most ${peakFds} descriptors`)
  t.notOk(writer.closed, "the writer's connection is still served")
  t.notMatch(started.stderr(), /EMFILE|could not record/, 'no commit failed')
  writer.close()
})

t.test('--max-pending-hellos is checked like --max-connections', async (t) => {
  const bad = await runInProcess(['listen', '--max-pending-hellos', '0'])
  t.equal(bad.code, 2)
  t.match(bad.stderr, /--max-pending-hellos must be at least 1/)
  const fraction = await runInProcess(['listen', '--max-pending-hellos', '1.5'])
  t.equal(fraction.code, 2)
  t.match(fraction.stderr, /--max-pending-hellos must be a whole number/)
})
