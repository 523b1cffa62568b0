/**
 * The device under a campaign, as its runs' fingerprints describe it: each property's distinct values,
 * most frequent first, so a campaign whose runs disagree (another disk, another kernel) shows it.
 */
import type { Fingerprint, BlockDeviceInfo } from '../env/fingerprint-schema.js'
import type { RunRecord } from './inputs.js'
import type { DeviceReport } from './schema.js'

/** The device under test as its writers described it (at write time; the verifier's view as a fallback). */
export function deviceReport(records: readonly RunRecord[]): DeviceReport {
  const tally = {
    hosts: new Tally<string>(),
    paths: new Tally<string>(),
    model: new Tally<string>(),
    firmware: new Tally<string>(),
    writeCache: new Tally<string>(),
    fileSystem: new Tally<string>(),
    kernel: new Tally<string>(),
    virtualMachine: new Tally<boolean>(),
  }
  for (const { summary, run } of records) {
    tally.hosts.add(summary.host)
    tally.paths.add(summary.path)
    const fingerprint: Fingerprint | null = run.writer?.fingerprint ?? summary.verdict?.fingerprint ?? null
    if (fingerprint === null) continue
    const devices = flatten(fingerprint.device)
    const named = devices.find((d) => d.model !== null || d.vendor !== null)
    if (named !== undefined)
      tally.model.add(
        [named.vendor, named.model]
          .filter((s) => s !== null && s.trim() !== '')
          .map((s) => s!.trim())
          .join(' '),
      )
    const firmware = devices.map((d) => (d as { firmware?: unknown }).firmware).find((f): f is string => typeof f === 'string' && f !== '')
    if (firmware !== undefined) tally.firmware.add(firmware)
    const cache = devices.find((d) => d.writeCache !== null)
    if (cache !== undefined) tally.writeCache.add(`${cache.writeCache}${cache.fua === true ? ', FUA' : ''} (${cache.name})`)
    const fs = fingerprint.target.fileSystem
    tally.fileSystem.add(
      `${fs.type}${fs.mountPoint === null ? '' : ` on ${fs.mountPoint}`}${fingerprint.target.inMemory ? ' (in memory)' : ''}`,
    )
    tally.kernel.add(`${fingerprint.os.platform} ${fingerprint.os.kernel}`)
    tally.virtualMachine.add(fingerprint.virtualMachine)
  }
  return {
    hosts: tally.hosts.values(),
    paths: tally.paths.values(),
    model: tally.model.values(),
    firmware: tally.firmware.values(),
    writeCache: tally.writeCache.values(),
    fileSystem: tally.fileSystem.values(),
    kernel: tally.kernel.values(),
    virtualMachine: tally.virtualMachine.values(),
  }
}

/** A device and the devices under it, depth first (bounded by the fingerprint schema's stacking limit). */
function flatten(device: BlockDeviceInfo | null): BlockDeviceInfo[] {
  if (device === null) return []
  return [device, ...device.underlying.flatMap((d) => flatten(d))]
}

class Tally<T> {
  private readonly counts = new Map<T, number>()
  add(value: T): void {
    this.counts.set(value, (this.counts.get(value) ?? 0) + 1)
  }
  /** Distinct values, most frequent first. */
  values(): T[] {
    return [...this.counts.entries()].sort((a, b) => b[1] - a[1]).map(([v]) => v)
  }
}
