/**
 * A hello answered while the listener's disk is frozen (fsfreeze): a listener on a loop-mounted ext4
 * file system, a writer acking, then the file system frozen for --freeze seconds: a new verifier
 * says hello, and the time to its welcome is printed (and whether the frozen writer's acks wait).
 * Needs root (mount, fsfreeze). Run against any checkout: it uses the CLI and the test peer.
 *
 *   node --import tsx bench/frozen-disk-hello.ts [--freeze 8]
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { parseArgs } from 'node:util'
import { startListener } from '../test/fixtures/cli.js'
import { Peer, runMeta } from '../test/fixtures/peer.js'

const { values } = parseArgs({ options: { freeze: { type: 'string', default: '8' } } })
const freezeMs = Number(values.freeze) * 1000
const base = mkdtempSync(join(tmpdir(), 'plugcheck-freeze-'))
const image = join(base, 'fs.img')
const mountPoint = join(base, 'mnt')
mkdirSync(mountPoint)
execFileSync('truncate', ['-s', '128M', image])
execFileSync('mkfs.ext4', ['-q', image])
execFileSync('mount', ['-o', 'loop', image, mountPoint])
let frozen = false
try {
  const listener = await startListener(join(mountPoint, 'listener'))
  const runId = '00000000000f4001'
  const writer = await Peer.writer(listener.port, runMeta(runId))
  for (let seq = 1; seq <= 100; seq++) writer.send({ type: 'ack', runId, fromSeq: seq, toSeq: seq })
  await writer.next('recorded')
  execFileSync('fsfreeze', ['-f', mountPoint])
  frozen = true
  const frozenAtMs = performance.now()
  // Acks keep coming while the disk is frozen: a round is stuck in fdatasync.
  for (let seq = 101; seq <= 200; seq++) writer.send({ type: 'ack', runId, fromSeq: seq, toSeq: seq })
  await new Promise((resolve) => setTimeout(resolve, 500))
  const helloAtMs = performance.now()
  const verifier = await Peer.open(listener.port)
  verifier.send({ type: 'hello', protocol: 2, role: 'verifier' })
  let answer = 'no answer'
  try {
    await verifier.next('welcome', freezeMs)
    answer = `welcome after ${(performance.now() - helloAtMs).toFixed(0)} ms`
  } catch {
    answer = `no welcome within ${freezeMs} ms`
  }
  const remainingMs = freezeMs - (performance.now() - frozenAtMs)
  if (remainingMs > 0) await new Promise((resolve) => setTimeout(resolve, remainingMs))
  execFileSync('fsfreeze', ['-u', mountPoint])
  frozen = false
  console.log(`disk frozen ${freezeMs / 1000} s: a verifier's hello got ${answer}`)
  verifier.close()
  writer.close()
  await listener.kill('SIGTERM')
} finally {
  if (frozen) execFileSync('fsfreeze', ['-u', mountPoint])
  execFileSync('umount', ['-l', mountPoint])
}
