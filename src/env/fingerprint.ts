/**
 * The environment a benchmark ran in, so that a figure can be judged: which kernel, which file
 * system (statfs magic and mount options), which block device and what that device says about its
 * write cache, and the boot id (a reboot between two runs changes it).
 *
 * Assumptions: Linux with /proc and /sys mounted. Everything here is best effort: a value the
 * system does not expose is null, never a guess. Nothing here throws for a missing file.
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { nativePort } from '../native/index.js'
import type { BlockDeviceInfo, Fingerprint } from './fingerprint-schema.js'

export type { BlockDeviceInfo, Fingerprint }

/** statfs.f_type values (linux/magic.h) for the file systems people benchmark on. */
const fileSystemNamesByMagic: ReadonlyMap<number, string> = new Map([
  [0xef53, 'ext2/ext3/ext4'],
  [0x58465342, 'xfs'],
  [0x9123683e, 'btrfs'],
  [0x2fc12fc1, 'zfs'],
  [0xf2f52010, 'f2fs'],
  [0xca451a4e, 'bcachefs'],
  [0x01021994, 'tmpfs'],
  [0x858458f6, 'ramfs'],
  [0x794c7630, 'overlay'],
  [0x65735546, 'fuse'],
  [0x6969, 'nfs'],
  [0xff534d42, 'cifs'],
  [0xfe534d42, 'smb2'],
  [0x00c36400, 'ceph'],
  [0x01021997, '9p'],
  [0x4d44, 'vfat'],
  [0x5346544e, 'ntfs'],
  [0x7366746e, 'ntfs3'],
  [0x2011bab0, 'exfat'],
  [0x3153464a, 'jfs'],
  [0x52654973, 'reiserfs'],
  [0x73717368, 'squashfs'],
])

/** File systems that live in memory: nothing on them survives a power cut. */
const memoryFileSystems: ReadonlySet<string> = new Set(['tmpfs', 'ramfs'])
const memoryMagics: ReadonlySet<number> = new Set([0x01021994, 0x858458f6])

/** Device stacks (dm on md on sd...) are followed this deep, no further. */
const maxDeviceDepth = 4

export interface MountEntry {
  readonly major: number
  readonly minor: number
  readonly mountPoint: string
  readonly mountOptions: readonly string[]
  readonly fsType: string
  readonly source: string
  readonly superOptions: readonly string[]
}

/** mountinfo escapes space, tab, newline and backslash as three octal digits. */
function unescapeMountField(text: string): string {
  return text.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)))
}

/** Parses /proc/self/mountinfo (proc(5)); malformed lines are skipped. */
export function parseMountInfo(text: string): MountEntry[] {
  const entries: MountEntry[] = []
  for (const line of text.split('\n')) {
    const fields = line.split(' ')
    const separator = fields.indexOf('-', 6)
    if (separator < 0 || fields.length < separator + 3) continue
    const numbers = /^(\d+):(\d+)$/.exec(fields[2] ?? '')
    if (!numbers) continue
    entries.push({
      major: Number(numbers[1]),
      minor: Number(numbers[2]),
      mountPoint: unescapeMountField(fields[4]!),
      mountOptions: fields[5]!.split(','),
      fsType: fields[separator + 1]!,
      source: unescapeMountField(fields[separator + 2]!),
      superOptions: (fields[separator + 3] ?? '').split(',').filter(Boolean),
    })
  }
  return entries
}

/** glibc's gnu_dev_major/gnu_dev_minor. */
export function splitDeviceNumber(dev: bigint): { major: number; minor: number } {
  const major = ((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn)
  const minor = (dev & 0xffn) | ((dev >> 12n) & ~0xffn)
  return { major: Number(major), minor: Number(minor) }
}

/** The mount holding absolutePath: same device numbers, longest mount point that prefixes the path. */
export function findMount(entries: readonly MountEntry[], major: number, minor: number, absolutePath: string): MountEntry | null {
  let best: MountEntry | null = null
  for (const entry of entries) {
    if (entry.major !== major || entry.minor !== minor) continue
    const prefix = entry.mountPoint.endsWith('/') ? entry.mountPoint : `${entry.mountPoint}/`
    if (absolutePath !== entry.mountPoint && !absolutePath.startsWith(prefix)) continue
    // Later lines are mounted on top of earlier ones: on a tie, the later one is what the path sees.
    if (best === null || entry.mountPoint.length >= best.mountPoint.length) best = entry
  }
  return best
}

function readTrimmed(file: string): string | null {
  try {
    const text = fs.readFileSync(file, 'utf8').trim()
    return text === '' ? null : text
  } catch {
    return null
  }
}

function readNumber(file: string): number | null {
  const text = readTrimmed(file)
  if (text === null) return null
  const value = Number(text)
  return Number.isFinite(value) ? value : null
}

function readFlag(file: string): boolean | null {
  const value = readNumber(file)
  return value === null ? null : value !== 0
}

function basenameOfLink(link: string): string | null {
  try {
    return path.basename(fs.readlinkSync(link))
  } catch {
    return null
  }
}

/** Describes the whole disk behind /sys/dev/block/MAJOR:MINOR (a partition is resolved to its disk). */
export function describeBlockDevice(major: number, minor: number, sysRoot = '/sys'): BlockDeviceInfo | null {
  let devicePath: string
  try {
    devicePath = fs.realpathSync(path.join(sysRoot, 'dev', 'block', `${major}:${minor}`))
  } catch {
    return null
  }
  const isPartition = fs.existsSync(path.join(devicePath, 'partition'))
  return describeDisk(isPartition ? path.dirname(devicePath) : devicePath, isPartition ? path.basename(devicePath) : null, 0)
}

function describeDisk(diskPath: string, partition: string | null, depth: number): BlockDeviceInfo {
  const queue = (name: string) => path.join(diskPath, 'queue', name)
  let underlying: BlockDeviceInfo[] = []
  if (depth < maxDeviceDepth) {
    try {
      underlying = fs
        .readdirSync(path.join(diskPath, 'slaves'))
        .sort()
        .map((name) => {
          const slavePath = fs.realpathSync(path.join(diskPath, 'slaves', name))
          const slaveIsPartition = fs.existsSync(path.join(slavePath, 'partition'))
          return describeDisk(slaveIsPartition ? path.dirname(slavePath) : slavePath, slaveIsPartition ? name : null, depth + 1)
        })
    } catch {
      underlying = []
    }
  }
  return {
    name: path.basename(diskPath),
    partition,
    model: readTrimmed(path.join(diskPath, 'device', 'model')),
    vendor: readTrimmed(path.join(diskPath, 'device', 'vendor')),
    // NVMe names it firmware_rev, SCSI and SATA (through libata) rev; virtio has neither.
    firmware: readTrimmed(path.join(diskPath, 'device', 'firmware_rev')) ?? readTrimmed(path.join(diskPath, 'device', 'rev')),
    driver: basenameOfLink(path.join(diskPath, 'device', 'driver')),
    writeCache: readTrimmed(queue('write_cache')),
    fua: readFlag(queue('fua')),
    rotational: readFlag(queue('rotational')),
    logicalBlockBytes: readNumber(queue('logical_block_size')),
    physicalBlockBytes: readNumber(queue('physical_block_size')),
    underlying,
  }
}

/** x86 guests see the "hypervisor" CPU flag; Xen guests have /sys/hypervisor/type. */
function runsUnderHypervisor(): boolean {
  const cpuinfo = readTrimmed('/proc/cpuinfo') ?? ''
  return /^flags\s*:.*\bhypervisor\b/m.test(cpuinfo) || readTrimmed('/sys/hypervisor/type') !== null
}

function distributionName(): string | null {
  const text = readTrimmed('/etc/os-release')
  if (text === null) return null
  const match = /^PRETTY_NAME="?([^"\n]*)"?$/m.exec(text)
  return match?.[1] ?? null
}

export function fileSystemNameForMagic(magic: number): string {
  return fileSystemNamesByMagic.get(magic) ?? 'unknown'
}

function bootIdOrNull(): string | null {
  try {
    return nativePort().bootId()
  } catch {
    return null
  }
}

/** What the native port says of the file system under a path (nativePort().fileSystemOf). */
export interface FileSystemFacts {
  readonly type: string
  readonly magic: number | null
  readonly inMemory: boolean
}

/**
 * Fingerprints the storage under filePath. fileSystem is what the native port read of it (statfs),
 * null where it could not; /proc and /sys add the mount and the device where they exist (Linux).
 */
export function collectFingerprint(filePath: string, fileSystem: FileSystemFacts | null): Fingerprint {
  const magic = fileSystem?.magic ?? null
  const absolutePath = path.resolve(filePath)
  const stat = fs.statSync(absolutePath, { bigint: true })
  const { major, minor } = splitDeviceNumber(stat.dev)
  let realPath = absolutePath
  try {
    realPath = fs.realpathSync(absolutePath)
  } catch {
    // keep the absolute path
  }
  const mounts = parseMountInfo(readTrimmed('/proc/self/mountinfo') ?? '')
  const mount = findMount(mounts, major, minor, realPath)

  // File systems with anonymous device numbers (btrfs, overlay) name their device as the mount source.
  let device = major === 0 ? null : describeBlockDevice(major, minor)
  if (device === null && mount !== null && mount.source.startsWith('/dev/')) {
    try {
      const sourceNumbers = splitDeviceNumber(fs.statSync(mount.source, { bigint: true }).rdev)
      if (sourceNumbers.major !== 0) device = describeBlockDevice(sourceNumbers.major, sourceNumbers.minor)
    } catch {
      device = null
    }
  }

  const type = mount?.fsType ?? (magic !== null ? fileSystemNameForMagic(magic) : (fileSystem?.type ?? 'unknown'))
  return {
    os: {
      platform: process.platform,
      kernel: os.release(),
      kernelVersion: os.version(),
      arch: os.arch(),
      distribution: distributionName(),
    },
    bootId: bootIdOrNull(),
    virtualMachine: runsUnderHypervisor(),
    target: {
      path: absolutePath,
      fileSystem: {
        type,
        magic: magic === null ? null : `0x${magic.toString(16)}`,
        mountPoint: mount?.mountPoint ?? null,
        source: mount?.source ?? null,
        mountOptions: [...(mount?.mountOptions ?? [])],
        superOptions: [...(mount?.superOptions ?? [])],
      },
      inMemory: (magic !== null && memoryMagics.has(magic)) || memoryFileSystems.has(type) || fileSystem?.inMemory === true,
    },
    device,
  }
}

/** True when the device (or any device under it) reports a volatile write cache. */
export function hasVolatileWriteCache(device: BlockDeviceInfo | null): boolean {
  if (device === null) return false
  return device.writeCache === 'write back' || device.underlying.some(hasVolatileWriteCache)
}

/** True when the device (or any device under it) is a rotating disk. */
export function isRotating(device: BlockDeviceInfo | null): boolean {
  if (device === null) return false
  return device.rotational === true || device.underlying.some(isRotating)
}
