/**
 * verify's report in words: a group's headline, each run's lines, and why nothing was judged. The
 * verdicts themselves are decided elsewhere (verdict-rules.ts, not-judged-rules.ts); this only says them.
 */
import type { Claim } from '../../protocol/messages.js'
import { formatSize } from '../../base/sizes.js'
import type { RecordFinding, RunReport } from './run-report.js'
import { judgeMethods, methodLabel, type MethodJudgement } from './verdict-rules.js'
import type { NotJudgedReport, VerifyReport } from './verify-report.js'

const maxShownRanges = 10

/** A count as printed: 1,234,567. */
const n = (x: number): string => x.toLocaleString('en-US')

function describeClaim(c: Claim): string {
  const state = c.live ? 'live' : c.end === undefined ? 'ended (no end reported)' : `ended (${c.end.reason})`
  return `run ${c.runId} (${c.method}) from ${c.peer ?? 'an unknown address'}, announced ${new Date(c.announcedMs).toISOString()}, ${state}, acked through seq ${c.ackedThroughSeq}`
}

export function renderNotJudged(report: NotJudgedReport): string {
  const lines = [`NOT JUDGED: ${report.detail}.`]
  if (report.reason === 'conflicting-claims') {
    lines.push(`These runs claim ${report.host}:${report.file}:`)
    for (const c of report.claims) lines.push(`  ${describeClaim(c)}`)
    lines.push('hint: pick one with --run RUNID; run the listener with --token so that only your writers can announce runs')
  } else if (report.reason === 'still-running') {
    lines.push(
      'hint: verify after the power cut and reboot; if the machine was already cut, the listener notices the lost connection within minutes (TCP keepalive), or verify on the rebooted machine itself',
    )
  } else if (report.reason === 'file-changed') {
    lines.push('hint: nothing here says anything about the storage; start a new run and leave its data files alone until verify')
  } else if (report.hint !== undefined) {
    lines.push(`hint: ${report.hint}`)
  } else {
    lines.push('hint: verify the latest run (leave out --run), or this run only if its file still holds it')
  }
  return `${lines.join('\n')}\n`
}

export function renderReport(report: VerifyReport): string {
  const lines: string[] = []
  const methods = judgeMethods(report.runs)
  if (report.runs.length > 1) lines.push(headline(report, methods))
  for (const r of report.runs)
    lines.push(
      ...renderRun(
        r,
        report.runs.length === 1,
        methods.find((m) => m.runs.includes(r)),
      ),
    )
  for (const note of report.notes) lines.push(`note: ${note}.`)
  if (report.runs.some((r) => r.rebootedSinceWrite === false)) {
    lines.push(
      'No reboot happened since the write: this machine still has the boot id the writer reported, so the page cache still holds every write and a pass proves nothing about power loss. Cut the power, reboot, then verify.',
    )
  }
  return `${lines.join('\n')}\n`
}

/**
 * Why a method judged over its jobs tested nothing, by its role and what its runs showed together.
 * cut: what the cut did, as cutWords says it (`, so the cut tested nothing`, or that no cut ended the runs).
 */
const inconclusiveWhy: Readonly<
  Record<MethodJudgement<RunReport>['role'], Partial<Record<MethodJudgement<RunReport>['finding'], (label: string, cut: string) => string>>>
> = {
  tested: { idle: (label) => `${label} acknowledged nothing` },
  control: {
    kept: (_label, cut) => `the control (none) lost nothing${cut}`,
    'lost-running': () =>
      'the control (none) lost records while the run was going, with no cut (the writer saw it and stopped), so no cut was tested',
    idle: (_label, cut) => `the control (none) acknowledged nothing${cut}`,
  },
}

/**
 * How runs ended when no cut ended them: all by themselves (--duration), or stopped (a signal, their
 * campaign). Saying "the cut tested nothing" of them would assume a cut; any other end (vanished, an
 * error) may have been one: undefined.
 */
function endedWithoutCut(runs: readonly RunReport[]): string | undefined {
  const they = runs.length > 1
  if (runs.length > 0 && runs.every((r) => r.ended === 'duration'))
    return `${they ? 'the runs ended by themselves' : 'the run ended by itself'} (--duration), no cut happened while ${they ? 'they' : 'it'} wrote`
  if (runs.length > 0 && runs.every((r) => r.ended === 'duration' || r.ended === 'interrupted'))
    return `${they ? 'the runs were' : 'the run was'} stopped (Ctrl-C, a signal or ${they ? 'their' : 'its'} campaign), no cut happened while ${they ? 'they' : 'it'} wrote`
  return undefined
}

/** What the cut did, after a finding that shows nothing was tested (lead: the words before the usual "the cut tested nothing"). */
function cutWords(runs: readonly RunReport[], lead: ', so' | ':'): string {
  const ended = endedWithoutCut(runs)
  return ended === undefined ? `${lead} the cut tested nothing` : `: ${ended}`
}

/** A group's first line: its verdict in words, the methods that decided it named. */
function headline(report: VerifyReport, methods: readonly MethodJudgement<RunReport>[]): string {
  const tested = report.runs.filter((r) => r.role === 'tested')
  const controls = report.runs.filter((r) => r.role === 'control')
  if (report.verdict === 'fail') {
    const failed = tested.filter((r) => r.verdict === 'fail')
    const parts =
      failed.length > 0
        ? [`${runsLabel(failed, tested)} lost acknowledged data (${failed.length} of ${tested.length} tested ${runsWord(tested)})`]
        : []
    if (controls.some((r) => r.verdict === 'fail'))
      parts.push("the control's (none) file, created and fsynced before any record, is gone or replaced")
    return `FAIL: ${parts.join('; ')}.`
  }
  if (report.verdict === 'inconclusive') {
    const cut = cutWords(report.runs, ', so')
    const why = methods.filter((m) => m.verdict === 'inconclusive').map((m) => inconclusiveWhy[m.role][m.finding]!(m.label, cut))
    return `INCONCLUSIVE: ${why.join('; ')}.`
  }
  // Jobs that acknowledged nothing beside jobs of their method that did: excused, and named.
  const idle = methods.filter((m) => m.finding !== 'idle').flatMap((m) => m.runs.filter((r) => r.acked === 0))
  const idleNote = idle.length === 0 ? '' : `; ${runsLabel(idle, report.runs)} acknowledged nothing`
  const passed = tested.filter((r) => r.verdict === 'pass')
  if (tested.length === 0) return `PASS: the control (none) lost records: the cut was real${idleNote}.`
  return controls.length > 0
    ? `PASS: every acknowledged record of ${passed.length === 1 ? 'the tested method' : `all ${passed.length} tested ${runsWord(passed)}`} survived, and the control lost records: the cut was real${idleNote}.`
    : `PASS: every acknowledged record of all ${passed.length} ${runsWord(passed)} survived${idleNote}.`
}

/** 'methods', or 'runs' when one method ran several times (write --jobs N: one run per job). */
function runsWord(runs: readonly RunReport[]): string {
  return new Set(runs.map(methodLabel)).size === runs.length ? 'methods' : 'runs'
}

/**
 * Some of a group's runs, for a headline: each method once; when only some of a method's runs
 * (jobs) are meant, which ones: `fdatasync (job 4 of 4)`, `fdatasync (jobs 1, 3 of 4)`, or by run
 * id when the paths do not say the job.
 */
function runsLabel(some: readonly RunReport[], all: readonly RunReport[]): string {
  const labels = [...new Set(some.map(methodLabel))]
  return labels
    .map((label) => {
      const meant = some.filter((r) => methodLabel(r) === label)
      const of = all.filter((r) => methodLabel(r) === label).length
      if (meant.length === of) return label
      const jobs = meant.map((r) => /\.job(\d+)$/.exec(r.path)?.[1])
      if (jobs.every((k) => k !== undefined)) return `${label} (job${jobs.length > 1 ? 's' : ''} ${jobs.join(', ')} of ${of})`
      return `${label} (run${meant.length > 1 ? 's' : ''} ${meant.map((r) => r.runId).join(', ')})`
    })
    .join(', ')
}

const verdictWord = { pass: 'PASS', fail: 'FAIL', inconclusive: 'INCONCLUSIVE' } as const

/**
 * A run's lines. method: its method judged over the group's jobs, when another job decided it (this
 * job acknowledged nothing, or its control lost nothing while another job's did).
 */
export function renderRun(r: RunReport, headline: boolean, method?: MethodJudgement<RunReport>): string[] {
  const what = `run ${r.runId} (${methodLabel(r)}, ${r.pattern}, ${formatSize(r.recordSize)} records, ${r.path})`
  const bad = r.lost + r.torn + r.corrupt
  // A files run judges every acknowledged seq: a kept record for its file, a deleted one for its absence.
  const judged = r.files === undefined ? r.acked - r.superseded : r.acked
  const lines: string[] = []
  const prefix = headline ? '' : '  '
  const lead = headline ? `${verdictWord[r.verdict]}: ` : prefix
  const superblockBad = r.superblock.kind !== 'valid' && r.acked > 0
  // The method's verdict came from another job: this run's own finding (nothing acked, or a control that lost nothing) did not decide it.
  const otherJobDecided = method !== undefined && method.runs.length > 1 && method.verdict !== r.verdict
  if (r.role === 'control') {
    lines.push(
      r.verdict === 'fail'
        ? `${lead}control (none): its file, created and fsynced before any record, is gone or holds another run: the storage lost a synced file creation, and the control cannot show whether the cut was real (${what}).`
        : bad > 0 && r.ended === 'storage-lost'
          ? `${lead}control (none): ${n(bad)} of ${n(judged)} unsynced records lost while the run was going, before any cut (the writer saw it): they show no cut (${what}).`
          : bad > 0
            ? `${lead}control (none): ${n(bad)} of ${n(judged)} unsynced records lost: the cut was real (${what}).`
            : otherJobDecided
              ? r.acked === 0
                ? `${lead}control (none): this job acknowledged nothing; the control is judged on its other jobs (${what}).`
                : `${lead}control (none): all ${n(judged)} unsynced records of this job survived; ${method.verdict === 'pass' ? "another job's control lost records, so the cut was real" : 'the control is judged on its other jobs'} (${what}).`
              : r.acked === 0
                ? `${lead}control (none): nothing was written, so it lost nothing${cutWords([r], ':')} (${what}).`
                : `${lead}control (none): all ${n(judged)} unsynced records survived, it lost nothing${cutWords([r], ':')} (${what}).`,
    )
    if (superblockBad) lines.push(`${prefix}superblock: ${r.superblock.detail}`)
    return lines
  }
  if (r.verdict === 'inconclusive' && otherJobDecided) {
    lines.push(`${lead}${what}: this job acknowledged nothing; the method is judged on its other jobs.`)
  } else if (r.verdict === 'inconclusive') {
    lines.push(`${lead}${what}: nothing was acknowledged${cutWords([r], ', so')}.`)
  } else if (r.verdict === 'pass' && r.files !== undefined && r.superseded > 0) {
    lines.push(
      `${lead}all ${n(judged)} acknowledged records of ${what} survived: the latest ${n(r.intact)} intact, the ${n(r.superseded)} before them deleted as the run recycles its files.`,
    )
  } else if (r.verdict === 'pass') {
    lines.push(
      r.interrupted === 0
        ? `${lead}all ${n(judged)} ${judgedRecords(r)} of ${what} survived intact${ofAllAcked(r)}.`
        : `${lead}every ${judgedRecords(r, 'record')} of ${what} survived: ${n(r.intact)} intact, ${n(r.interrupted)} interrupted newer overwrites${ofAllAcked(r)}.`,
    )
  } else if (bad === 0) {
    lines.push(`${lead}the superblock of ${what} did not survive: ${r.superblock.detail}.`)
    lines.push(
      `${prefix}Its ${n(judged)} acknowledged records are ${r.interrupted === 0 ? 'intact' : `${n(r.intact)} intact, ${n(r.interrupted)} interrupted newer overwrites`}; the superblock was synced before the first record.`,
    )
  } else {
    lines.push(
      `${lead}${n(bad)} of ${n(judged)} ${judgedRecords(r)} of ${what} did not survive: ${n(r.lost)} lost${unreadableWords(r)}, ${n(r.torn)} torn, ${n(r.corrupt)} corrupt.`,
    )
    lines.push(
      r.files?.dirSync === false
        ? `${prefix}Written without a directory sync (--no-dir-sync): ${r.method} made each file's data durable, nothing asked the stack to keep its name or its deletion, and it did not.`
        : `${prefix}The storage stack reported these writes durable (${r.method} returned success) and then did not keep them.`,
    )
    if (superblockBad) lines.push(`${prefix}superblock: ${r.superblock.detail}`)
  }
  // A pass already said how many were overwritten; any other verdict says it below its own line.
  lines.push(...recordDetailLines(r, prefix, r.verdict !== 'pass'))
  return lines
}

/**
 * What a run's judged records are. An overwrite file that wrapped holds only the latest record of each
 * slot: the earlier acknowledged ones were overwritten by later ones (superseded) and are not judged,
 * so the count judged is the records still in the file, never all that were acknowledged.
 */
function judgedRecords(r: RunReport, noun: 'record' | 'records' = 'records'): string {
  // A files run judges all it acknowledged (a deleted record by its absence): no fewer in the file.
  return r.files !== undefined || r.superseded === 0
    ? `acknowledged ${noun}`
    : `acknowledged ${noun} still in the file (the latest in each slot)`
}

/** After a judged count: how many were acknowledged in all, when overwrites left fewer in the file. */
function ofAllAcked(r: RunReport): string {
  return r.files !== undefined || r.superseded === 0 ? '' : `, of ${n(r.acked)} acknowledged (${n(r.superseded)} overwritten by later ones)`
}

/** A files run's lines: its losses by kind, the first files found wrong, and what was in its directory but not judged. */
function filesLines(r: RunReport, prefix: string): string[] {
  const files = r.files
  if (files === undefined) return []
  const lines: string[] = []
  const kinds = [
    [files.renameLost, 'rename lost (there only under the temporary name .rec-SEQ.tmp: the rename was not kept)'],
    [files.zeroLength, 'zero-length (the name survived, the data did not)'],
    [files.short, 'short (the name survived with part of the data)'],
    [files.notAFile, 'holding no file under the name (a directory, a link, a FIFO, ...)'],
    [files.cameBack, 'deleted and back (the acknowledged deletion was not kept)'],
  ] as const
  const said = kinds.filter(([count]) => count > 0).map(([count, words]) => `${n(count)} ${words}`)
  if (said.length > 0) lines.push(`${prefix}record files: ${said.join('; ')}.`)
  for (const f of files.records.slice(0, maxShownRanges)) lines.push(`${prefix}${f.detail}`)
  if (files.zeroLength + files.short + files.cameBack > maxShownRanges)
    lines.push(
      `${prefix}... and ${n(files.zeroLength + files.short + files.cameBack - maxShownRanges)} more such files (--json lists the first ${files.records.length})`,
    )
  if (files.deletedUnacknowledged > 0) {
    const reached =
      files.reachedSeq > r.acked
        ? `the directory shows it got to seq ${files.reachedSeq}`
        : `seq ${r.acked + 1} was under way: its deletion kept, its own file not`
    lines.push(
      `${prefix}${n(files.deletedUnacknowledged)} of the deleted ${files.deletedUnacknowledged === 1 ? 'was' : 'were'} deleted by steps past the last ack the listener holds (the writer deletes the oldest file before it syncs the directory and acks; ${reached}): gone as the run recycles, not a loss.`,
    )
  }
  if (files.unacknowledged > 0)
    lines.push(`${prefix}${n(files.unacknowledged)} files of records never acknowledged: not judged (the cut came before their ack).`)
  if (files.strays > 0) {
    const shown = files.strayNames.slice(0, 5).join(', ')
    lines.push(
      `${prefix}${n(files.strays)} ${files.strays === 1 ? 'name' : 'names'} in the run directory that no files run makes, not judged: ${shown}${files.strays > 5 ? ', ...' : ''}.`,
    )
  }
  return lines
}

/** The lines under a run's verdict: what was superseded, lost, torn, corrupt, reordered or interrupted, the first of each shown. */
function recordDetailLines(r: RunReport, prefix: string, sayOverwritten: boolean): string[] {
  const lines: string[] = []
  if (sayOverwritten && r.superseded > 0 && r.files !== undefined)
    lines.push(
      `${prefix}${n(r.superseded)} acknowledged records were deleted by later records (the run keeps ${n(r.files.keep)} files) and are gone.`,
    )
  else if (sayOverwritten && r.superseded > 0)
    lines.push(
      `${prefix}${n(r.superseded)} acknowledged records were later overwritten by newer acknowledged ones (superseded, not judged).`,
    )
  for (const range of r.lostRanges.slice(0, maxShownRanges)) {
    const seqs = range.count === 1 ? `seq ${range.fromSeq}` : `seqs ${range.fromSeq}-${range.toSeq} (${n(range.count)})`
    lines.push(`${prefix}lost ${seqs}: ${range.reason}; acknowledged ${timeWindow(range.ackedFromMs, range.ackedToMs)}`)
  }
  if (r.lostRangeCount > maxShownRanges)
    lines.push(`${prefix}... and ${n(r.lostRangeCount - maxShownRanges)} more lost ranges (--json lists the first ${r.lostRanges.length})`)
  lines.push(...unreadableLines(r, prefix))
  lines.push(...filesLines(r, prefix))
  for (const t of r.tornRecords.slice(0, maxShownRanges)) lines.push(`${prefix}torn seq ${t.seq} at offset ${t.offsetBytes}: ${t.detail}`)
  if (r.torn > maxShownRanges) lines.push(`${prefix}... and ${n(r.torn - maxShownRanges)} more torn records`)
  for (const c of r.corruptRecords.slice(0, maxShownRanges))
    lines.push(`${prefix}corrupt seq ${c.seq} at offset ${c.offsetBytes}, ${c.lengthBytes} bytes: ${c.detail}`)
  if (r.corrupt > maxShownRanges) lines.push(`${prefix}... and ${n(r.corrupt - maxShownRanges)} more corrupt records`)
  if (r.reordering !== null) {
    lines.push(
      `${prefix}reordering: record ${r.reordering.survivedSeq} survived while ${n(r.reordering.count)} earlier acknowledged records (from seq ${r.reordering.earliestLostSeq}) did not: writes were reordered across a flush, the mark of a volatile cache that ignores flushes.`,
    )
  }
  if (r.interrupted > 0) {
    lines.push(
      `${prefix}${n(r.interrupted)} newer, never acknowledged overwrites were cut mid-record: not a failure (no sync method promises an atomic record); they show the device's atomic write unit.`,
    )
  }
  if (r.ended === 'error' && r.acked > 0)
    lines.push(`${prefix}the writer stopped on an I/O error; records acknowledged before it were judged.`)
  return lines
}

/** Within the lost count: how many the storage would not return. */
function unreadableWords(r: RunReport): string {
  return r.unreadable > 0 ? ` (${n(r.unreadable)} of them unreadable: the storage would not return them)` : ''
}

/** The unreadable records found by reading, as runs of adjacent slots: where in the file, which seqs, which errno. */
function unreadableLines(r: RunReport, prefix: string): string[] {
  const lines: string[] = []
  const runs: { first: RecordFinding; last: RecordFinding; count: number }[] = []
  for (const f of r.unreadableRecords) {
    const open = runs.at(-1)
    if (open !== undefined && open.last.slot + 1 === f.slot && open.last.detail === f.detail) {
      open.last = f
      open.count++
    } else runs.push({ first: f, last: f, count: 1 })
  }
  for (const { first, last, count } of runs.slice(0, maxShownRanges)) {
    const where =
      count === 1
        ? `slot ${first.slot} (seq ${first.seq})`
        : last.seq - first.seq === count - 1
          ? `slots ${first.slot}-${last.slot} (${n(count)} records, seqs ${first.seq}-${last.seq})`
          : `slots ${first.slot}-${last.slot} (${n(count)} records, from seq ${first.seq} to seq ${last.seq})`
    const bytes = last.offsetBytes + last.lengthBytes - first.offsetBytes
    lines.push(`${prefix}unreadable ${where} at offset ${first.offsetBytes}, ${n(bytes)} bytes: ${first.detail}`)
  }
  const shown = runs.slice(0, maxShownRanges).reduce((sum, run) => sum + run.count, 0)
  if (r.unreadable > shown && r.unreadableRecords.length > 0)
    lines.push(`${prefix}... and ${n(r.unreadable - shown)} more unreadable records (--json lists the first ${r.unreadableRecords.length})`)
  return lines
}

function timeWindow(fromMs: number, toMs: number): string {
  if (!Number.isFinite(fromMs)) return 'at an unknown time'
  const from = new Date(fromMs).toISOString()
  return fromMs === toMs ? `at ${from}` : `between ${from} and ${new Date(toMs).toISOString()}`
}
