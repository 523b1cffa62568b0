/**
 * Which sync methods exist on which platform, and why not where they don't. A method the platform
 * lacks is refused with a reason, never silently replaced by another.
 *
 * The native layer is implemented for Linux; on other platforms every method is refused with that reason.
 */
import { methodImpls } from './methods/index.js'
import { methodNames, type MethodName, type SyncMethodImpl } from './methods/types.js'

export { methodNames, type MethodName, type SyncMethodImpl }

type Availability = { readonly available: true } | { readonly available: false; readonly reason: string }

const notYet = (platform: string): Availability => ({
  available: false,
  reason: `plugcheck's native layer supports Linux only so far, not ${platform}`,
})

const linuxTable: Record<MethodName, Availability> = {
  fsync: { available: true },
  fdatasync: { available: true },
  open_sync: { available: true },
  open_datasync: { available: true },
  fsync_writethrough: {
    available: false,
    reason: 'Linux has no write-through flush call (it is macOS F_FULLFSYNC or Windows FlushFileBuffers); on Linux fsync already asks the device to flush its cache',
  },
  pwritev2_dsync: { available: true },
  none: { available: true },
}

/** Methods forced unavailable, for diagnosis and tests: PLUGCHECK_DISABLE_METHODS=open_sync,open_datasync */
function disabledByEnvironment(): Set<string> {
  const raw = process.env.PLUGCHECK_DISABLE_METHODS ?? ''
  return new Set(raw.split(',').map((s) => s.trim()).filter(Boolean))
}

export function isMethodName(name: string): name is MethodName {
  return (methodNames as readonly string[]).includes(name)
}

export function methodAvailability(name: MethodName, platform: NodeJS.Platform = process.platform): Availability {
  if (disabledByEnvironment().has(name)) {
    return { available: false, reason: `${name} is disabled by PLUGCHECK_DISABLE_METHODS` }
  }
  if (platform !== 'linux') return notYet(platform)
  return linuxTable[name]
}

/** The implementation; call only after methodAvailability said yes. */
export function methodImpl(name: MethodName): SyncMethodImpl {
  const availability = methodAvailability(name)
  if (!availability.available) throw new Error(`methodImpl(${name}) on an unavailable method`)
  return methodImpls[name as Exclude<MethodName, 'fsync_writethrough'>]
}
