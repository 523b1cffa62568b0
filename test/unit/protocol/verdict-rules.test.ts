/**
 * verdict-rules.ts over every input class: each verdict for each role, with and without records
 * acknowledged, lost or judged, and the superblock found, lost or not said, against an oracle written
 * from judge.ts's own rule (a verdict is accepted exactly when verify could have given it); then the
 * counts and ranges every verdict must keep; then what verify really sends, for real data files
 * (wrapped, overwritten, lost, torn, missing, a lost superblock, the control), all accepted.
 */
import t from 'tap'
import { closeSync, openSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { verdictDisagreement } from '../../../src/protocol/verdict-rules.js'
import type { StoredVerdict } from '../../../src/protocol/messages.js'
import { judgeRun } from '../../../src/client/verify/judge.js'
import { storedVerdicts } from '../../../src/client/verify/stored-verdicts.js'
import type { RunMeta } from '../../../src/record/format.js'
import { slotOffsetBytes } from '../../../src/record/records.js'
import { craftMeta, craftRun, range, writeDataFile } from '../../fixtures/crafted-run.js'

type Verdict = StoredVerdict['verdict']
const verdicts: Verdict[] = ['pass', 'fail', 'inconclusive', 'not-judged']

/** judge.ts, lines "const verdict: RunVerdict = ...": what verify gives a run. */
function judged(role: 'tested' | 'control', acked: number, bad: number, superblockOk: boolean): Verdict {
  if (acked === 0) return 'inconclusive'
  if (role === 'control') return !superblockOk ? 'fail' : bad > 0 ? 'pass' : 'inconclusive'
  return bad > 0 || !superblockOk ? 'fail' : 'pass'
}

/** Whether a verifier could have sent this: the superblock not said means it may be either, but a fail must then rest on a bad record. */
function couldBe(
  role: 'tested' | 'control',
  claimed: Verdict,
  acked: number,
  bad: number,
  intact: number,
  superblock: boolean | undefined,
): boolean {
  if (claimed === 'not-judged') return intact + bad === 0
  // A control whose losses the writer saw while the run went on (it ended storage-lost) shows no cut: inconclusive.
  if (role === 'control' && claimed === 'inconclusive' && acked > 0 && bad > 0 && superblock !== false) return true
  if (superblock !== undefined) return claimed === judged(role, acked, bad, superblock)
  return claimed === judged(role, acked, bad, true) || (claimed === 'fail' && judged(role, acked, bad, false) === 'fail' && bad > 0)
}

function verdict(over: Partial<StoredVerdict>): StoredVerdict {
  return {
    verdict: 'pass',
    acked: 0,
    intact: 0,
    lost: 0,
    torn: 0,
    corrupt: 0,
    lossWindowMs: null,
    reordered: false,
    lostRanges: [],
    rebootedSinceWrite: true,
    summary: '',
    bootId: null,
    fingerprint: null,
    atMs: Date.now(),
    ...over,
  }
}

t.test('every verdict, role, count class and superblock state: accepted exactly when verify could have given it', async (t) => {
  let checked = 0
  const wrong: string[] = []
  for (const method of ['fdatasync', 'none']) {
    const role = method === 'none' ? 'control' : 'tested'
    for (const claimed of verdicts) {
      // [acked, intact, lost, torn, corrupt]
      const counts: Array<[number, number, number, number, number]> = [
        [0, 0, 0, 0, 0],
        [10, 10, 0, 0, 0],
        [10, 7, 3, 0, 0],
        [10, 9, 0, 1, 0],
        [10, 9, 0, 0, 1],
        [10, 0, 10, 0, 0],
        [3270, 0, 3270, 0, 0],
        [10, 0, 0, 0, 0], // acked, none judged (an older verifier's not-judged, or superseded all but none)
      ]
      for (const [acked, intact, lost, torn, corrupt] of counts) {
        for (const superblockValid of [true, false, undefined]) {
          const v = verdict({
            verdict: claimed,
            acked,
            intact,
            lost,
            torn,
            corrupt,
            ...(superblockValid === undefined ? {} : { superblockValid }),
          })
          const problem = verdictDisagreement(v, method, 5000)
          const expected = couldBe(role, claimed, acked, lost + torn + corrupt, intact, superblockValid)
          checked++
          if ((problem === undefined) !== expected)
            wrong.push(
              `${method} ${claimed} ${JSON.stringify({ acked, intact, lost, torn, corrupt, superblockValid })}: ${problem ?? 'accepted'}`,
            )
        }
      }
    }
  }
  t.same(wrong, [], `${checked} cases, each as judge.ts decides`)
})

t.test('the disagreement is named', async (t) => {
  t.equal(
    verdictDisagreement(verdict({ verdict: 'pass', acked: 3270, lost: 3270 }), 'fdatasync', 3270),
    "says pass with 3270 of 3270 acknowledged records lost, 0 torn, 0 corrupt: a pass needs acknowledged records, none lost, torn or corrupt, and the run's superblock",
  )
  t.match(
    verdictDisagreement(verdict({ verdict: 'fail', acked: 10, intact: 10 }), 'fsync', 10),
    /says fail with 0 of 10 acknowledged records lost.*a fail needs a lost, torn or corrupt acknowledged record, or a lost superblock/,
  )
  t.match(
    verdictDisagreement(verdict({ verdict: 'pass', acked: 10, intact: 10 }), 'none', 10),
    /says pass for the control \(none\) with 0 of 10 .*the control passes only by losing records of its own file/,
  )
  t.match(
    verdictDisagreement(verdict({ verdict: 'fail', acked: 10, lost: 10, superblockValid: true }), 'none', 10),
    /the superblock|its superblock/,
  )
})

t.test('counts, ranges, reordering and loss windows must add up', async (t) => {
  const fail = (over: Partial<StoredVerdict>) =>
    verdict({ verdict: 'fail', acked: 10, intact: 7, lost: 3, lostRanges: [[8, 10]], lossWindowMs: 5, ...over })
  const cases: Array<[string, StoredVerdict, number, RegExp | undefined]> = [
    ['an honest fail', fail({}), 10, undefined],
    ['an honest fail with every count', fail({ superseded: 0, interrupted: 0, superblockValid: true }), 10, undefined],
    [
      'an overwrite fail: superseded and interrupted records make up the rest',
      fail({ acked: 20, intact: 5, superseded: 9, interrupted: 3 }),
      20,
      undefined,
    ],
    ['more acked than the listener holds', fail({}), 9, /counts 10 acknowledged records, the listener holds 9/],
    ['counts over acked', fail({ intact: 8 }), 10, /add up to 11, more than the 10 acknowledged/],
    ['every count sent, and they do not add up', fail({ superseded: 1, interrupted: 0 }), 10, /add up to 11, not to the 10 acknowledged/],
    ['every count sent, short of acked', fail({ intact: 5, superseded: 0, interrupted: 0 }), 10, /add up to 8, not to the 10 acknowledged/],
    ['a lost range past acked', fail({ lostRanges: [[9, 11]] }), 20, /lost range 9-11, not within the acknowledged seqs 1-10/],
    ['a range running backwards', fail({ lostRanges: [[9, 8]] }), 10, /lost range 9-8/],
    [
      'ranges out of order',
      fail({
        lostRanges: [
          [9, 9],
          [3, 3],
        ],
      }),
      10,
      /lost range 3-3 overlapping or before/,
    ],
    ['ranges covering more seqs than were lost', fail({ lostRanges: [[1, 4]] }), 10, /covering 4 seqs, more than its 3 lost/],
    ['reordering without a loss', verdict({ verdict: 'pass', acked: 10, intact: 10, reordered: true }), 10, /reordered, with none lost/],
    [
      'a loss window without a loss',
      verdict({ verdict: 'pass', acked: 10, intact: 10, lossWindowMs: 3 }),
      10,
      /loss window with no record lost/,
    ],
    [
      'a fail resting on its lost superblock alone',
      verdict({ verdict: 'fail', acked: 10, intact: 10, superblockValid: false }),
      10,
      undefined,
    ],
    [
      'a fail with nothing lost from an older verifier',
      verdict({ verdict: 'fail', acked: 10, intact: 10 }),
      10,
      /a fail needs a lost, torn or corrupt acknowledged record/,
    ],
    [
      'not judged, with records judged',
      verdict({ verdict: 'not-judged', acked: 10, intact: 10 }),
      10,
      /a run that was not judged has no judged records/,
    ],
    ['not judged, as verify sends it', verdict({ verdict: 'not-judged' }), 10, undefined],
  ]
  for (const [name, v, ackedThroughSeq, expected] of cases) {
    const problem = verdictDisagreement(v, 'fdatasync', ackedThroughSeq)
    if (expected === undefined) t.equal(problem, undefined, `${name}: accepted`)
    else t.match(problem, expected, `${name}: ${problem}`)
  }
})

t.test('a judged verdict of a run that has ended counts every acknowledged record the listener holds', async (t) => {
  const pass = verdict({ verdict: 'pass', acked: 10, intact: 10, superseded: 0, interrupted: 0, superblockValid: true })
  t.match(
    verdictDisagreement(pass, 'fdatasync', 3270, true),
    /counts 10 acknowledged records, the listener holds 3270 for the run, which has ended/,
    'a pass over 10 of 3,270: refused',
  )
  t.match(
    verdictDisagreement(verdict({ verdict: 'fail', acked: 10, intact: 7, lost: 3, lostRanges: [[8, 10]] }), 'fdatasync', 11, true),
    /counts 10 acknowledged records, the listener holds 11/,
    'a fail one short: refused',
  )
  t.match(
    verdictDisagreement(verdict({ verdict: 'inconclusive', acked: 0 }), 'fdatasync', 5, true),
    /counts 0 acknowledged records, the listener holds 5/,
    'inconclusive over acks it did not count: refused',
  )
  t.equal(verdictDisagreement(pass, 'fdatasync', 10, true), undefined, 'every ack counted: accepted')
  t.equal(verdictDisagreement(pass, 'fdatasync', 3270, false), undefined, 'a run still taking acks: fewer is not wrong')
  t.equal(verdictDisagreement(verdict({ verdict: 'not-judged' }), 'fdatasync', 3270, true), undefined, 'not judged counts nothing')
})

t.test('every verdict verify sends for a real data file is accepted', async (t) => {
  const dir = t.testdir()
  type Case = {
    name: string
    over: Partial<RunMeta>
    acked: number
    seqs: number[]
    superblock?: boolean
    sizeSlots?: number
    missing?: boolean
    tear?: number
  }
  const cases: Case[] = [
    { name: 'append, every record intact', over: {}, acked: 50, seqs: range(1, 50) },
    { name: 'append wrapped round a small file', over: { slotCount: 20 }, acked: 50, seqs: range(1, 50), sizeSlots: 20 },
    { name: 'append wrapped, some lost', over: { slotCount: 20 }, acked: 50, seqs: range(1, 45), sizeSlots: 20 },
    {
      name: 'overwrite, acknowledged seqs superseded on their slots',
      over: { pattern: 'overwrite', slotCount: 30 },
      acked: 100,
      seqs: range(1, 100),
      sizeSlots: 30,
    },
    { name: 'overwrite, the newest lost', over: { pattern: 'overwrite', slotCount: 30 }, acked: 100, seqs: range(1, 80), sizeSlots: 30 },
    { name: 'the file missing', over: {}, acked: 40, seqs: [], missing: true },
    { name: 'the superblock lost, every record there', over: {}, acked: 40, seqs: range(1, 40), superblock: false },
    { name: 'a record torn', over: {}, acked: 40, seqs: range(1, 40), tear: 17 },
    { name: 'nothing acknowledged', over: {}, acked: 0, seqs: [] },
    { name: 'the control lost records', over: { method: 'none' }, acked: 40, seqs: range(1, 30) },
    { name: 'the control lost nothing', over: { method: 'none' }, acked: 40, seqs: range(1, 40) },
    { name: "the control's file missing", over: { method: 'none' }, acked: 40, seqs: [], missing: true },
  ]
  for (const [i, c] of cases.entries()) {
    const meta = craftMeta(`00000000000e${i.toString(16).padStart(4, '0')}`, join(dir, `data-${i}`), { slotCount: 1000, ...c.over })
    if (!c.missing) writeDataFile(meta, c.seqs, { superblock: c.superblock ?? true, sizeSlots: c.sizeSlots ?? c.acked })
    if (c.tear !== undefined) {
      // The record's last sectors never reached the disk: zeros where they should be.
      const fd = openSync(meta.path, 'r+')
      writeSync(fd, Buffer.alloc(256), 0, 256, slotOffsetBytes(meta.recordSizeBytes, c.tear - 1) + 256)
      closeSync(fd)
    }
    const report = await judgeRun(craftRun(meta, c.acked))
    const [sent] = storedVerdicts(
      { verdict: report.verdict, host: 'h', file: meta.path, source: 's', claims: [], notes: [], runs: [report] } as unknown as Parameters<
        typeof storedVerdicts
      >[0],
      null,
      null,
    )
    const problem = verdictDisagreement(sent!.result, meta.method, c.acked, true)
    t.equal(
      problem,
      undefined,
      `${c.name}: ${report.verdict} (${report.intact} intact, ${report.lost} lost, ${report.torn} torn, ${report.corrupt} corrupt, ${report.superseded} superseded, ${report.interrupted} interrupted) accepted`,
    )
  }
})
