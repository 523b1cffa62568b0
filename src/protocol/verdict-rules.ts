/**
 * Whether a stored verdict agrees with its own counts and with the run it is about: checked when the
 * listener accepts a verifier's verdict (a disagreement is a protocol error), when it reads
 * verdict.msgpack back (a disagreement is damage: a warning, the verdict not shown), and by the report
 * for every verdict it shows. A verdict is a claim made over the network; a "pass" over 3,270 lost
 * records must never reach `runs` or the report.
 *
 * The rules follow verify's judging (src/client/verify/judge.ts), per run:
 *   acked = intact + lost + torn + corrupt + superseded + interrupted   (verifiers that send the last
 *           two; without them, the first four may not exceed acked)
 *   bad   = lost + torn + corrupt
 * and per role (the method `none` is the control, every other method is tested) and verdict, the
 * table below. The superblock's state is known only from verifiers that send superblockValid; without
 * it, a fail must rest on a bad record (a lost file loses every record).
 */
import type { StoredVerdict } from './messages.js'

type Role = 'tested' | 'control'
type Verdict = StoredVerdict['verdict']

interface Facts {
  readonly acked: number
  readonly bad: number
  /** intact + bad: the records the verdict says it judged. */
  readonly judged: number
  /** true: the run's superblock; false: missing, damaged or another run's; undefined: not said. */
  readonly superblock: boolean | undefined
}

interface Rule {
  readonly holds: (f: Facts) => boolean
  readonly needs: string
}

const notJudged: Rule = { holds: (f) => f.judged === 0, needs: 'a run that was not judged has no judged records' }

/** What each verdict needs, per role (judge.ts decides verdicts the same way). */
const verdictTable: Record<Role, Record<Verdict, Rule>> = {
  tested: {
    pass: {
      holds: (f) => f.acked > 0 && f.bad === 0 && f.superblock !== false,
      needs: "a pass needs acknowledged records, none lost, torn or corrupt, and the run's superblock",
    },
    fail: {
      holds: (f) => f.acked > 0 && (f.bad > 0 || f.superblock === false),
      needs: 'a fail needs a lost, torn or corrupt acknowledged record, or a lost superblock',
    },
    inconclusive: { holds: (f) => f.acked === 0, needs: 'a tested method is inconclusive only when nothing was acknowledged' },
    'not-judged': notJudged,
  },
  control: {
    pass: {
      holds: (f) => f.acked > 0 && f.bad > 0 && f.superblock !== false,
      needs: 'the control passes only by losing records of its own file',
    },
    fail: {
      holds: (f) => f.acked > 0 && (f.superblock === false || (f.superblock === undefined && f.bad > 0)),
      needs: 'the control fails only when its file (its superblock) was lost',
    },
    // Losses the writer saw while the run was going (it ended storage-lost) show no cut either.
    inconclusive: {
      holds: (f) => f.acked === 0 || f.superblock !== false,
      needs: 'the control is inconclusive only when its file survived',
    },
    'not-judged': notJudged,
  },
}

export function roleOf(method: string): Role {
  return method === 'none' ? 'control' : 'tested'
}

/**
 * What makes the verdict impossible for a run of this method whose listener holds acks 1..ackedThroughSeq
 * (a phrase completing "the verdict ..."), or undefined when it agrees. ended: the run's acks are final
 * (it ended, or its writer is gone); a verdict that judged it then counted every one of them.
 */
export function verdictDisagreement(result: StoredVerdict, method: string, ackedThroughSeq: number, ended = false): string | undefined {
  const bad = result.lost + result.torn + result.corrupt
  const facts: Facts = { acked: result.acked, bad, judged: result.intact + bad, superblock: result.superblockValid }
  return (
    countsDisagreement(result, ackedThroughSeq, ended) ??
    rangesDisagreement(result, bad) ??
    verdictTableDisagreement(result, roleOf(method), facts)
  )
}

function countsDisagreement(r: StoredVerdict, ackedThroughSeq: number, ended: boolean): string | undefined {
  if (r.acked > ackedThroughSeq) return `counts ${r.acked} acknowledged records, the listener holds ${ackedThroughSeq}`
  // verify judges a run only once its acks are final, and counts each of them (judge.ts: acked is the
  // last acknowledged seq); a judged verdict over fewer would hide the acks it left out.
  if (ended && r.verdict !== 'not-judged' && r.acked < ackedThroughSeq) {
    return `counts ${r.acked} acknowledged records, the listener holds ${ackedThroughSeq} for the run, which has ended (a judged verdict counts every one)`
  }
  const judged = r.intact + r.lost + r.torn + r.corrupt
  if (r.superseded !== undefined && r.interrupted !== undefined) {
    const total = judged + r.superseded + r.interrupted
    if (total !== r.acked)
      return `counts intact, lost, torn, corrupt, superseded and interrupted records that add up to ${total}, not to the ${r.acked} acknowledged`
  } else if (judged > r.acked) {
    return `counts intact, lost, torn and corrupt records that add up to ${judged}, more than the ${r.acked} acknowledged`
  }
  return undefined
}

function rangesDisagreement(r: StoredVerdict, bad: number): string | undefined {
  let coveredSeqs = 0
  let previousToSeq = 0
  for (const [fromSeq, toSeq] of r.lostRanges) {
    if (fromSeq > toSeq || toSeq > r.acked) return `has lost range ${fromSeq}-${toSeq}, not within the acknowledged seqs 1-${r.acked}`
    if (fromSeq <= previousToSeq) return `has lost range ${fromSeq}-${toSeq} overlapping or before the range before it`
    coveredSeqs += toSeq - fromSeq + 1
    previousToSeq = toSeq
  }
  if (coveredSeqs > bad) return `has lost ranges covering ${coveredSeqs} seqs, more than its ${bad} lost, torn or corrupt records`
  if (r.reordered && bad === 0) return 'says records were reordered, with none lost, torn or corrupt'
  if (r.lossWindowMs !== null && r.lost === 0) return 'has a loss window with no record lost'
  return undefined
}

function verdictTableDisagreement(r: StoredVerdict, role: Role, facts: Facts): string | undefined {
  const rule = verdictTable[role][r.verdict]
  if (rule.holds(facts)) return undefined
  const superblock = facts.superblock === undefined ? '' : facts.superblock ? ", the run's superblock found" : ', the superblock lost'
  const what = `${r.lost} of ${r.acked} acknowledged records lost, ${r.torn} torn, ${r.corrupt} corrupt${superblock}`
  return `says ${r.verdict}${role === 'control' ? ' for the control (none)' : ''} with ${what}: ${rule.needs}`
}
