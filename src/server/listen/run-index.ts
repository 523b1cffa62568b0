/** The listener's indexes of the runs its connections own, by host and path and by host (listener.ts). */

/** Run ids by a key (a host, or a host and path); empty sets are dropped, so memory follows the live runs. */
export class RunIndex {
  private readonly byKey = new Map<string, Set<string>>()
  private static readonly none: ReadonlySet<string> = new Set()

  of(key: string): ReadonlySet<string> {
    return this.byKey.get(key) ?? RunIndex.none
  }

  add(key: string, runId: string): void {
    const runIds = this.byKey.get(key)
    if (runIds === undefined) this.byKey.set(key, new Set([runId]))
    else runIds.add(runId)
  }

  delete(key: string, runId: string): void {
    const runIds = this.byKey.get(key)
    if (runIds === undefined) return
    runIds.delete(runId)
    if (runIds.size === 0) this.byKey.delete(key)
  }
}

/** A host and path as one key (a NUL appears in neither). */
export function pathKey(host: string, requestedPath: string): string {
  return `${host}\0${requestedPath}`
}
