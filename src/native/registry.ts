/**
 * Which sync methods this platform has, and why not where it doesn't, from the port's table. A
 * method the platform lacks is refused with a reason, never silently replaced by another.
 */
import { nativePort } from './index.js'
import type { MethodName } from './methods.js'
import type { MethodRow } from './port.js'

export { isMethodName, methodNames, type MethodName } from './methods.js'

type Availability = { readonly available: true } | { readonly available: false; readonly reason: string }

/** Methods forced unavailable, for diagnosis and tests: PLUGCHECK_DISABLE_METHODS=open_sync,open_datasync */
function disabledByEnvironment(): Set<string> {
  const raw = process.env.PLUGCHECK_DISABLE_METHODS ?? ''
  return new Set(
    raw
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  )
}

/** The platform's row for a method, with PLUGCHECK_DISABLE_METHODS applied. */
export function methodRow(name: MethodName): MethodRow {
  const row = nativePort()
    .table()
    .methods.find((m) => m.name === name)!
  if (row.available && disabledByEnvironment().has(name))
    return { ...row, available: false, reason: `${name} is disabled by PLUGCHECK_DISABLE_METHODS` }
  return row
}

export function methodAvailability(name: MethodName): Availability {
  const row = methodRow(name)
  return row.available ? { available: true } : { available: false, reason: row.reason ?? `${name} is not available here` }
}
