/**
 * The verdicts verify stores at the listener, one per run (storedVerdictSchema): what it found for
 * each run it judged, or 'not-judged' for every run of a group it did not judge.
 */
import { storedVerdictSchema, type StoredVerdict } from '../../protocol/messages.js'
import type { RunReport } from './run-report.js'
import { listenerNowMs } from './listener-client.js'
import { judgeMethods } from './verdict-rules.js'
import { renderRun } from './verify-render.js'
import type { NotJudgedReport, VerifyReport } from './verify-report.js'

/** At most this many seq ranges go with a stored verdict (storedVerdictSchema). */
const maxStoredRanges = 100

/**
 * The verdicts to report to the listener, one per run: what verify found for each run it judged, or
 * 'not-judged' with zero counts and the reason for every run of the group it did not judge. bootId and
 * fingerprint describe this machine as verify found it; atMs is the listener's time when a welcome gave
 * it (this machine's clock may be anywhere after a cut: at 1970 the listener would refuse the verdict).
 */
export function storedVerdicts(
  report: VerifyReport | NotJudgedReport,
  bootId: string | null,
  fingerprint: StoredVerdict['fingerprint'],
  atMs = listenerNowMs() ?? Date.now(),
): { runId: string; result: StoredVerdict }[] {
  const machine = { bootId: storedVerdictSchema.shape.bootId.safeParse(bootId).success ? bootId : null, fingerprint, atMs }
  if (report.verdict === 'not-judged') {
    const summary = `NOT JUDGED: ${report.detail}.`.slice(0, 4096)
    return (report.groupRunIds ?? []).map((runId) => ({
      runId,
      result: {
        verdict: 'not-judged',
        acked: 0,
        intact: 0,
        lost: 0,
        torn: 0,
        corrupt: 0,
        lossWindowMs: null,
        reordered: false,
        lostRanges: [],
        rebootedSinceWrite: null,
        summary,
        ...machine,
      },
    }))
  }
  const methods = judgeMethods(report.runs)
  return report.runs.map((r) => ({
    runId: r.runId,
    result: {
      verdict: r.verdict,
      acked: r.acked,
      intact: r.intact,
      lost: r.lost,
      torn: r.torn,
      corrupt: r.corrupt,
      superseded: r.superseded,
      interrupted: r.interrupted,
      superblockValid: r.superblock.kind === 'valid',
      lossWindowMs: widestLossWindowMs(r),
      reordered: r.reordering !== null,
      lostRanges: badSeqRanges(r).slice(0, maxStoredRanges),
      rebootedSinceWrite: r.rebootedSinceWrite,
      summary: (
        renderRun(
          r,
          true,
          methods.find((m) => m.runs.includes(r)),
        )[0] ?? ''
      ).slice(0, 4096),
      ...machine,
    },
  }))
}

/** The widest acknowledgement window of a lost range, in ms; null when nothing was lost (or no time is known). */
function widestLossWindowMs(r: RunReport): number | null {
  let widest: number | null = null
  for (const range of r.lostRanges) {
    if (!Number.isFinite(range.ackedFromMs) || !Number.isFinite(range.ackedToMs)) continue
    widest = Math.max(widest ?? 0, range.ackedToMs - range.ackedFromMs)
  }
  return widest
}

/** Lost ranges, torn and corrupt records as seq ranges, in seq order, touching ones merged. */
function badSeqRanges(r: RunReport): [number, number][] {
  const ranges: [number, number][] = [
    ...r.lostRanges.map((x): [number, number] => [x.fromSeq, x.toSeq]),
    ...r.tornRecords.map((x): [number, number] => [x.seq, x.seq]),
    ...r.corruptRecords.map((x): [number, number] => [x.seq, x.seq]),
  ].sort((a, b) => a[0] - b[0])
  const merged: [number, number][] = []
  for (const range of ranges) {
    const last = merged.at(-1)
    if (last !== undefined && range[0] <= last[1] + 1) last[1] = Math.max(last[1], range[1])
    else merged.push([range[0], range[1]])
  }
  return merged
}
