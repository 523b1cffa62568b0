/**
 * Where the time goes in the write loop (a diagnostic for write-rate.ts; prints figures, no goals).
 *
 * Part 1, steps: the loop of src/client/writer.ts run with the real modules (fillRecord, pwriteAll,
 * fdatasync, AckChannel against a listener process), each step timed with performance.now(). xxh64
 * (inside fillRecord) and encodeFrame (inside channel.ack) cannot be timed in place without editing
 * them, so each is timed once more alone per record, outside the loop time.
 *
 * Part 2, ablation: records/s of loops that add one step at a time, interleaved over rounds:
 *   C                 the reference pwrite + fdatasync loop (bench/common.ts)
 *   C+send            the same, plus a blocking send of a 51-byte frame per record to a Node
 *                     socket that only reads: the floor for any tool that acks every record
 *   io                pwriteAll + fdatasync through koffi, the record filled once
 *   io+fill           + fillRecord per record
 *   io+fill+ack       + channel.ack per record: the writer's loop (without --trace-file)
 *   ...+frame cache   the same, sending a pre-built ack frame (bench-only AckFrameCache below,
 *                     byte-identical to encodeFrame) through the same socket
 *
 * Usage: node --import tsx bench/write-loop-profile.ts [--dir DIR] [--seconds S] [--rounds N]
 *   (default DIR /dev/shm: on tmpfs the sync costs ~nothing, so the tool's own costs stand out)
 */
import { xxh64 } from '@node-rs/xxhash'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, type AddressInfo } from 'node:net'
import { hostname, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { performance } from 'node:perf_hooks'
import { parseArgs } from 'node:util'
import { AckChannel } from '../src/client/ack-channel.js'
import { createDataFile } from '../src/client/data-file.js'
import { LatencyHistogram } from '../src/client/latency.js'
import { alignedBuffer } from '../src/native/buffers.js'
import { O, close, fdatasync, open, pwriteAll, sendAll } from '../src/native/libc.js'
import { encodeFrame } from '../src/protocol/framing.js'
import { checksumBytes, fillRecord, runKey, slotOf, slotOffsetBytes, type RunKey, type RunMeta } from '../src/record/format.js'
import { buildSyncLoop, dataFileSizeBytes, fileSystemName, formatRate, median, recordSizeBytes, runSyncLoop, startListenerProcess, table, tmpfsDir } from './common.js'

const pollIntervalMs = 50

const steps = ['slotOf + fillRecord', '  of which xxh64 (est.)', 'pwrite (koffi)', 'fdatasync (koffi)', 'channel.ack', '  of which encodeFrame (est.)', 'latency + clock'] as const
type Step = (typeof steps)[number]

const variants = ['C', 'C+send', 'io', 'io+fill', 'io+fill+ack', 'io+fill+ack, frame cache'] as const
type Variant = (typeof variants)[number]

/**
 * The ack frame for (runId, seq, seq), built by patching a per-run prefix instead of running
 * msgpackr: same bytes as encodeFrame({ type: 'ack', runId, fromSeq: seq, toSeq: seq }) for
 * every seq (msgpackr writes positive ints as fixint, uint8, uint16, uint32, then float64).
 */
export class AckFrameCache {
  private readonly prefix: Buffer
  private readonly toSeqKey = Buffer.from([0xa5, ...Buffer.from('toSeq')])
  private readonly frame = Buffer.alloc(128)

  constructor(runId: string) {
    // Everything up to fromSeq's value, taken from msgpackr itself (body starts after the 4-byte length).
    const sample = encodeFrame({ type: 'ack', runId, fromSeq: 1, toSeq: 1 })
    this.prefix = sample.subarray(4, sample.length - 1 - this.toSeqKey.length - 1)
  }

  frameFor(seq: number): Buffer {
    let at = 4
    at += this.prefix.copy(this.frame, at)
    at = writeUint(this.frame, at, seq)
    at += this.toSeqKey.copy(this.frame, at)
    at = writeUint(this.frame, at, seq)
    this.frame.writeUInt32BE(at - 4, 0)
    return this.frame.subarray(0, at)
  }
}

function writeUint(out: Buffer, at: number, value: number): number {
  if (value < 0x80) return out.writeUInt8(value, at)
  if (value < 0x100) return out.writeUInt8(value, out.writeUInt8(0xcc, at))
  if (value < 0x1_0000) return out.writeUInt16BE(value, out.writeUInt8(0xcd, at))
  if (value < 0x1_0000_0000) return out.writeUInt32BE(value, out.writeUInt8(0xce, at))
  return out.writeDoubleBE(value, out.writeUInt8(0xcb, at))
}

/** Checks AckFrameCache against encodeFrame at every encoding boundary; throws on a difference. */
function checkFrameCache(): void {
  const runId = randomBytes(8).toString('hex')
  const cache = new AckFrameCache(runId)
  for (const seq of [1, 2, 127, 128, 255, 256, 65_535, 65_536, 2 ** 32 - 1, 2 ** 32, 2 ** 40 + 3, Number.MAX_SAFE_INTEGER]) {
    const want = encodeFrame({ type: 'ack', runId, fromSeq: seq, toSeq: seq })
    if (!cache.frameFor(seq).equals(want)) throw new Error(`AckFrameCache differs from encodeFrame at seq ${seq}`)
  }
}

interface Target {
  readonly dir: string
  readonly channel: AckChannel
}

function newRun(dir: string): RunMeta {
  const path = join(dir, `plugcheck-bench-profile-${process.pid}.dat`)
  return {
    runId: randomBytes(8).toString('hex'),
    groupId: randomBytes(8).toString('hex'),
    method: 'fdatasync',
    direct: false,
    pattern: 'overwrite',
    recordSizeBytes,
    slotCount: dataFileSizeBytes / recordSizeBytes - 1,
    host: hostname(),
    path,
    requestedPath: path,
    createdMs: Date.now(),
  }
}

/** Part 1: per-step times of the writer's loop. */
function profileSteps(target: Target, durationMs: number): void {
  const meta = newRun(target.dir)
  const { channel } = target
  channel.announce(meta)
  createDataFile(meta)
  const fd = open(meta.path, O.WRONLY)
  const key = runKey(meta.runId)
  const buffer = alignedBuffer(recordSizeBytes)
  const latency = new LatencyHistogram()
  const spentMs = new Map<Step, number>(steps.map((s) => [s, 0]))
  const add = (step: Step, ms: number): void => void spentMs.set(step, spentMs.get(step)! + ms)
  let records = 0
  let loopMs = 0
  try {
    const startMs = performance.now()
    let nextPollMs = startMs + pollIntervalMs
    for (let seq = 1; ; seq++) {
      const t0 = performance.now()
      const slot = slotOf(key, meta.pattern, seq, meta.slotCount)
      fillRecord(buffer, key, seq, slot, Math.round((performance.timeOrigin + performance.now()) * 1000))
      const t1 = performance.now()
      pwriteAll(fd, buffer, slotOffsetBytes(recordSizeBytes, slot))
      const t2 = performance.now()
      fdatasync(fd)
      const t3 = performance.now()
      channel.ack(meta.runId, seq, seq)
      const t4 = performance.now()
      latency.record((t4 - t1) * 1000)
      if (t4 >= nextPollMs) {
        nextPollMs = t4 + pollIntervalMs
        channel.poll()
      }
      const t5 = performance.now()
      add('slotOf + fillRecord', t1 - t0)
      add('pwrite (koffi)', t2 - t1)
      add('fdatasync (koffi)', t3 - t2)
      add('channel.ack', t4 - t3)
      add('latency + clock', t5 - t4)
      loopMs += t5 - t0
      records = seq
      const e0 = performance.now()
      xxh64(buffer.subarray(0, recordSizeBytes - checksumBytes))
      const e1 = performance.now()
      encodeFrame({ type: 'ack', runId: meta.runId, fromSeq: seq, toSeq: seq })
      const e2 = performance.now()
      add('  of which xxh64 (est.)', e1 - e0)
      add('  of which encodeFrame (est.)', e2 - e1)
      if (t5 - startMs >= durationMs) break
    }
  } finally {
    close(fd)
    rmSync(meta.path, { force: true })
  }
  finishRun(channel, meta, records)
  console.log(`steps of the write loop: ${records.toLocaleString('en-US')} records, ${formatRate(records / (loopMs / 1000))} of loop time`)
  const rows = [['step', 'us/record', 'share']]
  for (const step of steps) {
    const ms = spentMs.get(step)!
    rows.push([step, ((ms * 1000) / records).toFixed(2), `${((100 * ms) / loopMs).toFixed(1)}%`])
  }
  rows.push(['whole loop', ((loopMs * 1000) / records).toFixed(2), '100%'])
  console.log(table(rows))
}

/** Part 2: one in-process variant for durationMs; records per second. */
function runVariant(variant: Exclude<Variant, 'C' | 'C+send'>, target: Target, durationMs: number): number {
  const meta = newRun(target.dir)
  const { channel } = target
  const acks = variant.includes('ack')
  const fill = variant.includes('fill')
  const frames = variant.includes('frame cache') ? new AckFrameCache(meta.runId) : undefined
  const socketFd = (channel as unknown as { fd: number }).fd // bench-only: the channel's own socket
  if (acks) channel.announce(meta)
  createDataFile(meta)
  const fd = open(meta.path, O.WRONLY)
  const key: RunKey = runKey(meta.runId)
  const buffer = alignedBuffer(recordSizeBytes)
  fillRecord(buffer, key, 1, 0, Date.now() * 1000)
  const latency = new LatencyHistogram()
  let records = 0
  const startMs = performance.now()
  const endMs = startMs + durationMs
  let nextPollMs = startMs + pollIntervalMs
  let lastMs = startMs
  try {
    for (let seq = 1; ; seq++) {
      const slot = slotOf(key, meta.pattern, seq, meta.slotCount)
      if (fill) fillRecord(buffer, key, seq, slot, Math.round((performance.timeOrigin + performance.now()) * 1000))
      const beforeMs = performance.now()
      pwriteAll(fd, buffer, slotOffsetBytes(recordSizeBytes, slot))
      fdatasync(fd)
      if (frames !== undefined) sendAll(socketFd, frames.frameFor(seq))
      else if (acks) channel.ack(meta.runId, seq, seq)
      records = seq
      lastMs = performance.now()
      latency.record((lastMs - beforeMs) * 1000)
      if (lastMs >= nextPollMs) {
        nextPollMs = lastMs + pollIntervalMs
        if (acks) channel.poll()
        if (lastMs >= endMs) break
      }
    }
  } finally {
    close(fd)
    rmSync(meta.path, { force: true })
  }
  if (acks) finishRun(channel, meta, records)
  return records / ((lastMs - startMs) / 1000)
}

function finishRun(channel: AckChannel, meta: RunMeta, lastSeq: number): void {
  channel.end(meta.runId, 'duration')
  if (!channel.waitRecorded(new Map([[meta.runId, lastSeq]]), 10_000)) throw new Error('the listener did not record every ack')
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      dir: { type: 'string', default: tmpfsDir },
      seconds: { type: 'string', default: '3' },
      rounds: { type: 'string', default: '5' },
    },
  })
  const dir = resolve(values.dir)
  const durationMs = Number(values.seconds) * 1000
  const roundCount = Number(values.rounds)
  checkFrameCache()
  const work = mkdtempSync(join(tmpdir(), 'plugcheck-bench-'))
  const storeDir = mkdtempSync(join(tmpfsDir, 'plugcheck-bench-store-'))
  const cBinary = await buildSyncLoop(work)
  const listener = await startListenerProcess(storeDir)
  const channel = await AckChannel.open({ host: '127.0.0.1', port: listener.port }, undefined)
  const sink = createServer((socket) => socket.setNoDelay(true).on('data', () => undefined))
  await new Promise<void>((done) => sink.listen(0, '127.0.0.1', done))
  const sinkPort = (sink.address() as AddressInfo).port
  const rates = new Map<Variant, number[]>(variants.map((v) => [v, []]))
  try {
    const target = { dir, channel }
    console.log(`target ${dir} (${fileSystemName(dir)})`)
    profileSteps(target, durationMs)
    console.log(`\nablation: ${roundCount} interleaved rounds of ${durationMs / 1000} s per variant`)
    for (let r = 0; r < roundCount; r++) {
      const line: string[] = []
      for (const variant of variants) {
        let perS: number
        if (variant === 'C' || variant === 'C+send') {
          const file = join(dir, `plugcheck-bench-c-${process.pid}.dat`)
          perS = await runSyncLoop(cBinary, file, durationMs / 1000, variant === 'C+send' ? sinkPort : undefined)
          rmSync(file, { force: true })
        } else {
          perS = runVariant(variant, target, durationMs)
        }
        rates.get(variant)!.push(perS)
        line.push(`${variant} ${formatRate(perS)}`)
      }
      console.log(`  round ${r + 1}: ${line.join(', ')}`)
    }
  } finally {
    channel.close()
    sink.close()
    await listener.stop()
    rmSync(work, { recursive: true, force: true })
    rmSync(storeDir, { recursive: true, force: true })
  }
  const cRounds = rates.get('C')!
  const rows = [['variant', 'records/s', 'us/record', 'vs C (median of round ratios)']]
  for (const variant of variants) {
    const perS = median(rates.get(variant)!)
    const ratio = median(rates.get(variant)!.map((v, i) => v / cRounds[i]!))
    rows.push([variant, formatRate(perS), (1e6 / perS).toFixed(2), ratio.toFixed(3)])
  }
  console.log(table(rows))
  return 0
}

process.exitCode = await main()
