/**
 * Fuzz: at least 100,000 malformed frames over thousands of connections (random bytes, truncated and
 * oversized frames, schema-valid but absurd values, deep msgpack nesting, absurd fingerprints) while
 * an honest `plugcheck write` runs against the same listener. The listener never exits, the honest
 * run verifies (exit 0) with exactly the count the writer acknowledged, and nothing is written
 * outside runs/<16 hex>/ in the listener's directory.
 *
 * Seeded: the seed is printed; PLUGCHECK_FUZZ_SEED=<seed> replays the same frames.
 */
import t from 'tap'
import { connect } from 'node:net'
import { lstatSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { Packr } from 'msgpackr'
import { encodeFrame, maxClientFrameBytes } from '../../../../src/protocol/framing.js'
import { runInProcess, spawnCli, startListener, tempDir, waitFor } from '../../../fixtures/cli.js'

const seed = process.env.PLUGCHECK_FUZZ_SEED !== undefined ? Number(process.env.PLUGCHECK_FUZZ_SEED) >>> 0 : (Math.random() * 2 ** 32) >>> 0
const framesWanted = 100_000
const concurrentConnections = 24
const writerDurationS = 12

/** mulberry32: small, fast, and enough to replay a failure. */
function prng(state: number): () => number {
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let z = state
    z = Math.imul(z ^ (z >>> 15), z | 1)
    z ^= z + Math.imul(z ^ (z >>> 7), z | 61)
    return ((z ^ (z >>> 14)) >>> 0) / 2 ** 32
  }
}

const rawPackr = new Packr({ useRecords: false, mapsAsObjects: true })
const deepMapLevel = Buffer.from([0x81, 0xa0])

/** The absurd values a fuzzer picks from: built once, not at every pick (a fingerprint picks thousands of strings). */
const absurdNumbers: readonly unknown[] = [
  0,
  -1,
  -0,
  0.5,
  2 ** 53,
  2 ** 53 + 2,
  Number.MAX_SAFE_INTEGER,
  1e308,
  -1e308,
  Infinity,
  -Infinity,
  NaN,
  2 ** 64,
  2 ** 32 - 1,
  2 ** 31,
  946_684_799_999,
  7_258_118_400_001,
]
const absurdStrings: readonly string[] = [
  '',
  '..',
  '../../../../etc/passwd',
  '/',
  '\u0000',
  'a'.repeat(5000),
  'runs/../../x',
  '\uffff'.repeat(100),
  'C:\\Windows',
  '__proto__',
  'constructor',
  '%s%n',
]

class Fuzzer {
  private readonly random: () => number
  constructor(seedValue: number) {
    this.random = prng(seedValue)
  }
  int(n: number): number {
    return Math.floor(this.random() * n)
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!
  }
  bytes(n: number): Buffer {
    const b = Buffer.alloc(n)
    for (let i = 0; i < n; i++) b[i] = this.int(256)
    return b
  }
  hex16(): string {
    return Array.from({ length: 16 }, () => '0123456789abcdef'[this.int(16)]).join('')
  }
  absurdNumber(): unknown {
    return this.pick(absurdNumbers)
  }
  absurdString(): string {
    return this.pick(absurdStrings)
  }
  absurdValue(depth = 0): unknown {
    switch (this.int(depth > 3 ? 4 : 7)) {
      case 0:
        return this.absurdNumber()
      case 1:
        return this.absurdString()
      case 2:
        return this.pick([null, undefined, true, false])
      case 3:
        return this.bytes(this.int(40))
      case 4:
        return Array.from({ length: this.int(5) }, () => this.absurdValue(depth + 1))
      case 5:
        return {
          __proto__: { polluted: true },
          constructor: { prototype: { polluted: true } },
          [this.absurdString()]: this.absurdValue(depth + 1),
        }
      default:
        return Object.fromEntries(Array.from({ length: this.int(5) }, () => [this.absurdString(), this.absurdValue(depth + 1)]))
    }
  }
  /** A fingerprint that passes or nearly passes its schema, with absurd contents. */
  absurdFingerprint(): unknown {
    const longList = Array.from({ length: this.int(2000) }, () => this.absurdString().slice(0, 20))
    return {
      os: {
        platform: this.absurdString(),
        kernel: 'x'.repeat(this.int(20_000)),
        kernelVersion: '',
        arch: this.absurdString(),
        distribution: null,
      },
      bootId: this.pick([null, 'b'.repeat(this.int(100)), this.absurdValue()]),
      virtualMachine: this.pick([true, false, 'yes']),
      target: {
        path: this.absurdString(),
        fileSystem: {
          type: '',
          magic: this.pick(['0xef53', 'ef53', '0x']),
          mountPoint: null,
          source: null,
          mountOptions: longList,
          superOptions: [],
        },
        inMemory: false,
      },
      device: this.pick([null, this.absurdValue()]),
    }
  }
  meta(overrides: Record<string, unknown> = {}): Record<string, unknown> {
    const runId = this.hex16()
    return {
      runId,
      groupId: this.pick([runId, this.hex16()]),
      method: this.pick(['fdatasync', 'none', 'fsync', 'open_sync']),
      direct: false,
      pattern: this.pick(['append', 'overwrite']),
      recordSizeBytes: this.pick([512, 8192, 1024 * 1024]),
      slotCount: this.pick([1, 1000, 2 ** 24, 2 ** 40]),
      host: this.pick(['fuzzhost', 'x'.repeat(255), '..', '/']),
      path: this.pick(['/data/f', '../../escape', '/', 'p'.repeat(4096)]),
      requestedPath: this.pick(['/data/f', '../../escape', 'runs/../../x']),
      createdMs: Date.now(),
      ...overrides,
    }
  }
  /** One malformed frame, as bytes; may be meant to end the stream (truncated). */
  malformed(): { frame: Buffer; last: boolean; kind: string } {
    const kind = this.pick([
      'random-bytes',
      'random-bytes',
      'truncated',
      'oversized',
      'bad-msgpack',
      'deep-array',
      'deep-map',
      'absurd-hello',
      'absurd-run',
      'absurd-run-meta',
      'absurd-fingerprint',
      'absurd-ack',
      'absurd-end',
      'absurd-query',
      'wrong-type',
    ] as const)
    const valueFrame = (value: unknown): Buffer => {
      const body = rawPackr.pack(value)
      const frame = Buffer.alloc(4 + body.length)
      frame.writeUInt32BE(body.length, 0)
      body.copy(frame, 4)
      return frame
    }
    switch (kind) {
      case 'random-bytes': {
        const body = this.bytes(this.int(200))
        const frame = Buffer.alloc(4 + body.length)
        frame.writeUInt32BE(this.int(3) === 0 ? this.int(2 ** 32) : body.length, 0)
        body.copy(frame, 4)
        return { frame, last: true, kind }
      }
      case 'truncated': {
        const whole = encodeFrame({ type: 'query', host: 'fuzzhost', requestedPath: '/data/f' })
        return { frame: whole.subarray(0, this.int(whole.length)), last: true, kind }
      }
      case 'oversized': {
        const frame = Buffer.alloc(4 + this.int(1000))
        frame.writeUInt32BE(maxClientFrameBytes + 1 + this.int(2 ** 32 - maxClientFrameBytes - 2), 0)
        return { frame, last: true, kind }
      }
      case 'bad-msgpack': {
        const body = Buffer.concat([
          Buffer.from([this.pick([0xc1, 0xdd, 0xdf, 0xc6, 0xdb])]),
          Buffer.from([0xff, 0xff, 0xff, 0xff]),
          this.bytes(this.int(8)),
        ])
        const frame = Buffer.alloc(4 + body.length)
        frame.writeUInt32BE(body.length, 0)
        body.copy(frame, 4)
        return { frame, last: false, kind }
      }
      case 'deep-array':
      case 'deep-map': {
        const depth = 1000 + this.int(maxClientFrameBytes - 1100)
        // deep-map: {"": {"": ...}}, a one-entry map (0x81) with an empty string key (0xa0), depth times.
        const body = kind === 'deep-array' ? Buffer.alloc(depth, 0x91) : Buffer.alloc(depth * 2, deepMapLevel)
        const frame = Buffer.alloc(4 + Math.min(body.length, maxClientFrameBytes))
        frame.writeUInt32BE(frame.length - 4, 0)
        body.copy(frame, 4, 0, frame.length - 4)
        return { frame, last: false, kind }
      }
      case 'absurd-hello':
        return {
          frame: valueFrame({
            type: 'hello',
            protocol: this.absurdNumber(),
            role: this.pick(['writer', 'verifier', 'admin', this.absurdValue()]),
            token: this.absurdValue(),
          }),
          last: false,
          kind,
        }
      case 'absurd-run':
        return { frame: valueFrame({ type: 'run', meta: this.absurdValue(), writer: this.absurdValue() }), last: false, kind }
      case 'absurd-run-meta':
        return {
          frame: valueFrame({
            type: 'run',
            meta: this.meta({
              [this.pick(['runId', 'recordSizeBytes', 'slotCount', 'createdMs', 'host', 'path', 'method'])]: this.pick([
                this.absurdNumber(),
                this.absurdString(),
                this.absurdValue(),
              ]),
            }),
          }),
          last: false,
          kind,
        }
      case 'absurd-fingerprint':
        return {
          frame: valueFrame({
            type: 'run',
            meta: this.meta(),
            writer: { bootId: this.pick([null, 'x'.repeat(65), '']), fingerprint: this.absurdFingerprint() },
          }),
          last: false,
          kind,
        }
      case 'absurd-ack': {
        const fromSeq = this.pick([this.absurdNumber(), 1, 2 ** 53 - 1])
        return {
          frame: valueFrame({
            type: 'ack',
            runId: this.pick([this.hex16(), '../../x', this.absurdValue()]),
            fromSeq,
            toSeq: this.pick([fromSeq, this.absurdNumber()]),
          }),
          last: false,
          kind,
        }
      }
      case 'absurd-end':
        return {
          frame: valueFrame({
            type: 'end',
            runId: this.hex16(),
            reason: this.pick(['vanished', 'duration', this.absurdValue()]),
            detail: this.pick(['d'.repeat(5000), this.absurdValue()]),
          }),
          last: false,
          kind,
        }
      case 'absurd-query':
        return {
          frame: valueFrame({
            type: 'query',
            host: this.pick(['', 'h'.repeat(256), this.absurdValue()]),
            requestedPath: this.absurdValue(),
            runId: this.absurdValue(),
          }),
          last: false,
          kind,
        }
      case 'wrong-type':
        return {
          frame: valueFrame(this.pick([this.absurdValue(), { type: this.absurdValue() }, [1, 2, 3], 'hello', 42])),
          last: false,
          kind,
        }
    }
  }
  /** Valid frames a hostile client may send before its malformed ones: it gets further into the state machine. */
  prelude(): Buffer[] {
    const frames: Buffer[] = []
    if (this.int(3) === 0) return frames
    frames.push(encodeFrame({ type: 'hello', protocol: 2, role: this.pick(['writer', 'verifier']) }))
    if (this.int(2) === 0) {
      const meta = this.meta({
        host: 'fuzzhost',
        path: '/data/f',
        requestedPath: `/fuzz/${this.int(4)}`,
        slotCount: 1000,
        recordSizeBytes: 8192,
      })
      frames.push(encodeFrame({ type: 'run', meta }))
      const acks = this.int(20)
      for (let seq = 1; seq <= acks; seq++) frames.push(encodeFrame({ type: 'ack', runId: meta.runId, fromSeq: seq, toSeq: seq }))
      if (this.int(2) === 0) frames.push(encodeFrame({ type: 'end', runId: meta.runId, reason: 'duration' }))
    }
    if (this.int(4) === 0) frames.push(encodeFrame({ type: 'query', host: 'fuzzhost', requestedPath: '/fuzz/1' }))
    return frames
  }
}

/** Sends bytes on a fresh connection, half-closes, and waits (bounded) for the listener to close it. */
async function hostileConnection(port: number, bytes: Buffer): Promise<void> {
  await new Promise<void>((resolve) => {
    const socket = connect({ host: '127.0.0.1', port })
    const timer = setTimeout(() => socket.destroy(), 5000)
    socket.on('error', () => undefined)
    socket.on('data', () => undefined)
    socket.on('close', () => {
      clearTimeout(timer)
      resolve()
    })
    socket.on('connect', () => socket.end(bytes))
  })
}

function listFiles(root: string, relative = ''): string[] {
  const out: string[] = []
  for (const name of readdirSync(join(root, relative))) {
    const rel = relative === '' ? name : `${relative}/${name}`
    out.push(rel)
    if (lstatSync(join(root, rel)).isDirectory()) out.push(...listFiles(root, rel))
  }
  return out
}

t.test('malformed frames by the hundred thousand leave an honest run and the listener intact', async (t) => {
  t.comment(`fuzz seed ${seed} (replay with PLUGCHECK_FUZZ_SEED=${seed})`)
  const dir = tempDir(t)
  const acksDir = join(dir, 'listener')
  const listener = await startListener(acksDir)
  t.teardown(() => listener.kill())

  const file = join(dir, 'honest.data')
  const writer = spawnCli([
    'write',
    '--server',
    listener.server,
    '--file',
    file,
    '--method',
    'fdatasync',
    '--duration',
    String(writerDurationS),
    '--size',
    '64MiB',
  ])
  let writerOut = ''
  let writerErr = ''
  writer.stdout!.on('data', (c: Buffer) => (writerOut += c.toString()))
  writer.stderr!.on('data', (c: Buffer) => (writerErr += c.toString()))
  const writerCode = new Promise<number>((resolve) => writer.on('close', (code) => resolve(code ?? -1)))
  await waitFor(`the honest run to start (${writerErr})`, () => /^run [0-9a-f]{16}:/m.test(writerOut))

  const fuzzer = new Fuzzer(seed)
  let framesSent = 0
  let connections = 0
  const kinds = new Map<string, number>()
  const startMs = Date.now()
  const worker = async (): Promise<void> => {
    while (framesSent < framesWanted) {
      const parts = fuzzer.prelude()
      const count = 1 + fuzzer.int(40)
      for (let i = 0; i < count; i++) {
        const { frame, last, kind } = fuzzer.malformed()
        parts.push(frame)
        framesSent++
        kinds.set(kind, (kinds.get(kind) ?? 0) + 1)
        if (last) break
      }
      connections++
      await hostileConnection(listener.port, Buffer.concat(parts))
      if (listener.process.exitCode !== null)
        throw new Error(`the listener exited (${listener.process.exitCode}): ${listener.stderr().slice(-2000)}`)
    }
  }
  await Promise.all(Array.from({ length: concurrentConnections }, worker))
  t.comment(
    `${framesSent} malformed frames over ${connections} connections in ${((Date.now() - startMs) / 1000).toFixed(1)} s: ${[...kinds].map(([k, n]) => `${k} ${n}`).join(', ')}`,
  )
  t.ok(framesSent >= framesWanted)

  const code = await writerCode
  t.equal(code, 0, `the honest writer finished (${writerErr.slice(-500)})`)
  t.equal(listener.process.exitCode, null, 'the listener is still running')
  const summary = /([\d,]+) records synced and acknowledged(?: \([^)]*\))?, ([\d,]+) recorded by the listener/.exec(writerOut)
  t.ok(summary, `writer summary (${writerOut})`)
  const acked = Number(summary![1]!.replaceAll(',', ''))
  t.equal(Number(summary![2]!.replaceAll(',', '')), acked, 'every ack recorded')

  const verify = await runInProcess(['verify', '--server', listener.server, '--file', file, '--json'])
  t.equal(verify.code, 0, verify.stderr)
  const report = JSON.parse(verify.stdout) as {
    runs: Array<{ acked: number; intact: number; superseded: number; lost: number; torn: number; corrupt: number }>
  }
  t.equal(report.runs.length, 1)
  t.equal(report.runs[0]!.acked, acked, `verify judged exactly the ${acked} acked records`)
  const run = report.runs[0]!
  // 64 MiB holds 8,191 records: the writer wraps around, and a slot's older seqs are superseded.
  t.match(run, { lost: 0, torn: 0, corrupt: 0 }, 'nothing lost')
  t.equal(run.intact + run.superseded, acked, `every acked record intact or superseded (${JSON.stringify(run).slice(0, 400)})`)

  await listener.kill('SIGTERM')
  // verdict.msgpack: the verdict the honest verify above stored for the honest run.
  // catalog.msgpack: the listener's summary of every ended run (catalog.ts).
  const outside = listFiles(acksDir).filter(
    (rel) =>
      rel !== 'lock' &&
      rel !== 'catalog.msgpack' &&
      !/^runs(\/[0-9a-f]{16}(\/(meta\.msgpack|meta\.msgpack\.tmp|acks\.log|verdict\.msgpack))?)?$/.test(rel) &&
      !/^journal(\/[0-9]{8}\.wal)?$/.test(rel),
  )
  t.same(
    outside,
    [],
    'nothing written outside lock, catalog.msgpack, journal/<8 digits>.wal and runs/<16 hex>/{meta.msgpack,acks.log,verdict.msgpack}',
  )
  t.ok(listener.stderr().split('\n').length < 2000, `the listener's log stayed short (${listener.stderr().split('\n').length} lines)`)
})
