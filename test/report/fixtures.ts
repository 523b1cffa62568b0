/**
 * Hand-made listener directories for the report: runs created through the ack store's own writing
 * API (createRun with the writer's fingerprint and campaign tag, recordSteady, recordVerdict), each
 * run's log then written with the store's own framing (its header, one commit per item) so that the
 * ack times are the test's, and campaign files written as the listener writes them (campaignFileText).
 * A run with a job number is one job's run of a `write --jobs` group (its file PATH.method.jobK).
 */
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { AckStore, frameCommit, logHeader } from '../../src/server/ack-store.js'
import { campaignFileSchema, campaignFileText, type CampaignFile, type CycleRecord } from '../../src/server/campaign-file.js'
import type { Fingerprint } from '../../src/bench/schema.js'
import type { StoredVerdict } from '../../src/protocol/messages.js'
import type { MethodName } from '../../src/native/methods.js'
import { craftMeta } from '../fixtures/crafted-run.js'

export const baseMs = Date.UTC(2025, 0, 6, 9, 0, 0)
export const cycleSpacingMs = 10 * 60_000
/** A run acks one record per ackEveryMs, in spans of spanSeqs records. */
const ackEveryMs = 2
const spanSeqs = 50

export interface CraftedMethodRun {
  readonly method: MethodName
  readonly acked: number
  /** Lost seq ranges (inclusive); the verdict counts them as lost. */
  readonly lost?: readonly [number, number][]
  /** Overrides of the stored verdict; null stores none. */
  readonly verdict?: Partial<StoredVerdict> | null
  /** The job of a `write --jobs` group this run belongs to (1-based); none for a run of one job. */
  readonly job?: number
}

export interface CraftedCycle {
  readonly runs: readonly CraftedMethodRun[]
  readonly outcome?: CycleRecord['outcome']
}

export interface CraftedCampaign {
  readonly name: string
  readonly host: string
  readonly model: string
  readonly writeCache: string
  readonly fileSystem: string
  readonly cycles: readonly CraftedCycle[]
  /** Offset of the campaign's start from baseMs. */
  readonly startOffsetMs?: number
}

export function fingerprint(c: CraftedCampaign, path: string): Fingerprint {
  return {
    os: { platform: 'linux', kernel: '6.1.0-28-amd64', kernelVersion: '#1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1', arch: 'x64', distribution: 'Debian GNU/Linux 12' },
    bootId: null,
    virtualMachine: false,
    target: {
      path,
      fileSystem: { type: c.fileSystem, magic: '0xef53', mountPoint: '/mnt/test', source: '/dev/sdb1', mountOptions: ['rw'], superOptions: [] },
      inMemory: false,
    },
    device: {
      name: 'sdb',
      partition: 'sdb1',
      model: c.model,
      vendor: 'ATA',
      firmware: 'SVT02B6Q',
      driver: 'sd',
      writeCache: c.writeCache,
      fua: false,
      rotational: false,
      logicalBlockBytes: 512,
      physicalBlockBytes: 4096,
      underlying: [],
    },
  }
}

let nextRun = 1
function runId(): string {
  return (nextRun++).toString(16).padStart(16, '0')
}

/** Writes the campaigns' runs and files into dir (a listener directory) and returns each cycle's run ids. */
export async function craftListenerDir(dir: string, campaigns: readonly CraftedCampaign[]): Promise<void> {
  const store = await AckStore.open(dir)
  const logs: Array<{ runId: string; entries: object[] }> = []
  const files: CampaignFile[] = []
  for (const c of campaigns) {
    const history: CycleRecord[] = []
    const startMs = baseMs + (c.startOffsetMs ?? 0)
    for (const [i, cycle] of c.cycles.entries()) {
      const number = i + 1
      const announcedMs = startMs + i * cycleSpacingMs
      const groupId = runId()
      const runIds: string[] = []
      const longest = Math.max(...cycle.runs.map((r) => r.acked))
      const lastAckMs = announcedMs + 1000 + longest * ackEveryMs
      // Steady half way through the acks, the cut right after the last one.
      const steadyMs = announcedMs + 1000 + Math.round((longest * ackEveryMs) / 2)
      const cutMs = lastAckMs + 5
      for (const [j, r] of cycle.runs.entries()) {
        const id = j === 0 ? groupId : runId()
        runIds.push(id)
        const requestedPath = `/mnt/test/${c.name}.dat`
        const path = `${requestedPath}.${r.method}${r.job === undefined ? '' : `.job${r.job}`}`
        const meta = craftMeta(id, path, { groupId, method: r.method, host: c.host, requestedPath, createdMs: announcedMs, slotCount: 100_000 })
        await store.createRun(meta, announcedMs, { peer: '192.0.2.7', writer: { bootId: 'boot-a', fingerprint: fingerprint(c, meta.path) }, campaign: { name: c.name, cycle: number } })
        store.recordSteady(id, steadyMs)
        const lost = r.lost ?? []
        const lostCount = lost.reduce((n, [a, b]) => n + b - a + 1, 0)
        if (r.verdict !== null) {
          const verdict: StoredVerdict = {
            verdict: r.method === 'none' ? (lostCount > 0 ? 'pass' : 'inconclusive') : lostCount > 0 ? 'fail' : 'pass',
            acked: r.acked,
            intact: r.acked - lostCount,
            lost: lostCount,
            torn: 0,
            corrupt: 0,
            lossWindowMs: lost.length === 0 ? null : Math.max(...lost.map(([a, b]) => (b - a) * ackEveryMs)),
            reordered: false,
            lostRanges: lost.map(([a, b]) => [a, b] as [number, number]),
            rebootedSinceWrite: true,
            summary: lostCount > 0 ? `FAIL: ${lostCount} of ${r.acked} acknowledged records lost` : `PASS: all ${r.acked} acknowledged records intact`,
            bootId: 'boot-b',
            fingerprint: null,
            atMs: cutMs + 60_000,
            ...r.verdict,
          }
          await store.recordVerdict(id, verdict)
        }
        const entries: object[] = [{ k: 'steady', atMs: steadyMs }]
        for (let from = 1; from <= r.acked; from += spanSeqs) {
          const to = Math.min(r.acked, from + spanSeqs - 1)
          entries.push({ k: 'ack', fromSeq: from, toSeq: to, firstMs: announcedMs + 1000 + from * ackEveryMs, lastMs: announcedMs + 1000 + to * ackEveryMs })
        }
        entries.push({ k: 'end', reason: 'vanished', atMs: cutMs + 1 })
        logs.push({ runId: id, entries })
      }
      history.push({
        cycle: number,
        groupId,
        runIds,
        host: c.host,
        path: `/mnt/test/${c.name}.dat`,
        steadyMs,
        plannedCutMs: cutMs,
        cutMs,
        cutExitCode: 0,
        cutOutput: '',
        cameBackMs: cutMs + 60_000,
        outcome: cycle.outcome ?? 'verdict',
      })
    }
    files.push(
      campaignFileSchema.parse({
        version: 1,
        name: c.name,
        cycles: c.cycles.length,
        cutCommand: `ipmitool -H bmc-${c.host} chassis power cycle`,
        cutAfterS: [2, 5],
        rebootTimeoutS: 600,
        seed: 42,
        createdMs: startMs,
        phase: 'done',
        cycle: c.cycles.length + 1,
        history,
      }),
    )
  }
  await store.close()
  for (const { runId: id, entries } of logs) {
    writeFileSync(join(dir, 'runs', id, 'acks.log'), Buffer.concat([logHeader(id), ...entries.map((e, i) => frameCommit(i + 1, [e]))]))
  }
  mkdirSync(join(dir, 'campaigns'), { recursive: true })
  for (const file of files) writeFileSync(join(dir, 'campaigns', `${file.name}.json`), campaignFileText(file))
}

/** The campaign of the tests: honest fdatasync passes, a lying fsync loses, the control notices 2 cuts of 3. */
export const threeCycles: CraftedCampaign = {
  name: 'ssd-a',
  host: 'box-a',
  model: 'Samsung SSD 870 EVO 1TB',
  writeCache: 'write back',
  fileSystem: 'ext4',
  cycles: [
    { runs: [{ method: 'fdatasync', acked: 1500 }, { method: 'fsync', acked: 1400, lost: [[1301, 1400]] }, { method: 'none', acked: 1600, lost: [[1201, 1600]] }] },
    { runs: [{ method: 'fdatasync', acked: 1200 }, { method: 'fsync', acked: 1100, lost: [[900, 950], [1001, 1100]] }, { method: 'none', acked: 1300, lost: [[1001, 1300]] }] },
    { runs: [{ method: 'fdatasync', acked: 900 }, { method: 'fsync', acked: 1000, lost: [[801, 1000]] }, { method: 'none', acked: 1000 }] },
  ],
}

/** A second device, for side-by-side columns: everything survived, the control noticed every cut. */
export const otherDevice: CraftedCampaign = {
  name: 'hdd-b',
  host: 'box-b',
  model: 'WDC WD40EFRX-68N32N0',
  writeCache: 'write through',
  fileSystem: 'xfs',
  startOffsetMs: 3_600_000,
  cycles: [
    { runs: [{ method: 'fdatasync', acked: 800 }, { method: 'none', acked: 900, lost: [[700, 900]] }] },
    { runs: [{ method: 'fdatasync', acked: 700 }, { method: 'none', acked: 800, lost: [[750, 800]] }] },
  ],
}
