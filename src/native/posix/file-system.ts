/**
 * What the POSIX port says of the machine and its file systems: a path's file system type (statfs,
 * laid out per system in constants.ts) and whether it lives in memory, and this boot's id (Linux
 * /proc, macOS kern.bootsessionuuid; the BSDs have none that is safe to use).
 */
import { readFileSync } from 'node:fs'
import type { NativePort } from '../port.js'
import type { PosixConstants, PosixOs } from './constants.js'
import { openFile, type Libc } from './libc.js'

/** File systems that live in memory, by the names the BSDs and Linux give them. */
const memoryFileSystems: ReadonlySet<string> = new Set(['tmpfs', 'ramfs', 'mfs'])
const memoryMagics: ReadonlySet<number> = new Set([0x01021994 /* TMPFS_MAGIC */, 0x858458f6 /* RAMFS_MAGIC */])

/** The port's fileSystemOf and bootId, on the C library loaded on first use (c) and the system's constants (k). */
export function fileSystemCalls(c: () => Libc, k: PosixConstants, os: PosixOs): Pick<NativePort, 'fileSystemOf' | 'bootId'> {
  return {
    fileSystemOf(path: string) {
      const lib = c()
      const layout = k.statfs
      if (layout === null || lib.fstatfs === null) return null
      let fd: number
      try {
        fd = openFile(lib, path, k.O_RDONLY | k.O_NONBLOCK)
      } catch {
        return null
      }
      try {
        const buf = Buffer.alloc(layout.bytes + 64)
        if ((lib.fstatfs(fd, buf) as number) !== 0) return null
        if (layout.kind === 'magic') {
          const magic = Number(buf.readBigInt64LE(layout.magicOffset))
          return { type: `0x${magic.toString(16)}`, magic, inMemory: memoryMagics.has(magic) }
        }
        const raw = buf.subarray(layout.nameOffset, layout.nameOffset + layout.nameBytes)
        const end = raw.indexOf(0)
        const type = raw.subarray(0, end < 0 ? raw.length : end).toString('latin1')
        if (!/^[A-Za-z0-9_.-]{1,15}$/.test(type)) return null
        return { type, magic: null, inMemory: memoryFileSystems.has(type) }
      } finally {
        lib.close(fd)
      }
    },

    bootId(): string | null {
      if (os === 'linux') {
        try {
          return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || null
        } catch {
          return null // no /proc: verify then cannot tell whether a reboot happened, and says so
        }
      }
      // macOS: kern.bootsessionuuid, a UUID made at each boot. The BSDs offer only kern.boottime,
      // which moves when the clock is stepped: no id rather than one that may change without a boot.
      const lib = c()
      if (os !== 'darwin' || lib.sysctlbyname === null) return null
      const out = Buffer.alloc(64)
      const length = Buffer.alloc(8)
      length.writeBigUInt64LE(BigInt(out.length))
      if ((lib.sysctlbyname('kern.bootsessionuuid', out, length, null, 0) as number) !== 0) return null
      const text = out.subarray(0, Number(length.readBigUInt64LE())).toString('latin1').replace(/\0+$/, '')
      return /^[0-9A-Fa-f-]{32,40}$/.test(text) ? text.toLowerCase() : null
    },
  }
}
