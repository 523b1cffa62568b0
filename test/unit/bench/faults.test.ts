/**
 * Faults injected at the native boundary (rimraf style: the native port is wrapped, nothing else):
 * a file system refusing O_DIRECT gives n/a* rows and pg_test_fsync's footnote; a failed sync stops
 * the run with exit 3 and is never retried; ops write fresh offsets and wrap.
 */
import t, { type Test } from 'tap'
import fs from 'node:fs'
import * as native from '../../../src/native/index.js'
import { NativeError } from '../../../src/native/errors.js'
import type { DataFile, NativePort } from '../../../src/native/port.js'
import { PlugcheckError } from '../../../src/base/errors.js'
import type { ScratchFile } from '../../../src/bench/scratch-file.js'
import type { RowSpec } from '../../../src/bench/sections/plan.js'
import { scratchDir } from '../../fixtures/bench-helpers.js'

type BenchModule = typeof import('../../../src/bench/bench.js')

/** The real port with some calls replaced. */
function portWith(overrides: (real: NativePort) => Partial<NativePort>): typeof native {
  const real = native.nativePort()
  const port: NativePort = { ...real, ...overrides(real) }
  return { ...native, nativePort: () => port }
}

/**
 * runBench with the port replaced. tap mocks the modules a mocked module imports directly, but cannot
 * follow a .js specifier to a .ts file one level further, so ops.ts is mocked first and handed in.
 */
async function benchWithPort(t: Test, mocked: typeof native): Promise<BenchModule> {
  const ops = await t.mockImport('../../../src/bench/sections/ops.js', { '../../../src/native/index.js': mocked })
  return t.mockImport<BenchModule>('../../../src/bench/bench.js', {
    '../../../src/native/index.js': mocked,
    '../../../src/bench/sections/ops.js': ops,
  })
}

function captureIo() {
  const io = {
    stdout: '',
    stderr: '',
    out: (text: string) => void (io.stdout += text),
    err: (text: string) => void (io.stderr += text),
    statusTty: false,
  }
  return io
}

t.test('O_DIRECT refused at open: direct rows are n/a* with the footnote, the others run', async (t) => {
  const dir = scratchDir('/dev/shm', t)
  const { runBench } = await benchWithPort(
    t,
    portWith((real) => ({
      openData: (file, method, options) => {
        if (options.direct) throw new NativeError('open', 'EINVAL', -22, 'invalid argument', file)
        return real.openData(file, method, options)
      },
    })),
  )
  const io = captureIo()
  t.equal(await runBench({ file: dir, secsPerTest: 0.05, recordSizeBytes: 8192, json: false }, io), 0)
  t.match(io.stdout, /^ {8}open_datasync \(direct\) {8} {17}n\/a\* {2}open failed: EINVAL \(invalid argument\)$/m)
  t.match(io.stdout, /^ {8} 1 \* 16kB open_sync write {5} {17}n\/a\*/m)
  t.match(io.stdout, /^\* This file system and its mount options do not support direct I\/O/m)
  t.match(io.stdout, /^ {8}open_datasync \(buffered\) +[\d.]+ ops\/sec/m)

  const json = captureIo()
  t.equal(await runBench({ file: dir, secsPerTest: 0.05, recordSizeBytes: 8192, json: true }, json), 0)
  const report = JSON.parse(json.stdout)
  const direct = report.sections
    .flatMap((s: { rows: { direct: boolean; status: string }[] }) => s.rows)
    .filter((r: { direct: boolean }) => r.direct)
  t.equal(direct.length, 9)
  t.ok(direct.every((r: { status: string }) => r.status === 'n/a*'))
  t.equal(report.footnotes.length, 1)
  t.same(fs.readdirSync(dir), [])
})

t.test('a failed fdatasync stops the run: exit 3, no retry, file removed', async (t) => {
  const dir = scratchDir('/dev/shm', t)
  let calls = 0
  const { runBench } = await benchWithPort(
    t,
    portWith((real) => ({
      openData: (file, method, options) => {
        const data = real.openData(file, method, options)
        if (method !== 'fdatasync') return data
        return {
          ...data,
          sync: () => {
            calls++
            throw new NativeError('fdatasync', 'EIO', -5, 'input/output error')
          },
        }
      },
    })),
  )
  const io = captureIo()
  const error = await runBench({ file: dir, secsPerTest: 0.05, recordSizeBytes: 8192, json: false }, io).catch((e: unknown) => e)
  t.ok(error instanceof PlugcheckError)
  t.equal((error as PlugcheckError).exitCode, 3)
  t.match((error as PlugcheckError).message, /^fdatasync failed on .*plugcheck-bench\.\S+: EIO \(input\/output error\)$/)
  t.match((error as PlugcheckError).hint, /never retried/)
  t.equal(calls, 1, 'called once, never retried')
  t.same(fs.readdirSync(dir), [], 'scratch file removed')
})

t.test('ops write fresh offsets across the region, pieces back to back, and wrap', async (t) => {
  const writes: { offset: number; first: number; length: number }[] = []
  const { prepareRow } = await t.mockImport<typeof import('../../../src/bench/sections/ops.js')>('../../../src/bench/sections/ops.js', {
    '../../../src/native/index.js': portWith(() => ({
      openData: (): DataFile => ({
        write: (buf, offset) => void writes.push({ offset, first: buf.readUInt32LE(0), length: buf.length }),
        sync: () => {},
        close: () => {},
      }),
    })),
  })
  const regionBytes = 64 * 1024
  const source = Buffer.alloc(regionBytes + 64 * 1024)
  for (let i = 0; i < source.length; i += 4) source.writeUInt32LE(i, i)
  const scratch: ScratchFile = {
    path: '/nonexistent',
    controlFd: -1,
    regionStartBytes: 4096,
    regionBytes,
    source,
    filesDirectory: '/nonexistent.files',
  }
  const spec: RowSpec = {
    id: 'two-writes/fdatasync',
    label: 'fdatasync',
    method: 'fdatasync',
    direct: false,
    durable: true,
    shape: 'write-then-sync',
    writesPerOp: 2,
    writeBytes: 8192,
  }
  const prepared = prepareRow(spec, scratch)
  if (prepared.kind !== 'ready') throw new Error('not ready')
  const opsPerPass = regionBytes / (2 * 8192)
  for (let i = 0; i < opsPerPass + 1; i++) prepared.op(i)
  t.same(
    writes.map((w) => w.offset),
    [...Array.from({ length: 2 * opsPerPass }, (_, j) => 4096 + j * 8192), 4096, 4096 + 8192],
    'consecutive offsets, then back to the start',
  )
  t.ok(writes.every((w) => w.length === 8192))
  t.equal(writes[0]!.first, 0, 'first pass: source window 0')
  t.equal(writes[2 * opsPerPass]!.first, 64 * 1024, 'second pass: the other window, so the bytes on disk change')
})
