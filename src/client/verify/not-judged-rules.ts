/**
 * When verify judges nothing, as a table (STYLE.md principle 12): the checks that can excuse a run
 * from judging, in the order they are asked, and for which lookup each is asked. The first check that
 * finds something gives the reason; none finding anything means the runs are judged.
 *
 *   file-changed        the writer saw its file deleted, replaced or truncated during the run
 *   conflicting-claims  two writer groups live on the path, or the group was announced from several
 *                       addresses or machines, or the file names a run announced from another address
 *   still-running       the listener holds the writer's connection open (not after a reboot of this machine)
 *   replaced-later      the file holds a run written after the judged one that the listener does not list as earlier
 *   superseded-by       (--run X) a later group claims the path and the file no longer holds X
 *
 * The lookup: `latest` is the default (the listener's latest group for this host and path), `chosen`
 * is --run. With --run the operator has chosen the run, so claims by others do not stop it, and a
 * later group on the path means X was superseded rather than replaced.
 */
import { exitCodes } from '../../base/errors.js'

export type Lookup = 'latest' | 'chosen'
export const lookups: readonly Lookup[] = ['latest', 'chosen']

export type NotJudgedCheck = 'file-changed' | 'conflicting-claims' | 'still-running' | 'replaced-later' | 'superseded-by'
export const notJudgedChecks: readonly NotJudgedCheck[] = [
  'file-changed',
  'conflicting-claims',
  'still-running',
  'replaced-later',
  'superseded-by',
]

export interface NotJudgedRule {
  readonly check: NotJudgedCheck
  readonly lookups: readonly Lookup[]
  readonly why: string
}

/** Asked in this order; the first that finds something decides. */
export const notJudgedRules: readonly NotJudgedRule[] = [
  // First whatever the lookup: what is missing was taken by something else, not lost by the storage.
  { check: 'file-changed', lookups: ['latest', 'chosen'], why: 'the file was changed by something other than plugcheck during the run' },
  // Before still-running: two live writers are a conflict, whichever of them is still writing.
  { check: 'conflicting-claims', lookups: ['latest'], why: 'others claim the path; with --run the operator has chosen' },
  { check: 'still-running', lookups: ['latest', 'chosen'], why: 'judging a file while it is written sees half-written records' },
  { check: 'replaced-later', lookups: ['latest'], why: 'a cut that loses a creation leaves an older run, never a later one' },
  { check: 'superseded-by', lookups: ['chosen'], why: 'a later group took the path from the chosen run' },
]

/** A not-judged report is no verdict on the storage: verify exits as for a configuration to fix. */
export const notJudgedExitCode = exitCodes.usage

/** The checks asked for this lookup, in order. */
export function checksFor(lookup: Lookup): NotJudgedCheck[] {
  return notJudgedRules.filter((rule) => rule.lookups.includes(lookup)).map((rule) => rule.check)
}

/** The first of the lookup's checks whose finding is not null (each asked only if those before found nothing), or null. */
export function firstNotJudged<T>(lookup: Lookup, finding: (check: NotJudgedCheck) => T | null): T | null {
  for (const check of checksFor(lookup)) {
    const found = finding(check)
    if (found !== null) return found
  }
  return null
}
