/**
 * The listener's store choice, measured on its own contract: lmdb (lmdb-js 3.5.6, from a scratch
 * install, not a dependency) against a hand-written journal (store-stores.ts has both).
 *
 * - commit round: N runs' acks, one put per run in one durable transaction (lmdb: transaction, then
 *   db.flushed) vs one write + one fdatasync of the same records as checksummed frames; p50/p99.
 * - reopen: a store of --runs runs with --spans spans each, opened in a fresh child process until the
 *   listener would know every run (lmdb: open, then every key read into a map; journal: every frame
 *   read and checked into a map); time, VmRSS and VmHWM of the child. Page cache warm.
 * - damage: --trials trials, each flipping one random byte of a fresh copy of a small store (lmdb's
 *   data.mdb, the journal file), then a CHILD reads every run back and compares it with what it must
 *   be: crash (killed by a signal), error (the store threw: MDB_CORRUPTED, ...), named (our checksum
 *   caught it: without it, lmdb would have returned the damaged value), silently wrong (a run missing,
 *   extra or different, nothing named: the verdict a tool must never give), correct (the byte was in
 *   unused space).
 *
 * Usage: npm i --prefix /tmp/lmdb-scratch lmdb@3.5.6
 *        node --import tsx bench/store-choice.ts --lmdb /tmp/lmdb-scratch [--dir /tmp] [--runs 100000]
 *        [--spans 100] [--rounds 100] [--trials 200] [--damage-runs 2000] [--seed N] [--quick]
 *        [--parts rounds,reopen,damage]
 */
import { spawn } from 'node:child_process'
import {
  closeSync,
  copyFileSync,
  fdatasyncSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readSync,
  rmSync,
  statSync,
  writeSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { fileSystemName, quantileSorted, table } from './common.js'
import {
  checkLmdbEntry,
  fillJournal,
  fillLmdb,
  journalFrame,
  journalHeaderBytes,
  lmdbValue,
  loadLmdb,
  openLmdb,
  recordRest,
  runIdOf,
  scanJournal,
  writeAll,
} from './store-stores.js'

const benchFile = fileURLToPath(import.meta.url)
const outcomes = ['crash', 'error', 'named', 'silently wrong', 'correct'] as const
type Outcome = (typeof outcomes)[number]

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      lmdb: { type: 'string' },
      dir: { type: 'string', default: tmpdir() },
      runs: { type: 'string' },
      spans: { type: 'string', default: '100' },
      rounds: { type: 'string' },
      trials: { type: 'string' },
      'damage-runs': { type: 'string', default: '2000' },
      seed: { type: 'string', default: String(Date.now() % 1_000_000) },
      quick: { type: 'boolean', default: false },
      parts: { type: 'string', default: 'rounds,reopen,damage' },
      child: { type: 'string' },
      path: { type: 'string' },
    },
  })
  if (values.lmdb === undefined) {
    process.stderr.write(
      'plugcheck: store-choice needs --lmdb DIR, a scratch install of lmdb\nhint: npm i --prefix /tmp/lmdb-scratch lmdb@3.5.6, then --lmdb /tmp/lmdb-scratch\n',
    )
    return 2
  }
  const scratch = resolve(values.lmdb)
  if (values.child !== undefined) return child(values.child, scratch, values.path!, Number(values.runs), Number(values.spans))
  const runs = Number(values.runs ?? (values.quick ? 10_000 : 100_000))
  const spans = Number(values.spans)
  const rounds = Number(values.rounds ?? (values.quick ? 20 : 100))
  const trials = Number(values.trials ?? (values.quick ? 20 : 200))
  const seed = Number(values.seed)
  const work = mkdtempSync(join(resolve(values.dir), 'plugcheck-store-choice-'))
  console.log(
    `store choice: ${loadLmdb(scratch).version.versionString} (lmdb-js from ${scratch}) vs a journal, on ${work} (${fileSystemName(work)}), seed ${seed}`,
  )
  try {
    const parts = new Set(values.parts.split(','))
    const rows: string[][] = [['measure', 'lmdb', 'journal']]
    if (parts.has('rounds'))
      for (const n of [1024, 24_576]) rows.push(await commitRounds(scratch, work, n, n > 1024 ? Math.max(5, rounds / 5) : rounds))
    if (parts.has('reopen')) rows.push(...(await reopen(scratch, work, runs, spans)))
    const damageRuns = Number(values['damage-runs'])
    const tallies: Array<[string, Tally]> = []
    for (const where of parts.has('damage') ? (['anywhere', 'structure'] as const) : []) {
      const lmdbTally = await damage(scratch, work, 'lmdb', where, damageRuns, spans, trials, seed)
      const journalTally = await damage(scratch, work, 'journal', where, damageRuns, spans, trials, seed)
      tallies.push([`lmdb, flips ${where}`, lmdbTally], [`journal, flips ${where}`, journalTally])
      const share = (t: Tally): string =>
        `${((100 * t.targetBytes) / t.fileBytes).toFixed(1)}% of ${(t.fileBytes / 2 ** 20).toFixed(1)} MiB`
      rows.push([
        `damage: 1 byte flipped ${where} (${where === 'anywhere' ? 'uniform over the file' : 'lmdb: meta/branch/leaf pages; journal: frame headers'})`,
        share(lmdbTally),
        share(journalTally),
      ])
      for (const outcome of outcomes)
        rows.push([
          `  ${outcome} (of ${trials} trials, ${damageRuns} runs)`,
          String(lmdbTally.counts.get(outcome) ?? 0),
          String(journalTally.counts.get(outcome) ?? 0),
        ])
    }
    console.log('')
    console.log(table(rows))
    for (const [label, tally] of tallies) {
      console.log(`\n${label}: first details per outcome`)
      for (const [outcome, details] of tally.details) console.log(`  ${outcome}: ${details.slice(0, 4).join(' | ')}`)
    }
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
  return 0
}

/** p50/p99 of a durable round of n runs' acks, lmdb vs journal; the rounds interleaved. */
async function commitRounds(scratch: string, work: string, n: number, rounds: number): Promise<string[]> {
  const dir = join(work, `rounds-${n}`)
  mkdirSync(dir)
  const db = openLmdb(scratch, join(dir, 'lmdb'))
  const fd = openSync(join(dir, 'journal'), 'a')
  const lmdbMs: number[] = []
  const journalMs: number[] = []
  const ids = Array.from({ length: n }, (_, i) => runIdOf(i))
  try {
    for (let r = 0; r < rounds; r++) {
      // One new span per run per round, keyed by run and round (an append, as the journal's frames are).
      const rests = ids.map((_, i) => recordRest(i, 1))
      let t = performance.now()
      await db.transaction(() => {
        for (let i = 0; i < n; i++) {
          const key = Buffer.concat([ids[i]!, u32(r)])
          db.put(key, lmdbValue(key, rests[i]!))
        }
      })
      await db.flushed
      lmdbMs.push(performance.now() - t)
      t = performance.now()
      writeAll(fd, Buffer.concat(ids.map((id, i) => journalFrame(Buffer.concat([id, u32(r), rests[i]!])))))
      fdatasyncSync(fd)
      journalMs.push(performance.now() - t)
    }
  } finally {
    closeSync(fd)
    await db.close()
  }
  const text = (list: number[]): string => {
    const sorted = Float64Array.from(list).sort()
    return `${quantileSorted(sorted, 0.5).toFixed(2)} / ${quantileSorted(sorted, 0.99).toFixed(2)} ms`
  }
  return [`commit round of ${n.toLocaleString('en-US')} runs' acks, p50 / p99 (${rounds} rounds)`, text(lmdbMs), text(journalMs)]
}

function u32(value: number): Buffer {
  const b = Buffer.alloc(4)
  b.writeUInt32BE(value)
  return b
}

/** Builds both stores of `runs` runs, then reopens each in a child: time to know every run, RSS. */
async function reopen(scratch: string, work: string, runs: number, spans: number): Promise<string[][]> {
  const dir = join(work, 'reopen')
  mkdirSync(dir)
  const db = openLmdb(scratch, join(dir, 'lmdb'))
  await fillLmdb(db, 0, runs, spans)
  await db.close()
  fillJournal(join(dir, 'journal'), 0, runs, spans)
  const lmdb = await runChild(scratch, 'reopen-lmdb', join(dir, 'lmdb'), runs, spans)
  const journal = await runChild(scratch, 'reopen-journal', join(dir, 'journal'), runs, spans)
  const size = (path: string): string => `${(statSync(path).size / 2 ** 20).toFixed(0)} MiB`
  const field = (r: ChildOutcome, f: string): string => (r.report === null ? `failed: ${r.detail}` : String(r.report[f]))
  return [
    [
      `store of ${runs.toLocaleString('en-US')} runs x ${spans} spans: size on disk`,
      size(join(dir, 'lmdb', 'data.mdb')),
      size(join(dir, 'journal')),
    ],
    ['reopen until every run is known (warm cache)', field(lmdb, 'time'), field(journal, 'time')],
    ['reopen: child VmRSS / VmHWM after (RssAnon, RssFile: mapped store pages)', field(lmdb, 'rss'), field(journal, 'rss')],
  ]
}

interface Tally {
  readonly counts: Map<Outcome, number>
  readonly details: Map<Outcome, string[]>
  /** Bytes the flips were drawn from, of the file's. */
  readonly targetBytes: number
  readonly fileBytes: number
}

/** lmdb page layout (lmdb-js's LMDB 0.9.90, mdb.master3 format): 4 KiB pages, flags u16 at byte 18, an overflow's page count u32 at byte 20. */
const lmdbPageBytes = 4096
const lmdbPageFlags = { branch: 0x01, leaf: 0x02, overflow: 0x04, meta: 0x08 } as const

/** Byte ranges of lmdb's own structure: meta, branch and leaf pages (keys, node headers, page numbers), not overflow pages (our values). */
function lmdbStructureRanges(path: string): Array<readonly [number, number]> {
  const bytes = readFileSync(path)
  const ranges: Array<readonly [number, number]> = []
  for (let page = 0; page * lmdbPageBytes < bytes.length; ) {
    const at = page * lmdbPageBytes
    const flags = bytes.readUInt16LE(at + 18)
    if (flags & lmdbPageFlags.overflow) {
      page += Math.max(1, bytes.readUInt32LE(at + 20))
      continue
    }
    if (flags & (lmdbPageFlags.meta | lmdbPageFlags.branch | lmdbPageFlags.leaf))
      ranges.push([at, Math.min(bytes.length, at + lmdbPageBytes)])
    page++
  }
  return ranges
}

/** The journal's counterpart: every frame's header (length and checksum). */
function journalHeaderRanges(path: string): Array<readonly [number, number]> {
  return [...scanJournal(path).index.values()].map((at) => [at, at + journalHeaderBytes] as const)
}

/** The offset of the n-th byte of the ranges. */
function pickOffset(ranges: ReadonlyArray<readonly [number, number]>, n: number): number {
  for (const [from, to] of ranges) {
    if (n < to - from) return from + n
    n -= to - from
  }
  throw new Error('offset past the ranges')
}

/** `trials` single-byte flips, each in a fresh copy of a small store, read back in a child. */
async function damage(
  scratch: string,
  work: string,
  kind: 'lmdb' | 'journal',
  where: 'anywhere' | 'structure',
  runs: number,
  spans: number,
  trials: number,
  seed: number,
): Promise<Tally> {
  const dir = join(work, `damage-${kind}-${where}`)
  mkdirSync(dir)
  const pristine = kind === 'lmdb' ? join(dir, 'pristine', 'data.mdb') : join(dir, 'pristine.journal')
  if (kind === 'lmdb') {
    const db = openLmdb(scratch, join(dir, 'pristine'))
    await fillLmdb(db, 0, runs, spans)
    await db.close()
  } else fillJournal(pristine, 0, runs, spans)
  const size = statSync(pristine).size
  const structure =
    where === 'structure' ? (kind === 'lmdb' ? lmdbStructureRanges(pristine) : journalHeaderRanges(pristine)) : [[0, size] as const]
  const structureBytes = structure.reduce((n, [from, to]) => n + to - from, 0)
  const random = mulberry32(seed)
  const tally: Tally = { counts: new Map(), details: new Map(), targetBytes: structureBytes, fileBytes: size }
  for (let t = 0; t < trials; t++) {
    const offset = pickOffset(structure, Math.floor(random() * structureBytes))
    const mask = 1 + Math.floor(random() * 255)
    const copyDir = join(dir, `trial-${t}`)
    mkdirSync(copyDir)
    const copy = kind === 'lmdb' ? join(copyDir, 'data.mdb') : join(copyDir, 'journal')
    copyFileSync(pristine, copy)
    const fd = openSync(copy, 'r+')
    const byte = Buffer.alloc(1)
    readSync(fd, byte, 0, 1, offset)
    byte[0] = byte[0]! ^ mask
    writeSync(fd, byte, 0, 1, offset)
    closeSync(fd)
    const result = await runChild(scratch, `read-${kind}`, kind === 'lmdb' ? copyDir : copy, runs, spans)
    tally.counts.set(result.outcome, (tally.counts.get(result.outcome) ?? 0) + 1)
    tally.details.set(result.outcome, [...(tally.details.get(result.outcome) ?? []), `byte ${offset}: ${result.detail}`])
    rmSync(copyDir, { recursive: true, force: true })
  }
  return tally
}

interface ChildOutcome {
  readonly outcome: Outcome
  readonly detail: string
  readonly report: Record<string, string> | null
}

/** Runs this file in a child mode; a signal is a crash, a non-zero exit an error, else its JSON line. */
function runChild(scratch: string, mode: string, path: string, runs: number, spans: number): Promise<ChildOutcome> {
  return new Promise((done) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', benchFile, '--lmdb', scratch, '--child', mode, '--path', path, '--runs', String(runs), '--spans', String(spans)],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    )
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s))
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s))
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000) // a hang counts as a crash, by this child's pid
    child.once('close', (code, signal) => {
      clearTimeout(timer)
      if (signal !== null) return done({ outcome: 'crash', detail: signal, report: null })
      if (code !== 0)
        return done({
          outcome: 'error',
          detail: (
            stderr
              .trim()
              .split('\n')
              .find((l) => /error|MDB_/i.test(l)) ??
            stderr.trim().split('\n')[0] ??
            `exit ${code}`
          ).slice(0, 160),
          report: null,
        })
      const report = JSON.parse(stdout.trim().split('\n').at(-1)!) as Record<string, string>
      done({ outcome: report.outcome as Outcome, detail: report.detail ?? '', report })
    })
  })
}

/** The child side: reopen (time and RSS) or read every run back and classify. */
async function child(mode: string, scratch: string, path: string, runs: number, spans: number): Promise<number> {
  const start = performance.now()
  let known = 0
  let named: string | null = null
  const wrong: string[] = []
  const seen = new Set<number>()
  const expect = (index: number, rest: Buffer): void => {
    if (index >= runs || seen.has(index)) return void wrong.push(`run index ${index} unexpected`)
    seen.add(index)
    if (mode.startsWith('read') && !rest.equals(recordRest(index, spans))) wrong.push(`run ${index} differs`)
  }
  if (mode.endsWith('lmdb')) {
    const db = openLmdb(scratch, path)
    for (const { key, value } of db.getRange({})) {
      const index = checkLmdbEntry(key as Buffer, value as Buffer)
      if (index === null)
        named ??= `checksum of the entry for key ${(key as Buffer).toString('hex').slice(0, 32)} (${(key as Buffer).length} bytes)`
      else expect(index, (value as Buffer).subarray(8))
      known++
    }
  } else {
    const scan = scanJournal(path)
    named = scan.damage
    if (mode.startsWith('read')) {
      const bytes = readFileSync(path)
      for (const [index, at] of scan.index)
        expect(index, bytes.subarray(at + journalHeaderBytes + 8, at + journalHeaderBytes + bytes.readUInt32LE(at)))
    } else for (const index of scan.index.keys()) expect(index, Buffer.alloc(0))
    known = scan.index.size
  }
  const timeMs = performance.now() - start
  const missing = runs - seen.size
  if (missing > 0) wrong.push(`${missing} runs missing`)
  const status = readFileSync('/proc/self/status', 'utf8')
  const kib = (f: string): number => Number(new RegExp(`^${f}:\\s+(\\d+)`, 'm').exec(status)![1])
  const outcome: Outcome = named !== null ? 'named' : wrong.length > 0 ? 'silently wrong' : 'correct'
  const detail = named ?? wrong.slice(0, 2).join(', ')
  process.stdout.write(
    `${JSON.stringify({ outcome, detail, known, time: `${(timeMs / 1000).toFixed(2)} s`, rss: `${(kib('VmRSS') / 1024).toFixed(0)} / ${(kib('VmHWM') / 1024).toFixed(0)} MiB (anon ${(kib('RssAnon') / 1024).toFixed(0)}, file ${(kib('RssFile') / 1024).toFixed(0)})` })}\n`,
  )
  return 0
}

/** A small seeded PRNG: trials replay with --seed. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

process.exitCode = await main()
