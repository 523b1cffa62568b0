/**
 * The listener's descriptors against the process's limit, checked before it listens. Everything the
 * listener may hold at once is bounded (served connections, connections waiting for hello, closed
 * ones lingering so their peer reads the error frame) plus a margin for the rest (Node's own ~30:
 * stdio, the event loop, libuv's threads, the listening socket; the store's lock, journal and commit
 * lanes; the events file; a campaign's files). A soft limit below that sum would make a commit fail
 * with EMFILE under a flood of connections, ending honest runs: it is raised where the hard limit
 * allows, else the listener refuses to start, naming both numbers and the flags that lower the sum.
 */
import { nativePort, type DescriptorLimit } from '../../native/index.js'
import { describeSystemError, usageError } from '../../base/errors.js'

/** Descriptors for everything that is not a connection (see above). */
export const descriptorMarginCount = 64

export interface DescriptorBounds {
  readonly maxConnections: number
  readonly maxPendingHandshakes: number
  readonly maxLingering: number
}

export function descriptorsNeeded(bounds: DescriptorBounds): number {
  return bounds.maxConnections + bounds.maxPendingHandshakes + bounds.maxLingering + descriptorMarginCount
}

export type DescriptorDecision =
  /** Windows: no such limit. */
  | { readonly action: 'no-limit' }
  | { readonly action: 'fits' }
  | { readonly action: 'raise'; readonly toSoft: number }
  | { readonly action: 'refuse' }

/**
 * | limit                  | decision                |
 * | ---------------------- | ----------------------- |
 * | none (Windows)         | no-limit                |
 * | soft >= needed         | fits                    |
 * | soft < needed <= hard  | raise the soft to needed|
 * | hard < needed          | refuse to start         |
 */
export function decideDescriptors(needed: number, limit: DescriptorLimit | null): DescriptorDecision {
  if (limit === null) return { action: 'no-limit' }
  if (limit.soft >= needed) return { action: 'fits' }
  if (limit.hard >= needed) return { action: 'raise', toSoft: needed }
  return { action: 'refuse' }
}

/** The sum, spelled out with the flags that set each part. */
export function describeNeed(bounds: DescriptorBounds): string {
  return (
    `${descriptorsNeeded(bounds)} descriptors at once (--max-connections ${bounds.maxConnections} + --max-pending-hellos ${bounds.maxPendingHandshakes}` +
    ` + ${bounds.maxLingering} closing connections + ${descriptorMarginCount} for its store and Node)`
  )
}

export const descriptorHint =
  'lower --max-connections or --max-pending-hellos, or raise the hard limit (ulimit -Hn as root, LimitNOFILE= in a systemd unit)'

/** Raises the soft limit to fit the bounds (saying so on log), or throws a usage error naming both numbers. */
export function fitDescriptorLimit(bounds: DescriptorBounds, log?: (line: string) => void): void {
  const port = nativePort()
  const needed = descriptorsNeeded(bounds)
  const limit = port.descriptorLimit()
  const decision = decideDescriptors(needed, limit)
  if (decision.action === 'no-limit' || decision.action === 'fits') return
  const { soft, hard } = limit!
  if (decision.action === 'refuse') {
    throw usageError(
      `the listener may hold ${describeNeed(bounds)}, but this process may open at most ${hard} (its hard limit; soft limit ${soft})`,
      descriptorHint,
    )
  }
  try {
    port.setDescriptorSoftLimit(decision.toSoft)
  } catch (error) {
    throw usageError(
      `the listener may hold ${describeNeed(bounds)}, but could not raise this process's descriptor limit from ${soft} to ${decision.toSoft} (hard limit ${hard}): ${describeSystemError(error)}`,
      descriptorHint,
    )
  }
  log?.(
    `plugcheck: raised the descriptor limit from ${soft} to ${decision.toSoft} (hard limit ${hard}): the listener may hold ${describeNeed(bounds)}`,
  )
}
