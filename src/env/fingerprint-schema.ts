/**
 * The environment fingerprint as it is stored and sent: what bench --json, write's announcement and
 * the report show about a machine (kernel, file system, block device stack). Every field is bounded.
 */
import { z } from 'zod'

export type BlockDeviceInfo = {
  name: string
  partition: string | null
  model: string | null
  vendor: string | null
  /** Absent in fingerprints from before it was collected. */
  firmware?: string | null | undefined
  driver: string | null
  writeCache: string | null
  fua: boolean | null
  rotational: boolean | null
  logicalBlockBytes: number | null
  physicalBlockBytes: number | null
  underlying: BlockDeviceInfo[]
}

/**
 * Bounds on what a fingerprint may hold: it crosses the network in a writer's announcement and is
 * stored and replayed by the listener, so every string, list and level of device stacking is capped.
 */
export const maxFingerprintStringLength = 4096
export const maxFingerprintListLength = 64
/** dm on md on partitions is three or four levels; nothing real nests this deep. */
export const maxDeviceStackDepth = 8
const boundedString = z.string().max(maxFingerprintStringLength)

/** A device with at most `depth` levels of devices under it. */
function blockDeviceSchemaOfDepth(depth: number): z.ZodType<BlockDeviceInfo> {
  return z.object({
    /** Kernel name, e.g. "vda", "nvme0n1", "dm-0". */
    name: boundedString,
    /** The partition the file system sits on, when it is one ("sda2"). */
    partition: boundedString.nullable(),
    model: boundedString.nullable(),
    vendor: boundedString.nullable(),
    /** The device's firmware revision (NVMe firmware_rev, SCSI/SATA rev); optional, so older fingerprints still validate. */
    firmware: boundedString.nullable().optional(),
    driver: boundedString.nullable(),
    /** queue/write_cache: "write back" is a volatile cache that each sync must flush. */
    writeCache: boundedString.nullable(),
    fua: z.boolean().nullable(),
    rotational: z.boolean().nullable(),
    logicalBlockBytes: z.number().int().positive().nullable(),
    physicalBlockBytes: z.number().int().positive().nullable(),
    /** Devices under a stacked one (dm, md), each described the same way. */
    underlying: depth === 0 ? z.array(z.never()).max(0) : z.array(blockDeviceSchemaOfDepth(depth - 1)).max(maxFingerprintListLength),
  })
}

export const blockDeviceSchema: z.ZodType<BlockDeviceInfo> = blockDeviceSchemaOfDepth(maxDeviceStackDepth)

export const fingerprintSchema = z.object({
  os: z.object({
    platform: boundedString,
    kernel: boundedString,
    kernelVersion: boundedString,
    arch: boundedString,
    distribution: boundedString.nullable(),
  }),
  bootId: boundedString.nullable(),
  /** A hypervisor was detected: device facts such as "rotational" are then whatever the host chose to say. */
  virtualMachine: z.boolean(),
  target: z.object({
    path: boundedString,
    fileSystem: z.object({
      /** From the mount table where known ("ext4"), else from the statfs magic. */
      type: boundedString,
      /** statfs f_type, "0xef53". */
      magic: boundedString.regex(/^0x[0-9a-f]+$/).nullable(),
      mountPoint: boundedString.nullable(),
      source: boundedString.nullable(),
      mountOptions: z.array(boundedString).max(maxFingerprintListLength),
      superOptions: z.array(boundedString).max(maxFingerprintListLength),
    }),
    /** tmpfs or ramfs: nothing there survives a power cut. */
    inMemory: z.boolean(),
  }),
  device: blockDeviceSchema.nullable(),
})
export type Fingerprint = z.infer<typeof fingerprintSchema>
