/**
 * Text for people: the environment first, then pg_test_fsync's tables in its layout (label column
 * of 30, "%13.3f ops/sec  %6.0f usecs/op", n/a right-aligned in 21), each row followed by its
 * latency percentiles, then what the figures mean. Pure functions: bench.ts decides when to print.
 */
import type { PlausibilityFlag, RowResult, SectionResult } from '../schema.js'
import type { BlockDeviceInfo, Fingerprint } from '../../env/fingerprint-schema.js'
import { formatSize } from '../../base/sizes.js'

const labelIndent = '        '
const labelWidth = 30

function formatUs(us: number): string {
  return us < 10 ? us.toFixed(1) : us.toFixed(0)
}

function describeDevice(device: BlockDeviceInfo, indent: string): string {
  const identity = [
    device.model,
    device.vendor === null ? null : `vendor ${device.vendor}`,
    device.firmware == null ? null : `firmware ${device.firmware}`,
    device.driver,
  ].filter((s): s is string => s !== null)
  const name = device.partition === null ? device.name : `${device.name} (partition ${device.partition})`
  const facts = [
    `write cache ${device.writeCache === null ? 'unknown' : `"${device.writeCache}"`}`,
    `fua ${device.fua === null ? 'unknown' : device.fua ? 1 : 0}`,
    `rotational ${device.rotational === null ? 'unknown' : device.rotational ? 1 : 0}`,
    `logical block ${device.logicalBlockBytes ?? 'unknown'} bytes`,
  ]
  let text = `${name}${identity.length > 0 ? ` [${identity.join(', ')}]` : ''}: ${facts.join(', ')}\n`
  if (device.writeCache === 'write back')
    text += `${indent}  a volatile write cache: data is durable only once a flush${device.fua ? ' or FUA write' : ''} reaches the device\n`
  for (const below of device.underlying) text += `${indent}  on ${describeDevice(below, `${indent}  `)}`
  return text
}

/** What the platform's method table says that bears on the figures: --direct, and what methods promise here. */
export interface PlatformFacts {
  readonly name: string
  readonly direct: string
  /** "fsync: on macOS this writes ..." per available method with a caveat, and the table's notes. */
  readonly caveats: readonly string[]
}

export function renderHeader(fingerprint: Fingerprint, secsPerTest: number, recordSizeBytes: number, platform: PlatformFacts): string {
  const { os, target, device } = fingerprint
  const fileSystem = target.fileSystem
  const pad = '             '
  let text = `plugcheck bench: ${target.path} (scratch file, ${formatSize(recordSizeBytes)} records, removed at exit)\n`
  text += `system       ${platform.name} ${os.kernel} ${os.arch}${os.distribution === null ? '' : `, ${os.distribution}`}; boot id ${fingerprint.bootId ?? 'unknown'}\n`
  text += `file system  ${fileSystem.type}${fileSystem.magic === null ? '' : ` (statfs magic ${fileSystem.magic})`}${fileSystem.source === null ? '' : ` from ${fileSystem.source}`}${fileSystem.mountPoint === null ? '' : ` on ${fileSystem.mountPoint}`}\n`
  if (fileSystem.mountOptions.length > 0 || fileSystem.superOptions.length > 0)
    text += `${pad}options ${fileSystem.mountOptions.join(',')}; ${fileSystem.superOptions.join(',') || '-'}\n`
  text += `device       ${device === null ? 'none (no block device behind this file system)\n' : describeDevice(device, pad)}`
  if (fingerprint.virtualMachine && device !== null)
    text += `${pad}(a virtual machine: these device facts are what the hypervisor chose to report)\n`
  if (target.inMemory) {
    text += `\nWARNING: ${target.path} is on ${fileSystem.type}, which lives in memory.\n`
    text += 'WARNING: NOTHING WRITTEN THERE SURVIVES A POWER CUT, whatever the sync method.\n'
    text += 'WARNING: these figures measure software overhead, not storage.\n'
  }
  text += `\n${secsPerTest} second${secsPerTest === 1 ? '' : 's'} per test\n`
  text += `direct I/O (the "direct" rows): ${platform.direct}\n`
  for (const caveat of platform.caveats) text += `note: ${caveat}\n`
  text += '(each row: ops/sec and usecs/op as pg_test_fsync prints them, then per-op latency in us)\n'
  return text
}

export function renderSectionTitle(title: string): string {
  return `\n${title}\n`
}

export function renderRowLabel(label: string): string {
  return `${labelIndent}${label.padEnd(labelWidth)}`
}

export function renderRowFigures(row: RowResult): string {
  if (row.status !== 'ok') return `${row.status.padStart(21)}  ${row.reason ?? ''}\n`
  const figures = `${row.opsPerSec!.toFixed(3).padStart(13)} ops/sec  ${row.usecsPerOp!.toFixed(0).padStart(6)} usecs/op`
  return `${figures}   p50 ${formatUs(row.latencyUsP50!).padStart(5)}  p99 ${formatUs(row.latencyUsP99!).padStart(6)}  max ${formatUs(row.latencyUsMax!).padStart(7)}\n`
}

export function renderFootnotes(footnotes: readonly string[]): string {
  return footnotes.map((note) => `${note}\n`).join('')
}

const flagHeadings: Record<PlausibilityFlag['kind'], string> = {
  'in-memory-file-system': 'not storage',
  'faster-than-flush': 'too fast',
  'indistinguishable-from-no-sync': 'no sync',
  'same-call': 'same call',
}

/** Beyond this many flags of one kind, the rest are listed on one "likewise" line. */
const maxFlagsInFull = 3
const lineWidth = 100

export function renderFlags(flags: readonly PlausibilityFlag[], sections: readonly SectionResult[]): string {
  const rowsById = new Map(sections.flatMap((section) => section.rows.map((row) => [row.id, { row, section }] as const)))
  const indent = ' '.repeat(15)
  let text = '\nPlausibility:\n'
  const measuredDurable = sections.some((section) => section.rows.some((row) => row.durable && row.status === 'ok'))
  if (!measuredDurable) {
    text += '  nothing to judge: no durable method was measured here.\n'
  } else if (!flags.some((flag) => flag.kind !== 'same-call')) {
    text += '  no durable method was faster than this device can plausibly flush. Speed cannot prove a flush\n'
    text += '  is honoured, though: only a plug test (plugcheck write, a power cut, plugcheck verify) can.\n'
  }
  for (const kind of Object.keys(flagHeadings) as PlausibilityFlag['kind'][]) {
    const ofKind = flags.filter((flag) => flag.kind === kind)
    ofKind.slice(0, maxFlagsInFull).forEach((flag, i) => {
      text += `  ${(i === 0 ? `${flagHeadings[kind]}:` : '').padEnd(12)} ${flag.message}\n`
    })
    const rest = ofKind
      .slice(maxFlagsInFull)
      .flatMap((flag) => flag.rowIds.map((id) => rowsById.get(id)).filter((entry) => entry !== undefined))
    if (rest.length === 0) continue
    const items = rest.map(
      ({ row, section }) =>
        `${row.label.trim().replace(/\s+/g, ' ')}${section.id === 'two-writes' ? ' (two writes)' : ''} ${formatUs(row.latencyUsP50 ?? Number.NaN)}`,
    )
    let line = `${indent}likewise (us/op, p50):`
    for (const item of items) {
      if (line.length + item.length + 2 > lineWidth) {
        text += `${line}\n`
        line = `${indent} `
      }
      line += ` ${item};`
    }
    text += `${line.slice(0, -1)}\n`
  }
  return text
}
