/**
 * verify's verdict rules, as tables (STYLE.md principle 12): a run's verdict from what its file
 * showed, a method's over its jobs (write --jobs N: one run per job), the group's over its methods,
 * and the exit code of each verdict.
 *
 * What a run showed, its finding, strongest first:
 *   file-lost     it acknowledged records, and its superblock is gone, damaged or another run's
 *   records-lost  an acknowledged record is lost, torn or corrupt
 *   lost-running  the same, seen by the writer while the run was going (it ended storage-lost): the
 *                 storage lost them with no cut, so a control's losses show nothing about a cut
 *   kept          every acknowledged record survived
 *   idle          nothing was acknowledged (the write stopped before its first record, or was cut before its first ack)
 *
 * The jobs of one method test it together on one machine and one cut, so a method is judged by the
 * strongest finding of its runs: a job that acknowledged nothing is excused whenever another job of
 * the method acknowledged something, tested method and control alike, and one job's control losing
 * records shows the cut was real for the whole group.
 */
import { assert } from '../../base/assert.js'
import { exitCodes } from '../../base/errors.js'

/** A run's verdict: pass, fail (an acknowledged record lost, torn or corrupt) or inconclusive. */
export type RunVerdict = 'pass' | 'fail' | 'inconclusive'

export type Role = 'tested' | 'control'
export type Finding = 'file-lost' | 'records-lost' | 'lost-running' | 'kept' | 'idle'

/** Strongest first: a method's finding is the first of these that any of its runs showed. */
// lost-running before records-lost: once a run ended storage-lost the write stopped with no cut,
// so no control's losses in the group can show one.
export const findings: readonly Finding[] = ['file-lost', 'lost-running', 'records-lost', 'kept', 'idle']

export const verdictTable: Readonly<Record<Role, Readonly<Record<Finding, RunVerdict>>>> = {
  // A tested method promised that what it acknowledged survives: any loss fails it.
  tested: { 'file-lost': 'fail', 'records-lost': 'fail', 'lost-running': 'fail', kept: 'pass', idle: 'inconclusive' },
  // The control's file, like every file, was created and fsynced before any record: losing it is a
  // failure (and shows nothing about the cut). Its unsynced records lost show the cut was real;
  // all of them kept, or none written, show the cut tested nothing.
  // Records it lost while the run was going (no cut: the writer stopped on seeing it) show no cut either.
  control: { 'file-lost': 'fail', 'records-lost': 'pass', 'lost-running': 'inconclusive', kept: 'inconclusive', idle: 'inconclusive' },
}

/** The group's verdict is the first of these that any of its methods has. */
export const groupVerdictOrder: readonly RunVerdict[] = ['fail', 'inconclusive', 'pass']

export const verdictExitCodes: Readonly<Record<RunVerdict, number>> = {
  pass: exitCodes.ok,
  fail: exitCodes.lossFound,
  inconclusive: exitCodes.inconclusive,
}

export function roleOf(method: string): Role {
  return method === 'none' ? 'control' : 'tested'
}

/** What a run showed, as the finding rows read it. */
export interface RunFacts {
  /** It acknowledged records. */
  readonly acked: boolean
  /** Its superblock is its own and intact. */
  readonly superblockValid: boolean
  /** A lost, torn or corrupt acknowledged record. */
  readonly badRecords: boolean
  /** Its writer ended it storage-lost (it saw the loss while the run was going). */
  readonly lostWhileRunning: boolean
}

export interface FindingRow {
  /** The facts the row needs; a fact not named is any. */
  readonly when: Partial<RunFacts>
  readonly finding: Finding
  readonly why: string
}

/** A run's finding: the first row whose facts all hold. */
export const findingRows: readonly FindingRow[] = [
  { when: { acked: false }, finding: 'idle', why: 'nothing acknowledged: nothing can have been lost, whatever the file holds' },
  { when: { superblockValid: false }, finding: 'file-lost', why: 'the file was created and fsynced before any record' },
  { when: { badRecords: false }, finding: 'kept', why: 'every acknowledged record survived' },
  { when: { lostWhileRunning: true }, finding: 'lost-running', why: 'the storage lost them with no cut' },
  { when: { lostWhileRunning: false }, finding: 'records-lost', why: 'lost, torn or corrupt after the cut' },
]

export function findingOfFacts(facts: RunFacts): Finding {
  const row = findingRows.find((r) => (Object.keys(r.when) as (keyof RunFacts)[]).every((k) => r.when[k] === facts[k]))
  assert(row !== undefined, () => `no finding row for ${JSON.stringify(facts)}`)
  return row.finding
}

/** What a run showed: acked, its lost + torn + corrupt records, and whether its superblock is its own and intact. */
export function findingOf(acked: number, badRecords: number, superblockValid: boolean, lostWhileRunning = false): Finding {
  return findingOfFacts({ acked: acked > 0, superblockValid, badRecords: badRecords > 0, lostWhileRunning })
}

export function strongestFinding(of: readonly Finding[]): Finding {
  return findings.find((f) => of.includes(f)) ?? 'idle'
}

export function runVerdict(role: Role, finding: Finding): RunVerdict {
  return verdictTable[role][finding]
}

/** A run of a report, as the rules see it. */
export interface JudgedRun {
  readonly method: string
  readonly direct: boolean
  readonly role: Role
  readonly acked: number
  readonly lost: number
  readonly torn: number
  readonly corrupt: number
  readonly superblock: { readonly kind: string }
  /** The end its writer reported (null: none). */
  readonly ended: string | null
}

export function findingOfRun(r: JudgedRun): Finding {
  return findingOf(r.acked, r.lost + r.torn + r.corrupt, r.superblock.kind === 'valid', r.ended === 'storage-lost')
}

/** A method of the group (with --direct its own), its runs (one per job) and what they showed together. */
export interface MethodJudgement<T extends JudgedRun> {
  readonly label: string
  readonly role: Role
  readonly runs: readonly T[]
  readonly finding: Finding
  readonly verdict: RunVerdict
}

export function methodLabel(r: Pick<JudgedRun, 'method' | 'direct'>): string {
  return `${r.method}${r.direct ? ' --direct' : ''}`
}

/** The group's methods in the order their runs come, each judged over its jobs. */
export function judgeMethods<T extends JudgedRun>(runs: readonly T[]): MethodJudgement<T>[] {
  const labels = [...new Set(runs.map(methodLabel))]
  return labels.map((label) => {
    const of = runs.filter((r) => methodLabel(r) === label)
    const role = of[0]!.role
    const finding = strongestFinding(of.map(findingOfRun))
    return { label, role, runs: of, finding, verdict: runVerdict(role, finding) }
  })
}

export function groupVerdictOf(methodVerdicts: readonly RunVerdict[]): RunVerdict {
  return groupVerdictOrder.find((v) => methodVerdicts.includes(v)) ?? 'inconclusive'
}

/** The verdict of a whole group: its methods judged over their jobs, then together. */
export function groupVerdict(runs: readonly JudgedRun[]): RunVerdict {
  return groupVerdictOf(judgeMethods(runs).map((m) => m.verdict))
}
