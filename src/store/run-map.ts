/**
 * The runs on record (RunMap), and their usage in runs and bytes on disk, in all and per peer, kept as
 * runs come, grow and go, so quotas ask at O(1) whatever the number of runs.
 */
import { peerKey } from '../protocol/endpoint.js'
import type { RunState } from './run-state.js'

/** Runs on record and their bytes on disk. */
export interface Usage {
  readonly runs: number
  readonly bytes: number
}

export interface StoreUsage {
  readonly total: Usage
  /** By peer key (quotas.ts peerKey: an IPv4 address, also when mapped into IPv6; an IPv6 /64). */
  readonly byPeer: ReadonlyMap<string, Usage>
  /** One peer key's usage (zero when it holds no run). */
  ofPeer(key: string): Usage
}

const noUsage: Usage = { runs: 0, bytes: 0 }

function bytesOf(run: RunState): number {
  return run.logBytes + run.metaBytes + (run.verdictBytes ?? 0)
}

/**
 * The runs on record, with runs and bytes in all and per peer key, kept as runs are added, removed
 * or recounted (after their bytes changed): quotas ask at every announcement, which must cost the
 * same with 20 runs or 100,000.
 */
export class RunMap extends Map<string, RunState> {
  private readonly total = { runs: 0, bytes: 0 }
  private readonly byPeer = new Map<string, { runs: number; bytes: number }>()
  /** What each run was counted as (its peer key and bytes), to take back exactly that. */
  private readonly counted = new Map<RunState, { key: string; bytes: number }>()
  /** Runs per group id (hasGroup asks at every announcement). */
  readonly runsByGroup = new Map<string, number>()
  private readonly ofPeer = (key: string): Usage => {
    const peer = this.byPeer.get(key)
    return peer === undefined ? noUsage : { runs: peer.runs, bytes: peer.bytes }
  }

  /** The totals as they are now (byPeer is the live map: read it at once). */
  get usage(): StoreUsage {
    return { total: { runs: this.total.runs, bytes: this.total.bytes }, byPeer: this.byPeer, ofPeer: this.ofPeer }
  }

  override set(runId: string, run: RunState): this {
    const previous = this.get(runId)
    if (previous !== undefined) this.uncount(previous)
    this.count(run)
    return super.set(runId, run)
  }

  override delete(runId: string): boolean {
    const run = this.get(runId)
    if (run !== undefined) this.uncount(run)
    return super.delete(runId)
  }

  /** The run's bytes changed (a round, a verdict): counted again. */
  recount(run: RunState): void {
    if (!this.counted.has(run)) return
    this.uncount(run)
    this.count(run)
  }

  private count(run: RunState): void {
    const key = peerKey(run.origin.peer ?? 'unknown')
    const bytes = bytesOf(run)
    this.counted.set(run, { key, bytes })
    this.add(key, 1, bytes)
    this.runsByGroup.set(run.meta.groupId, (this.runsByGroup.get(run.meta.groupId) ?? 0) + 1)
  }

  private uncount(run: RunState): void {
    const counted = this.counted.get(run)
    if (counted === undefined) return
    this.counted.delete(run)
    this.add(counted.key, -1, -counted.bytes)
    const groupRuns = (this.runsByGroup.get(run.meta.groupId) ?? 0) - 1
    if (groupRuns <= 0) this.runsByGroup.delete(run.meta.groupId)
    else this.runsByGroup.set(run.meta.groupId, groupRuns)
  }

  private add(key: string, runs: number, bytes: number): void {
    this.total.runs += runs
    this.total.bytes += bytes
    const peer = this.byPeer.get(key) ?? { runs: 0, bytes: 0 }
    peer.runs += runs
    peer.bytes += bytes
    if (peer.runs === 0) this.byPeer.delete(key)
    else this.byPeer.set(key, peer)
  }
}
