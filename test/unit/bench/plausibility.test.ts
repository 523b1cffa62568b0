/** The judgements, on synthetic figures: what each rule flags, and that honest figures pass. */
import t from 'tap'
import { assessPlausibility, flushFloorUsRotating, flushFloorUsSolidState } from '../../../src/bench/plausibility.js'
import type { RowResult, SectionResult } from '../../../src/bench/schema.js'
import type { BlockDeviceInfo, Fingerprint } from '../../../src/env/fingerprint-schema.js'

function device(overrides: Partial<BlockDeviceInfo> = {}): BlockDeviceInfo {
  return {
    name: 'sda',
    partition: 'sda1',
    model: 'Example SSD',
    vendor: null,
    driver: 'sd',
    writeCache: 'write back',
    fua: false,
    rotational: false,
    logicalBlockBytes: 512,
    physicalBlockBytes: 4096,
    underlying: [],
    ...overrides,
  }
}

function fingerprint(overrides: { device?: BlockDeviceInfo | null; inMemory?: boolean; virtualMachine?: boolean } = {}): Fingerprint {
  const inMemory = overrides.inMemory ?? false
  return {
    os: { platform: 'linux', kernel: '6.1.0', kernelVersion: '#1 SMP', arch: 'x64', distribution: null },
    bootId: null,
    virtualMachine: overrides.virtualMachine ?? false,
    target: {
      path: '/data/plugcheck-bench.abcd',
      fileSystem: {
        type: inMemory ? 'tmpfs' : 'ext4',
        magic: inMemory ? '0x1021994' : '0xef53',
        mountPoint: '/data',
        source: '/dev/sda1',
        mountOptions: ['rw'],
        superOptions: [],
      },
      inMemory,
    },
    device: overrides.device === undefined ? device() : overrides.device,
  }
}

function row(id: string, method: RowResult['method'], p50Us: number, extra: Partial<RowResult> = {}): RowResult {
  return {
    id,
    label: id.split('/')[1]!,
    method,
    direct: false,
    durable: method !== 'none',
    writesPerOp: 1,
    writeBytes: 8192,
    calls: 'pwrite',
    status: 'ok',
    reason: null,
    opCount: 1000,
    elapsedS: 1,
    opsPerSec: 1e6 / p50Us,
    usecsPerOp: p50Us,
    latencyUsP50: p50Us,
    latencyUsP99: p50Us * 2,
    latencyUsMax: p50Us * 3,
    ...extra,
  }
}

function sections(oneWrite: RowResult[], nonSyncUs = 2): SectionResult[] {
  return [
    { id: 'one-write', title: 'one', rows: oneWrite },
    { id: 'non-sync', title: 'non', rows: [row('non-sync/write', 'none', nonSyncUs)] },
  ]
}

t.test('a 3 us fdatasync on a volatile write cache is too fast to be a flush', async (t) => {
  const flags = assessPlausibility(sections([row('one-write/fdatasync', 'fdatasync', 3)], 0.5), fingerprint())
  t.same(
    flags.map((f) => [f.kind, f.rowIds]),
    [['faster-than-flush', ['one-write/fdatasync']]],
  )
  t.equal(
    flags[0]!.message,
    'fdatasync at 3.0 us/op on a device with a volatile write cache: flushes are not reaching stable storage; run a plug test',
  )
})

t.test('honest figures raise nothing', async (t) => {
  const honest = sections([row('one-write/fdatasync', 'fdatasync', 45), row('one-write/fsync', 'fsync', 60)])
  t.same(assessPlausibility(honest, fingerprint()), [])
  t.same(assessPlausibility(honest, fingerprint({ device: device({ writeCache: 'write through' }) })), [], 'no volatile cache')
})

t.test('the per-sync floor: rotating disks need a millisecond, unless the machine is virtual', async (t) => {
  const rows = sections([row('one-write/fdatasync', 'fdatasync', 400)], 2)
  const hdd = device({ rotational: true })
  t.same(
    assessPlausibility(rows, fingerprint({ device: hdd })).map((f) => f.kind),
    ['faster-than-flush'],
    `< ${flushFloorUsRotating} us on a rotating disk`,
  )
  t.same(assessPlausibility(rows, fingerprint({ device: hdd, virtualMachine: true })), [], 'virtio says rotational whatever backs it')
  t.same(
    assessPlausibility(rows, fingerprint({ device: device({ underlying: [hdd], name: 'dm-0', rotational: false }) })).map((f) => f.kind),
    ['faster-than-flush'],
    'a rotating disk under dm',
  )
})

t.test('one flush per write for O_DSYNC-style rows: the floor applies per sync', async (t) => {
  const twoWrites: SectionResult = {
    id: 'two-writes',
    title: 'two',
    rows: [
      row('two-writes/open_datasync-direct', 'open_datasync', 2 * flushFloorUsSolidState - 2, {
        writesPerOp: 2,
        label: 'open_datasync (direct)',
      }),
    ],
  }
  const flags = assessPlausibility([twoWrites, ...sections([])], fingerprint())
  t.equal(flags.length, 1)
  t.match(
    flags[0]!.message,
    /^open_datasync \(direct\) \(2 x 8kB writes\) at 28 us\/op \(14 us per sync\) on a device with a volatile write cache/,
  )
})

t.test('a durable write costing what an unsynced one costs is flagged, without any device', async (t) => {
  const flags = assessPlausibility(
    sections([row('one-write/fdatasync', 'fdatasync', 4.7), row('one-write/fsync', 'fsync', 40)], 3.6),
    fingerprint({ device: null, inMemory: true }),
  )
  t.same(
    flags.map((f) => f.kind),
    ['in-memory-file-system', 'indistinguishable-from-no-sync'],
  )
  t.match(flags[0]!.message, /is on tmpfs, which lives in memory: nothing written there survives a power cut/)
  t.same(flags[0]!.rowIds, ['one-write/fdatasync', 'one-write/fsync'])
  t.equal(
    flags[1]!.message,
    'fdatasync at 4.7 us/op is indistinguishable from a write without any sync (3.6 us): the sync is not reaching a device; run a plug test',
  )
})

t.test('rows that reopen the file are not compared with a bare write', async (t) => {
  const reopen: SectionResult = {
    id: 'non-write-descriptor',
    title: 'fd',
    rows: [row('non-write-descriptor/write-fsync-close', 'fsync', 3)],
  }
  t.same(assessPlausibility([reopen, ...sections([], 2)], fingerprint({ device: null })), [])
})

t.test('same-call rows, from the static table, only when at least two of them ran', async (t) => {
  const rows = [
    row('one-write/fdatasync', 'fdatasync', 45),
    row('one-write/open_datasync-buffered', 'open_datasync', 46, { label: 'open_datasync (buffered)' }),
    row('one-write/pwritev2_dsync', 'pwritev2_dsync', 44, { label: 'pwritev2 RWF_DSYNC' }),
    row('one-write/fsync', 'fsync', 60),
    row('one-write/open_sync-buffered', 'open_sync', 61, { status: 'n/a', latencyUsP50: null, label: 'open_sync (buffered)' }),
  ]
  const flags = assessPlausibility(sections(rows), fingerprint())
  t.same(
    flags.map((f) => [f.kind, f.rowIds]),
    [['same-call', ['one-write/fdatasync', 'one-write/open_datasync-buffered', 'one-write/pwritev2_dsync']]],
  )
  t.match(flags[0]!.message, /^fdatasync, open_datasync \(buffered\) and pwritev2 RWF_DSYNC are the same call on Linux: /)
  t.same(assessPlausibility(sections(rows), fingerprint(), 'darwin'), [], 'no table for other platforms')
})

t.test("metadata rows are set against the metadata section's own baseline, the same files made without a sync", async (t) => {
  const metadata = (fdatasyncUs: number, noneUs: number): SectionResult => ({
    id: 'metadata',
    title: 'metadata',
    rows: [row('metadata/fdatasync', 'fdatasync', fdatasyncUs), row('metadata/none', 'none', noneUs)],
  })
  const noVolatileCache = fingerprint({ device: device({ writeCache: 'write through' }) })
  // 30 us with a sync against 20 us without: nothing reached a device, though far slower than a plain 2 us write.
  const flagged = assessPlausibility([...sections([]), metadata(30, 20)], noVolatileCache)
  t.same(
    flagged.map((f) => [f.kind, f.rowIds]),
    [['indistinguishable-from-no-sync', ['metadata/fdatasync']]],
  )
  t.equal(
    flagged[0]!.message,
    'fdatasync (files created, renamed, directory synced) at 30 us/op is indistinguishable from the same files made without any sync (20 us): the sync is not reaching a device; run a plug test',
  )
  // 900 us against 20 us: honest; against the plain write's 2 us it would pass too, but 30 us would not have been caught.
  t.same(assessPlausibility([...sections([]), metadata(900, 20)], noVolatileCache), [])
  // Without its own baseline measured, the section falls back to the plain write's.
  const noBaseline: SectionResult = { ...metadata(3, 20), rows: [row('metadata/fdatasync', 'fdatasync', 3)] }
  t.same(
    assessPlausibility([...sections([]), noBaseline], noVolatileCache).map((f) => f.kind),
    ['indistinguishable-from-no-sync'],
  )
})
