/**
 * Which new runs the listener takes: bounds on runs and bytes on record, per peer and in total, and a
 * free-space reserve on the disk of --dir. Checked at each announcement only: a live run keeps
 * recording past every bound (its acks are the evidence of a test under way), so bytes on record may
 * grow past a byte bound and the free space below the reserve until live runs end.
 *
 * A peer is its address; IPv6 peers by their /64, which one machine or one stranger usually holds whole
 * (bounding each of its 2^64 addresses alone would bound nothing).
 */
import { statfs } from 'node:fs/promises'
import { performance } from 'node:perf_hooks'
import { peerKey } from '../../protocol/endpoint.js'
import type { StoreUsage } from '../../store/run-map.js'

export const defaultMaxRuns = 100_000
export const defaultMaxRunsPerPeer = 10_000
/** The reserve when --reserve is not given: the smaller of these (a small disk keeps 5 %, a large one 1 GiB). */
export const defaultReserveBytes = 1024 ** 3
export const defaultReservePercent = 5
/** A statfs answer is reused this long: announcements cost no syscall each, and a full disk is seen within a second. */
export const statfsMaxAgeMs = 1_000

export interface QuotaLimits {
  readonly maxRuns: number
  readonly maxRunsPerPeer: number
  /** null: no bound. */
  readonly maxStoreBytes: number | null
  readonly maxStoreBytesPerPeer: number | null
}

/** --reserve: bytes, or a percentage of the file system's size. */
export type Reserve = { readonly bytes: number } | { readonly percent: number }

/** Runs and bytes on record for the peer's key (every address of an IPv6 /64 together): one lookup. */
function usageOfPeer(usage: StoreUsage, peer: string): { runs: number; bytes: number } {
  return usage.ofPeer(peerKey(peer))
}

interface Bound {
  readonly flag: string
  readonly limit: (l: QuotaLimits) => number | null
  readonly used: (total: { runs: number; bytes: number }, peer: { runs: number; bytes: number }) => number
  readonly says: (used: number, limit: number, peer: string) => string
}

/** The bounds, in the order they are checked: the first one reached refuses the run. */
const bounds: readonly Bound[] = [
  {
    flag: '--max-runs-per-peer',
    limit: (l) => l.maxRunsPerPeer,
    used: (_, p) => p.runs,
    says: (n, max, peer) => `it holds ${count(n)} runs from ${peer}, its bound per peer is ${count(max)}`,
  },
  {
    flag: '--max-runs',
    limit: (l) => l.maxRuns,
    used: (t) => t.runs,
    says: (n, max) => `it holds ${count(n)} runs, its bound is ${count(max)}`,
  },
  {
    flag: '--max-store-bytes-per-peer',
    limit: (l) => l.maxStoreBytesPerPeer,
    used: (_, p) => p.bytes,
    says: (n, max, peer) => `the runs from ${peer} take ${formatBytes(n)}, its bound per peer is ${formatBytes(max)}`,
  },
  {
    flag: '--max-store-bytes',
    limit: (l) => l.maxStoreBytes,
    used: (t) => t.bytes,
    says: (n, max) => `its runs take ${formatBytes(n)}, its bound is ${formatBytes(max)}`,
  },
]

/**
 * Why a new run from peer is refused, or undefined when it is taken. A bound is reached when one more
 * run would exceed it (runs), or when the bytes on record already fill it (a new run's size is unknown).
 */
export function quotaRefusal(usage: StoreUsage, peer: string, limits: QuotaLimits): string | undefined {
  const peerUsage = usageOfPeer(usage, peer)
  for (const bound of bounds) {
    const limit = bound.limit(limits)
    if (limit === null) continue
    const used = bound.used(usage.total, peerUsage)
    if (used >= limit) {
      return `the listener takes no new runs: ${bound.says(used, limit, peerKey(peer))} (${bound.flag}); live runs keep recording. Ask its operator to prune ended runs (plugcheck runs --prune) or raise ${bound.flag}`
    }
  }
  return undefined
}

/** "1.5 GiB", "300 KiB", "12 bytes": a figure the operator reads (sizes.ts's formatSize shows exact multiples only, up to GiB). */
export function formatBytes(bytes: number): string {
  for (const [unit, size] of [
    ['TiB', 1024 ** 4],
    ['GiB', 1024 ** 3],
    ['MiB', 1024 ** 2],
    ['KiB', 1024],
  ] as const) {
    if (bytes >= size) return bytes % size === 0 ? `${bytes / size} ${unit}` : `${(bytes / size).toFixed(1)} ${unit}`
  }
  return `${bytes} bytes`
}

function count(n: number): string {
  return n.toLocaleString('en-US')
}

/**
 * The free space of --dir against the reserve, from a statfs at most about statfsMaxAgeMs old: the
 * check itself is synchronous on the last answer, and a stale answer starts one asynchronous statfs
 * whose result the next announcements use (never a syscall per hello, never one on the main thread).
 * A failing statfs refuses nothing: the reserve guards the disk, and a file system that cannot say
 * its free space fails the runs' own writes if it is full.
 */
export class ReserveCheck {
  private checkedPerfMs = -Infinity
  private last: { freeBytes: number; sizeBytes: number } | undefined
  private inFlight: Promise<void> | undefined
  private timer: NodeJS.Timeout | undefined

  constructor(
    private readonly dir: string,
    private readonly reserve: Reserve | undefined,
  ) {}

  /** The reserve in bytes on a file system of sizeBytes. */
  reserveBytes(sizeBytes: number): number {
    const r = this.reserve
    if (r === undefined) return Math.min(defaultReserveBytes, Math.floor((sizeBytes * defaultReservePercent) / 100))
    return 'bytes' in r ? r.bytes : Math.floor((sizeBytes * r.percent) / 100)
  }

  /** Why a new run is refused for want of free space, or undefined. */
  refusal(): string | undefined {
    if (performance.now() - this.checkedPerfMs >= statfsMaxAgeMs) void this.refresh()
    if (this.last === undefined) return undefined
    const { freeBytes, sizeBytes } = this.last
    const reserve = this.reserveBytes(sizeBytes)
    if (freeBytes >= reserve) return undefined
    return `the listener takes no new runs: its disk has ${formatBytes(freeBytes)} free, under the reserve of ${formatBytes(reserve)} (--reserve); live runs keep recording. Ask its operator to free space (plugcheck runs --prune) or lower --reserve`
  }

  /**
   * Refreshes the answer every statfsMaxAgeMs from now on (until stop): the first announcement after
   * a quiet spell is judged on the free space of now, not on a reading taken before the disk filled.
   */
  watch(): void {
    this.timer ??= setInterval(() => void this.refresh(), statfsMaxAgeMs).unref()
  }

  stop(): void {
    clearInterval(this.timer)
    this.timer = undefined
  }

  /** Why every new run will be refused whatever is freed (a reserve of the whole disk or more), or undefined. */
  refusesAll(): string | undefined {
    if (this.last === undefined) return undefined
    const reserve = this.reserveBytes(this.last.sizeBytes)
    if (reserve < this.last.sizeBytes) return undefined
    return `--reserve ${formatBytes(reserve)} is the whole of ${this.dir}'s file system (${formatBytes(this.last.sizeBytes)}) or more: every new run will be refused`
  }

  /** One statfs at a time; resolves when the answer is in. */
  refresh(): Promise<void> {
    this.inFlight ??= (async () => {
      try {
        const s = await statfs(this.dir)
        // bavail: what an unprivileged writer may still use (root's own reserve is not free space).
        this.last = { freeBytes: s.bavail * s.bsize, sizeBytes: s.blocks * s.bsize }
      } catch {
        this.last = undefined
      }
      this.checkedPerfMs = performance.now()
    })().finally(() => (this.inFlight = undefined))
    return this.inFlight
  }
}
